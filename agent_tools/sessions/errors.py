"""Agent-facing errors: `ToolError(code, message, hint)`, and the one place (`agent_error`)
where lower-level failures become them — no paths, no stderr, always a next step."""

from __future__ import annotations

from lsp_bridge import LeanrigError, RequestTimeout
from repl_pool import PoolBusy, PoolClosed, lean_refused


class ToolError(LeanrigError):
    """An agent-facing failure: ``code`` is stable, the message says what to do next."""

    def __init__(self, message: str, *, code: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.code = code


class InvalidArguments(ToolError, ValueError):
    """Arguments not matching the input schema; a `ValueError` too, for "invalid params"."""

    def __init__(self, message: str, *, field: str | None) -> None:
        super().__init__(
            message,
            code="invalid_argument",
            hint="call the tool with the arguments its inputSchema lists (see tools/list)",
        )
        self.field = field


def agent_error(exc: LeanrigError) -> ToolError:
    """Lower-level errors as agent-facing messages (no paths, no stderr)."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, RequestTimeout):
        return ToolError(
            f"Lean did not finish within {round(exc.seconds, 1):g} s",
            code="timeout",
            hint="the proof step is too expensive; simplify it (the session is unchanged)",
        )
    if isinstance(exc, PoolBusy):
        return ToolError("all Lean processes are busy", code="busy", hint="retry in a moment")
    if isinstance(exc, PoolClosed):
        return ToolError("the server is shutting down", code="unavailable")
    if lean_refused(exc):
        return ToolError(
            f"Lean answered with an error: {exc.message}",
            code="lean_error",
            hint="Lean could not answer this (its process is fine and the session unchanged); "
            "asking the same again gets the same answer, so change the proof or the position",
        )
    return ToolError(
        f"Lean failed: {type(exc).__name__}",
        code="lean_failure",
        hint="retry the call; the Lean process was replaced",
    )


def unknown_session(session_id: str) -> ToolError:
    return ToolError(
        f"unknown session {session_id!r}",
        code="unknown_session",
        hint="open a task with open_task and use the session_id it returns",
    )


def rejected_edit(what: str, reason: str, mend: str, version: int) -> ToolError:
    """An edit of ``what`` ("edit", "statement") refused before it changed the session."""
    return ToolError(
        f"{what} rejected: {reason}",
        code="rejected",
        hint=f"{mend}; the session stays at version {version}",
    )
