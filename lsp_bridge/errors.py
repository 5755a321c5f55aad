"""The one exception tree of leanrig: every failure raises a subclass of ``LeanrigError``.

Errors are named by the resource's state and carry context as attributes; lower-level exceptions
are converted with ``raise ... from exc``. ``hint`` says what a caller should do next."""

from __future__ import annotations


class LeanrigError(Exception):
    """Root of every error leanrig raises."""

    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class LeanNotFound(LeanrigError):
    hint = "set LEANRIG_LEAN to a lean executable, install elan, or run `make setup`"


class BootstrapError(LeanrigError):
    hint = "run `make setup`; the bootstrap needs pip and a C compiler (cc)"


class DocumentError(LeanrigError):
    def __init__(self, message: str, *, path: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path


class ProtocolError(LeanrigError):
    hint = "the Lean server process was stopped; start a new one"


class ServerError(LeanrigError):
    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        stderr_tail: str = "",
        returncode: int | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.stderr_tail = stderr_tail
        self.returncode = returncode


class ServerStartFailed(ServerError):
    hint = "check `leanrig doctor`; the Lean executable did not start a language server"


class ServerDied(ServerError):
    hint = "the Lean process exited; retry on a fresh server"


class ServerClosed(ServerError):
    hint = "the server was closed; open a new one"


class RequestTimeout(ServerError):
    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(
            f"{method} got no answer within {seconds:g} s",
            hint="simplify the proof step or raise the deadline",
        )
        self.method = method
        self.seconds = seconds


class ResponseError(ServerError):
    def __init__(self, method: str, code: int, message: str, data: object = None) -> None:
        super().__init__(f"{method} failed: {message} (code {code})")
        self.method = method
        self.code = code
        self.data = data


class RequestCancelled(ResponseError):
    pass


class ContentModified(ResponseError):
    hint = "the document changed while the request ran; ask again for the new version"


class RpcNeedsReconnect(ResponseError):
    hint = "reconnect the RPC session"


class WorkerExited(ResponseError):
    hint = "the file worker exited (header change?); the next change restarts it"


class WorkerCrashed(ResponseError):
    hint = "the file worker crashed; the next change restarts it"


class ElaborationFailed(ServerError):
    hint = "the file could not be processed (fatal error); see the diagnostics"


_CODE_TO_ERROR: dict[int, type[ResponseError]] = {
    -32800: RequestCancelled,
    -32801: ContentModified,
    -32900: RpcNeedsReconnect,
    -32901: WorkerExited,
    -32902: WorkerCrashed,
}


def first_line(exc: BaseException) -> str:
    """The first line of what ``exc`` says (its type's name when it says nothing)."""
    said = str(exc).strip().splitlines()
    return said[0] if said else type(exc).__name__


def response_error(method: str, error: dict[str, object]) -> ResponseError:
    """The typed error for a JSON-RPC error object answering ``method``."""
    raw_code = error.get("code")
    code = raw_code if isinstance(raw_code, int) else -32603
    message = str(error.get("message", "unknown error"))
    cls = _CODE_TO_ERROR.get(code, ResponseError)
    return cls(method, code, message, error.get("data"))
