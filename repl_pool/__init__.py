"""repl_pool: owns Lean processes: a warm pool keyed by environment + header, health, limits.

Names load on first use (PEP 562): a part used alone (a model, an error) must not import the
rest (Lean's LSP types, the MCP SDK: ~1 s here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import Header, parse_header
from lsp_bridge import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .cluster import RayPool
    from .config import PoolConfig, RayOptions, default_max_processes
    from .environment import LeanEnvironment
    from .errors import (
        NodeLost,
        NoNodes,
        PoolBusy,
        PoolClosed,
        PoolError,
        SandboxProgramMissing,
        SlotBroken,
    )
    from .goals import GoalsAnswer, goals_in, unless_refused
    from .oneshot import Completed, base_env, run_once, tree_rss
    from .placement import Placements, recording
    from .pool import WarmPool
    from .pool_protocol import Pool
    from .pool_stats import PoolStats, ProcessStat
    from .remote_slot import node_of
    from .sandbox import (
        CAP_DROP,
        SandboxPolicy,
        hiding,
        probe_succeeds,
        sandbox_program,
        sandbox_programs,
        uses_namespaces,
    )
    from .sandbox import available as sandbox_tools
    from .sandbox import wrapper as sandbox_wrapper
    from .slot import Elaboration, PoolKey, Slot, lean_refused

# name -> (submodule, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "Completed": ("oneshot", "Completed"),
    "Elaboration": ("slot", "Elaboration"),
    "GoalsAnswer": ("goals", "GoalsAnswer"),
    "LeanEnvironment": ("environment", "LeanEnvironment"),
    "NoNodes": ("errors", "NoNodes"),
    "NodeLost": ("errors", "NodeLost"),
    "Placements": ("placement", "Placements"),
    "Pool": ("pool_protocol", "Pool"),
    "PoolBusy": ("errors", "PoolBusy"),
    "PoolClosed": ("errors", "PoolClosed"),
    "PoolConfig": ("config", "PoolConfig"),
    "PoolError": ("errors", "PoolError"),
    "SandboxProgramMissing": ("errors", "SandboxProgramMissing"),
    "PoolKey": ("slot", "PoolKey"),
    "PoolStats": ("pool_stats", "PoolStats"),
    "ProcessStat": ("pool_stats", "ProcessStat"),
    "RayOptions": ("config", "RayOptions"),
    "RayPool": ("cluster", "RayPool"),
    "SandboxPolicy": ("sandbox", "SandboxPolicy"),
    "Slot": ("slot", "Slot"),
    "SlotBroken": ("errors", "SlotBroken"),
    "WarmPool": ("pool", "WarmPool"),
    "base_env": ("oneshot", "base_env"),
    "default_max_processes": ("config", "default_max_processes"),
    "goals_in": ("goals", "goals_in"),
    "lean_refused": ("slot", "lean_refused"),
    "node_of": ("remote_slot", "node_of"),
    "recording": ("placement", "recording"),
    "run_once": ("oneshot", "run_once"),
    "CAP_DROP": ("sandbox", "CAP_DROP"),
    "hiding": ("sandbox", "hiding"),
    "probe_succeeds": ("sandbox", "probe_succeeds"),
    "sandbox_program": ("sandbox", "sandbox_program"),
    "sandbox_programs": ("sandbox", "sandbox_programs"),
    "sandbox_tools": ("sandbox", "available"),
    "sandbox_wrapper": ("sandbox", "wrapper"),
    "tree_rss": ("oneshot", "tree_rss"),
    "unless_refused": ("goals", "unless_refused"),
    "uses_namespaces": ("sandbox", "uses_namespaces"),
}


__getattr__ = _lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "CAP_DROP",
    "Completed",
    "Elaboration",
    "GoalsAnswer",
    "Header",
    "LeanEnvironment",
    "NoNodes",
    "NodeLost",
    "Placements",
    "Pool",
    "PoolBusy",
    "PoolClosed",
    "PoolConfig",
    "PoolError",
    "PoolKey",
    "PoolStats",
    "ProcessStat",
    "RayOptions",
    "RayPool",
    "SandboxPolicy",
    "SandboxProgramMissing",
    "Slot",
    "SlotBroken",
    "WarmPool",
    "base_env",
    "default_max_processes",
    "goals_in",
    "hiding",
    "lean_refused",
    "node_of",
    "parse_header",
    "probe_succeeds",
    "recording",
    "run_once",
    "sandbox_program",
    "sandbox_programs",
    "sandbox_tools",
    "sandbox_wrapper",
    "tree_rss",
    "unless_refused",
    "uses_namespaces",
]
