"""Structured concurrency without exception-group noise for callers.

Our task groups run one body plus helper loops that never raise; when the body fails, anyio
still wraps its error in an ``ExceptionGroup``. Callers expect the typed error itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def single_errors() -> Iterator[None]:
    """Re-raise a group holding exactly one exception as that exception (recursively)."""
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from None
