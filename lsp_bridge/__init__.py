"""lsp_bridge: talks to Lean.

LSP transport, Lean extensions, positions, typed errors, finding (and bootstrapping) Lean.
"""

from ._groups import single_errors
from .client import LeanClient, ServerCommand, TextEdit, apply_edit, minimal_edit, path_to_uri
from .errors import (
    BootstrapError,
    ContentModified,
    DocumentError,
    ElaborationFailed,
    LeanNotFound,
    LeanrigError,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    ResponseError,
    RpcNeedsReconnect,
    ServerClosed,
    ServerDied,
    ServerError,
    ServerStartFailed,
    WorkerCrashed,
    WorkerExited,
)
from .lean_types import (
    DocumentReport,
    FileProgress,
    Hypothesis,
    InteractiveGoal,
    LeanDiagnostic,
    LeanTag,
    LspRange,
    PlainGoal,
    PlainTermGoal,
    Severity,
)
from .positions import LineIndex, LspPos, Pos
from .timeouts import DEFAULT_TIMEOUTS, Timeouts
from .toolchain import LeanInstall, find_lean

__all__ = [
    "DEFAULT_TIMEOUTS",
    "BootstrapError",
    "ContentModified",
    "DocumentError",
    "DocumentReport",
    "ElaborationFailed",
    "FileProgress",
    "Hypothesis",
    "InteractiveGoal",
    "LeanClient",
    "LeanDiagnostic",
    "LeanInstall",
    "LeanNotFound",
    "LeanTag",
    "LeanrigError",
    "LineIndex",
    "LspPos",
    "LspRange",
    "PlainGoal",
    "PlainTermGoal",
    "Pos",
    "ProtocolError",
    "RequestCancelled",
    "RequestTimeout",
    "ResponseError",
    "RpcNeedsReconnect",
    "ServerClosed",
    "ServerCommand",
    "ServerDied",
    "ServerError",
    "ServerStartFailed",
    "Severity",
    "TextEdit",
    "Timeouts",
    "WorkerCrashed",
    "WorkerExited",
    "apply_edit",
    "find_lean",
    "minimal_edit",
    "path_to_uri",
    "single_errors",
]
