"""Structured concurrency without exception-group noise: callers get the typed error itself.

Several errors of one type (one cause, e.g. a server that died) count as one failure."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def error_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions in ``exc``, nested groups flattened in order (``[exc]`` if no group)."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    out: list[BaseException] = []
    for inner in exc.exceptions:
        out.extend(error_leaves(inner))
    return out


@contextmanager
def single_errors() -> Iterator[None]:
    """Re-raise a group whose leaves all have one type as its first leaf; others unchanged."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = error_leaves(group)
        if not leaves or any(type(leaf) is not type(leaves[0]) for leaf in leaves):
            raise
        raise leaves[0] from None
