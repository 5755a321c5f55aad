"""Requests waiting for their answers, as plain objects the transport's reader resolves.

Must not read, write or wait for anything itself, nor know what the requests mean."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from .errors import LeanrigError, ResponseError

log = structlog.get_logger("leanrig.lsp")

Parse = Callable[[Any], Any]


@dataclass(slots=True)
class PendingRequest:
    method: str
    tag: str | None = None
    parse: Parse | None = None  # applied to the result when it arrives
    on_error: Callable[[LeanrigError], None] | None = None
    wake: Callable[[], None] | None = None  # told when it is answered (or ended)
    finished: bool = False
    result: Any = None
    error: LeanrigError | None = None

    def resolve(self, result: Any = None, error: LeanrigError | None = None) -> None:
        if self.finished:
            return
        if error is None and self.parse is not None:
            try:
                result = self.parse(result)
            except Exception as exc:  # a malformed answer fails its request, not the reader
                result, error = None, unreadable_answer(self.method, exc)
        self.result, self.error = result, error
        self.finished = True
        if self.wake is not None:
            self.wake()
        if error is not None and self.on_error is not None:
            self.on_error(error)


@dataclass(slots=True)
class Conditional:
    """Requests awaited only if ``needed()`` once the rest are in; else dropped, not cancelled."""

    requests: Sequence[tuple[str, Any, Parse | None]]
    needed: Callable[[], bool]
    waited: bool = False


def conditional_needed(conditional: Conditional) -> bool:
    """``needed()``, where a failing predicate says True and does not break the reader."""
    try:
        return conditional.needed()
    except Exception:
        log.exception("lsp.conditional_failed")
        return True


def unreadable_answer(method: str, exc: Exception) -> ResponseError:
    """An answer that could not be parsed, as an error answer (not a protocol break)."""
    return ResponseError(method, -32603, f"unreadable answer ({type(exc).__name__}: {exc})")
