"""editor: human baselines in a real editor (`leanrig lsp` and `leanrig edit`); never uses cli.

Names load on first use (PEP 562), so the relay does not pay for the proxy's imports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

from .cli_commands import add_edit_arguments as add_edit_arguments
from .cli_commands import add_lsp_arguments as add_lsp_arguments
from .cli_commands import cmd_edit as cmd_edit
from .cli_commands import cmd_lsp as cmd_lsp

if TYPE_CHECKING:
    from .edit_workspace import EditOptions as EditOptions
    from .edit_workspace import EditWorkspace as EditWorkspace
    from .edit_workspace import prepare_workspace as prepare_workspace
    from .human_attempt import HumanAttempt as HumanAttempt
    from .lsp import LspOptions as LspOptions
    from .lsp import run_lsp as run_lsp
    from .proxy import CHECK_COMMAND as CHECK_COMMAND
    from .proxy import EditorProxy as EditorProxy
    from .proxy import ProxyTimeouts as ProxyTimeouts
    from .text_scope import Decision as Decision
    from .text_scope import TaskScope as TaskScope
    from .text_scope import apply_changes as apply_changes

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
