"""agents: the agents leanrig ships, for `leanrig run --agent` (docs/agents.md) — MCP clients
of an attempt's server like any other agent: `leanrig agent search` (a model-free prover:
candidate terms tried with `try_proofs`; `search_agent.py`, its terms `candidate_terms.py`)
and `leanrig agent scripted` (a JSON plan of tool calls replayed; `scripted_agent.py`), on one
connection helper (`mcp_connection.py`: the attempt's MCP config, the official SDK's client,
usage.json).

Names load on first use (PEP 562): `leanrig agent …` imports only the agent it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .scripted_agent import replay as run_scripted_agent
    from .search_agent import search as run_search_agent

_LAZY: dict[str, tuple[str, str]] = {
    "run_scripted_agent": ("scripted_agent", "replay"),
    "run_search_agent": ("search_agent", "search"),
}
__all__ = ["run_scripted_agent", "run_search_agent"]
__getattr__ = _lazy_attributes(__name__, globals(), _LAZY)
