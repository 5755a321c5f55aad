"""sessions: proof sessions on warm Lean slots — the service behind every tool, edit scoping
per step, and the wall-clock ledger. Uses tasks and verdict."""

from .ledger import LEDGER_SCHEMA, Ledger, StepTimer
from .service import MAX_CANDIDATES, ProofService, ToolError, agent_error
from .session import AgentDiagnostic, ProofSession, StepResult

__all__ = [
    "LEDGER_SCHEMA",
    "MAX_CANDIDATES",
    "AgentDiagnostic",
    "Ledger",
    "ProofService",
    "ProofSession",
    "StepResult",
    "StepTimer",
    "ToolError",
    "agent_error",
]
