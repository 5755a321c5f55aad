"""lsp_bridge: talks to Lean.

LSP transport, Lean extensions, positions, Lean's lexical syntax (comments, literals,
identifiers: ``lean_text``; the scopes open where: ``lean_scopes``), typed errors, finding
(and bootstrapping) Lean.

The LSP client's names (``client``, ``doc_queries``: they import lsprotocol's types, ~0.5 s
here) load on first use (PEP 562), so what needs only errors, positions, text edits or text
scanning does not pay for them.
"""

from typing import TYPE_CHECKING

from ._groups import error_leaves, single_errors
from .bootstrap import (
    PRELUDE_HEADER,
    PRELUDE_SORRY,
    cache_root,
    ensure_bootstrap,
    find_library_dir,
)
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
    first_line,
)
from .framing import decode_body, read_frames
from .header import Header, parse_header
from .lazy import lazy_attributes
from .lean_scopes import (
    COMMAND_KEYWORDS,
    SCOPE_KEYWORDS,
    OpenScopes,
    ScopeCommand,
    scope_commands,
    scopes_at,
)
from .lean_text import (
    COMMENT_KINDS,
    LITERAL_KINDS,
    LeanToken,
    TextScan,
    TokenKind,
    has_tactic_block,
    lean_tokens,
    lone_carriage_return,
    name_parts,
    scan_text,
)
from .lean_types import (
    SETUP_ARTEFACT_NOTE,
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
    without_setup_artefacts,
)
from .positions import LineIndex, LspPos, Pos
from .proctree import kill_tree, kill_tree_async, spawn_marked
from .server_command import ServerCommand
from .text_edits import TextEdit, apply_edit, common_prefix, minimal_edit
from .timeouts import DEFAULT_TIMEOUTS, REPORT_DELAY_MS, Timeouts
from .toolchain import LeanInstall, find_lean
from .trace import TRACE_EVENT

if TYPE_CHECKING:
    from .client import LeanClient, path_to_uri
    from .doc_queries import DocQuery

_LAZY = {
    "DocQuery": ("doc_queries", "DocQuery"),
    "LeanClient": ("client", "LeanClient"),
    "path_to_uri": ("client", "path_to_uri"),
}
__getattr__ = lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "COMMAND_KEYWORDS",
    "COMMENT_KINDS",
    "DEFAULT_TIMEOUTS",
    "LITERAL_KINDS",
    "PRELUDE_HEADER",
    "PRELUDE_SORRY",
    "REPORT_DELAY_MS",
    "SCOPE_KEYWORDS",
    "SETUP_ARTEFACT_NOTE",
    "TRACE_EVENT",
    "BootstrapError",
    "ContentModified",
    "DocQuery",
    "DocumentError",
    "DocumentReport",
    "ElaborationFailed",
    "FileProgress",
    "Header",
    "Hypothesis",
    "InteractiveGoal",
    "LeanClient",
    "LeanDiagnostic",
    "LeanInstall",
    "LeanNotFound",
    "LeanTag",
    "LeanToken",
    "LeanrigError",
    "LineIndex",
    "LspPos",
    "LspRange",
    "OpenScopes",
    "PlainGoal",
    "PlainTermGoal",
    "Pos",
    "ProtocolError",
    "RequestCancelled",
    "RequestTimeout",
    "ResponseError",
    "RpcNeedsReconnect",
    "ScopeCommand",
    "ServerClosed",
    "ServerCommand",
    "ServerDied",
    "ServerError",
    "ServerStartFailed",
    "Severity",
    "TextEdit",
    "TextScan",
    "Timeouts",
    "TokenKind",
    "WorkerCrashed",
    "WorkerExited",
    "apply_edit",
    "cache_root",
    "common_prefix",
    "decode_body",
    "ensure_bootstrap",
    "error_leaves",
    "find_lean",
    "find_library_dir",
    "first_line",
    "has_tactic_block",
    "kill_tree",
    "kill_tree_async",
    "lazy_attributes",
    "lean_tokens",
    "lone_carriage_return",
    "minimal_edit",
    "name_parts",
    "parse_header",
    "path_to_uri",
    "read_frames",
    "scan_text",
    "scope_commands",
    "scopes_at",
    "single_errors",
    "spawn_marked",
    "without_setup_artefacts",
]
