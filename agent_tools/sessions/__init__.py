"""sessions: proof sessions on warm Lean slots — the service behind every tool, the typed tool
catalogue it answers with, edit scoping per step, and the wall-clock ledger. Uses tasks,
verdict and library."""

from .catalogue import (
    ALL_TOOLS,
    LIBRARY_TOOLS,
    MAX_CANDIDATES,
    TOOL_BY_NAME,
    TOOLS,
    LedgerEntry,
    ToolDef,
    ToolFailure,
    ToolInput,
    ToolOutput,
    input_schema,
    output_schema,
    parse_input,
    tools_for,
)
from .errors import InvalidArguments, ToolError, agent_error
from .ledger import LEDGER_SCHEMA, Ledger, StepTimer
from .service import MAX_SESSIONS_PER_CLIENT, SHARED_CLIENT_SESSIONS, ProofService
from .session import ProofSession

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
    "input_schema",
    "output_schema",
    "parse_input",
    "tools_for",
]
