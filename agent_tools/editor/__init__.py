"""editor: human baselines in a real editor — `leanrig lsp`, a scoped and timed raw-frame LSP
proxy in front of a sandboxed Lean server, and `leanrig edit`, the workspace that wires VS Code,
Neovim and Emacs to it. Uses tasks, verdict and sessions (the ledger); never cli."""

from .commands import add_edit_arguments, add_lsp_arguments, cmd_edit, cmd_lsp
from .edit_workspace import EditOptions, EditWorkspace, prepare_workspace
from .human_attempt import HumanAttempt
from .lsp import LspOptions, run_lsp
from .proxy import CHECK_COMMAND, EditorProxy, ProxyTimeouts
from .text_scope import Decision, TaskScope, apply_changes

__all__ = [
    "CHECK_COMMAND",
    "Decision",
    "EditOptions",
    "EditWorkspace",
    "EditorProxy",
    "HumanAttempt",
    "LspOptions",
    "ProxyTimeouts",
    "TaskScope",
    "add_edit_arguments",
    "add_lsp_arguments",
    "apply_changes",
    "cmd_edit",
    "cmd_lsp",
    "prepare_workspace",
    "run_lsp",
]
