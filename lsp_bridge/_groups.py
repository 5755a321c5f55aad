"""Structured concurrency without exception-group noise for callers.

Our task groups run one body plus helper loops that never raise; when the body fails, anyio
still wraps its error in an ``ExceptionGroup``. Callers expect the typed error itself. When
concurrent branches fail for one cause (e.g. two requests to a server that just died), every
branch raises the same kind of error: that is still one failure, reported as the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


@contextmanager
def single_errors() -> Iterator[None]:
    """Re-raise a group whose leaves are one exception, or several of one type, as the first
    of them; any other group (different failures at once) is re-raised as it is."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if not leaves or any(type(leaf) is not type(leaves[0]) for leaf in leaves):
            raise
        raise leaves[0] from None
