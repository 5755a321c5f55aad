"""The one exception tree of leanrig.

Every failure anywhere in leanrig raises a subclass of `LeanrigError`; no error dicts, no
None-for-error. Errors are named by the state of the resource, carry their context as
attributes, and lower-level exceptions are converted in one place with ``raise ... from exc``.
``hint`` says what a caller (often an agent) should do next.

    LeanrigError
    ├── LeanNotFound              no usable Lean executable (hint: how to get one)
    ├── BootstrapError            the zero-install Lean could not be built
    ├── DocumentError             bad input document (missing file, not UTF-8, unknown uri)
    ├── ProtocolError             the peer broke LSP framing or JSON-RPC
    ├── ServerError               anything the running Lean server did
    │   ├── ServerStartFailed     died or did not answer `initialize` in time
    │   ├── ServerDied            the process exited (exit code, stderr tail)
    │   ├── ServerClosed          used after close()
    │   ├── RequestTimeout        no answer before the deadline ($/cancelRequest was sent)
    │   ├── RequestCancelled      -32800
    │   ├── ContentModified       -32801 (the document changed under the request)
    │   ├── RpcNeedsReconnect     -32900
    │   ├── WorkerExited          -32901 (file worker exited, e.g. header change)
    │   ├── WorkerCrashed         -32902 (file worker crashed; restarts on next change)
    │   ├── ElaborationFailed     a version ended with a fatal error (fileProgress kind 2)
    │   └── ResponseError         any other JSON-RPC error answer
    └── (subclassed by repl_pool and agent_tools for their own states)
"""

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
    """What ``exc`` says, its first line (its type's name when it says nothing)."""
    said = str(exc).strip().splitlines()
    return said[0] if said else type(exc).__name__


def response_error(method: str, error: dict[str, object]) -> ResponseError:
    """The typed error for a JSON-RPC error object answering ``method``."""
    raw_code = error.get("code")
    code = raw_code if isinstance(raw_code, int) else -32603
    message = str(error.get("message", "unknown error"))
    cls = _CODE_TO_ERROR.get(code, ResponseError)
    return cls(method, code, message, error.get("data"))
