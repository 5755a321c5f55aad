"""lsp_bridge: talks to Lean (LSP client, Lean's lexical syntax, positions, errors, toolchain).

The LSP client's names load on first use (PEP 562): importing lsprotocol's types is slow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .bootstrap import PRELUDE_HEADER as PRELUDE_HEADER
from .bootstrap import PRELUDE_SORRY as PRELUDE_SORRY
from .bootstrap import cache_root as cache_root
from .bootstrap import ensure_bootstrap as ensure_bootstrap
from .bootstrap import find_library_dir as find_library_dir
from .errors import BootstrapError as BootstrapError
from .errors import ContentModified as ContentModified
from .errors import DocumentError as DocumentError
from .errors import ElaborationFailed as ElaborationFailed
from .errors import LeanNotFound as LeanNotFound
from .errors import LeanrigError as LeanrigError
from .errors import ProtocolError as ProtocolError
from .errors import RequestCancelled as RequestCancelled
from .errors import RequestTimeout as RequestTimeout
from .errors import ResponseError as ResponseError
from .errors import RpcNeedsReconnect as RpcNeedsReconnect
from .errors import ServerClosed as ServerClosed
from .errors import ServerDied as ServerDied
from .errors import ServerError as ServerError
from .errors import ServerStartFailed as ServerStartFailed
from .errors import WorkerCrashed as WorkerCrashed
from .errors import WorkerExited as WorkerExited
from .errors import first_line as first_line
from .exception_groups import error_leaves as error_leaves
from .exception_groups import single_errors as single_errors
from .files import replace_file as replace_file
from .framing import decode_body as decode_body
from .framing import read_frames as read_frames
from .header import Header as Header
from .header import parse_header as parse_header
from .lazy import exports as exports
from .lean_scopes import COMMAND_KEYWORDS as COMMAND_KEYWORDS
from .lean_scopes import DECLARATION_KEYWORDS as DECLARATION_KEYWORDS
from .lean_scopes import SCOPE_KEYWORDS as SCOPE_KEYWORDS
from .lean_scopes import Declaration as Declaration
from .lean_scopes import OpenScopes as OpenScopes
from .lean_scopes import ScopeCommand as ScopeCommand
from .lean_scopes import declarations as declarations
from .lean_scopes import scope_commands as scope_commands
from .lean_scopes import scopes_at as scopes_at
from .lean_text import COMMENT_KINDS as COMMENT_KINDS
from .lean_text import LITERAL_KINDS as LITERAL_KINDS
from .lean_text import LeanToken as LeanToken
from .lean_text import TextScan as TextScan
from .lean_text import TokenKind as TokenKind
from .lean_text import brackets_balanced as brackets_balanced
from .lean_text import has_tactic_block as has_tactic_block
from .lean_text import is_identifier as is_identifier
from .lean_text import lean_tokens as lean_tokens
from .lean_text import lone_carriage_return as lone_carriage_return
from .lean_text import name_parts as name_parts
from .lean_text import scan_text as scan_text
from .lean_types import SETUP_ARTEFACT_NOTE as SETUP_ARTEFACT_NOTE
from .lean_types import DocumentReport as DocumentReport
from .lean_types import FileProgress as FileProgress
from .lean_types import Hypothesis as Hypothesis
from .lean_types import InteractiveGoal as InteractiveGoal
from .lean_types import LeanDiagnostic as LeanDiagnostic
from .lean_types import LeanTag as LeanTag
from .lean_types import LspRange as LspRange
from .lean_types import PlainGoal as PlainGoal
from .lean_types import PlainTermGoal as PlainTermGoal
from .lean_types import Severity as Severity
from .lean_types import without_setup_artefacts as without_setup_artefacts
from .positions import LineIndex as LineIndex
from .positions import LspPos as LspPos
from .positions import Pos as Pos
from .positions import utf16_len as utf16_len
from .proctree import descendants as descendants
from .proctree import kill_tree as kill_tree
from .proctree import kill_tree_async as kill_tree_async
from .proctree import spawn_marked as spawn_marked
from .programs import find_program as find_program
from .server_command import ServerCommand as ServerCommand
from .text_edits import TextEdit as TextEdit
from .text_edits import apply_edit as apply_edit
from .text_edits import common_prefix as common_prefix
from .text_edits import minimal_edit as minimal_edit
from .timeouts import DEFAULT_TIMEOUTS as DEFAULT_TIMEOUTS
from .timeouts import REPORT_DELAY_MS as REPORT_DELAY_MS
from .timeouts import Timeouts as Timeouts
from .toolchain import LeanInstall as LeanInstall
from .toolchain import find_lean as find_lean
from .trace import TRACE_EVENT as TRACE_EVENT

if TYPE_CHECKING:
    from .client import LeanClient as LeanClient
    from .client import path_to_uri as path_to_uri
    from .doc_queries import DocQuery as DocQuery

__all__, _getattr = exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
