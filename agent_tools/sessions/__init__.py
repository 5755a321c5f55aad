"""sessions: proof sessions on warm Lean slots — the service behind every tool, the typed tool
catalogue it answers with, edit scoping per step, and the wall-clock ledger. Uses tasks,
verdict and library.

Names load on first use (PEP 562): a part used alone (a model, an error) must not import the
rest (Lean's LSP types, the MCP SDK: ~1 s here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .catalogue import (
        ALL_TOOLS,
        LIBRARY_TOOLS,
        TOOL_BY_NAME,
        TOOLS,
        ToolDef,
        input_schema,
        output_schema,
        parse_input,
        tools_for,
    )
    from .errors import InvalidArguments, ToolError, agent_error
    from .files import replace_file
    from .ledger import LEDGER_SCHEMA, Ledger, StepTimer
    from .service import MAX_SESSIONS_PER_CLIENT, SHARED_CLIENT_SESSIONS, ProofService
    from .session import ProofSession, body_sha
    from .tool_inputs import MAX_CANDIDATES, ToolInput
    from .tool_outputs import LedgerEntry, ToolFailure, ToolOutput

# name -> (submodule, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "ALL_TOOLS": ("catalogue", "ALL_TOOLS"),
    "InvalidArguments": ("errors", "InvalidArguments"),
    "LEDGER_SCHEMA": ("ledger", "LEDGER_SCHEMA"),
    "LIBRARY_TOOLS": ("catalogue", "LIBRARY_TOOLS"),
    "Ledger": ("ledger", "Ledger"),
    "LedgerEntry": ("tool_outputs", "LedgerEntry"),
    "MAX_CANDIDATES": ("tool_inputs", "MAX_CANDIDATES"),
    "MAX_SESSIONS_PER_CLIENT": ("service", "MAX_SESSIONS_PER_CLIENT"),
    "ProofService": ("service", "ProofService"),
    "ProofSession": ("session", "ProofSession"),
    "SHARED_CLIENT_SESSIONS": ("service", "SHARED_CLIENT_SESSIONS"),
    "StepTimer": ("ledger", "StepTimer"),
    "TOOLS": ("catalogue", "TOOLS"),
    "TOOL_BY_NAME": ("catalogue", "TOOL_BY_NAME"),
    "ToolDef": ("catalogue", "ToolDef"),
    "ToolError": ("errors", "ToolError"),
    "ToolFailure": ("tool_outputs", "ToolFailure"),
    "ToolInput": ("tool_inputs", "ToolInput"),
    "ToolOutput": ("tool_outputs", "ToolOutput"),
    "agent_error": ("errors", "agent_error"),
    "body_sha": ("session", "body_sha"),
    "input_schema": ("catalogue", "input_schema"),
    "output_schema": ("catalogue", "output_schema"),
    "parse_input": ("catalogue", "parse_input"),
    "replace_file": ("files", "replace_file"),
    "tools_for": ("catalogue", "tools_for"),
}


__getattr__ = _lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "ALL_TOOLS",
    "LEDGER_SCHEMA",
    "LIBRARY_TOOLS",
    "MAX_CANDIDATES",
    "MAX_SESSIONS_PER_CLIENT",
    "SHARED_CLIENT_SESSIONS",
    "TOOLS",
    "TOOL_BY_NAME",
    "InvalidArguments",
    "Ledger",
    "LedgerEntry",
    "ProofService",
    "ProofSession",
    "StepTimer",
    "ToolDef",
    "ToolError",
    "ToolFailure",
    "ToolInput",
    "ToolOutput",
    "agent_error",
    "body_sha",
    "input_schema",
    "output_schema",
    "parse_input",
    "replace_file",
    "tools_for",
]
