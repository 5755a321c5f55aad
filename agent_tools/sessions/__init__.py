"""sessions: proof sessions on warm Lean slots, the tool catalogue, and the timing ledger.

Names load on first use (PEP 562), so a part used alone does not import the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .catalogue import ALL_TOOLS as ALL_TOOLS
    from .catalogue import LIBRARY_TOOLS as LIBRARY_TOOLS
    from .catalogue import TOOL_BY_NAME as TOOL_BY_NAME
    from .catalogue import TOOLS as TOOLS
    from .catalogue import ToolDef as ToolDef
    from .catalogue import input_schema as input_schema
    from .catalogue import output_schema as output_schema
    from .catalogue import parse_input as parse_input
    from .catalogue import tools_for as tools_for
    from .errors import InvalidArguments as InvalidArguments
    from .errors import ToolError as ToolError
    from .errors import agent_error as agent_error
    from .ledger import LEDGER_SCHEMA as LEDGER_SCHEMA
    from .ledger import Ledger as Ledger
    from .ledger import StepTimer as StepTimer
    from .service import MAX_SESSIONS_PER_CLIENT as MAX_SESSIONS_PER_CLIENT
    from .service import SHARED_CLIENT_SESSIONS as SHARED_CLIENT_SESSIONS
    from .service import ProofService as ProofService
    from .session import ProofSession as ProofSession
    from .session import body_sha as body_sha
    from .tool_inputs import MAX_CANDIDATES as MAX_CANDIDATES
    from .tool_inputs import ToolInput as ToolInput
    from .tool_outputs import LedgerEntry as LedgerEntry
    from .tool_outputs import ToolFailure as ToolFailure
    from .tool_outputs import ToolOutput as ToolOutput

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
