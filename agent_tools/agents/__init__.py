"""agents: the agents leanrig ships for `leanrig run --agent` (docs/agents.md), MCP clients.

Names load on first use (PEP 562): `leanrig agent …` imports only the agent it runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .candidate_terms import Signature as Signature
    from .candidate_terms import Sym as Sym
    from .candidate_terms import TermError as TermError
    from .candidate_terms import parse_signature as parse_signature
    from .scripted_agent import run_scripted_agent as run_scripted_agent
    from .search_agent import Fact as Fact
    from .search_agent import Problem as Problem
    from .search_agent import prove as prove
    from .search_agent import run_search_agent as run_search_agent

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
