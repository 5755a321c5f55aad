"""Structured concurrency without exception-group noise for callers.

Our task groups run one body plus helper loops that never raise; when the body fails, anyio
still wraps its error in an ``ExceptionGroup``. Callers expect the typed error itself. When
concurrent branches fail for one cause (e.g. two requests to a server that just died), every
branch raises the same kind of error: that is still one failure, reported as the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def error_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in ``exc``: a group's, nested groups walked, in order; else ``exc``."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    out: list[BaseException] = []
    for inner in exc.exceptions:
        out.extend(error_leaves(inner))
    return out


@contextmanager
def single_errors() -> Iterator[None]:
    """Re-raise a group whose leaves are one exception, or several of one type, as the first
    of them; any other group (different failures at once) is re-raised as it is."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = error_leaves(group)
        if not leaves or any(type(leaf) is not type(leaves[0]) for leaf in leaves):
            raise
        raise leaves[0] from None
