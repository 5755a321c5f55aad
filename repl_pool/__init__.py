"""repl_pool: owns Lean processes: a warm pool keyed by environment + header, health, limits."""

from lsp_bridge import Header, parse_header

from .cluster import NodeLost, NoNodes, RayOptions, RayPool, node_of, protocol_stdout
from .config import PoolConfig, default_max_processes
from .environment import LeanEnvironment
from .errors import PoolBusy, PoolClosed, PoolError, SlotBroken
from .goals import GoalsAnswer, goals_in, unless_refused
from .oneshot import Completed, base_env, run_once, tree_rss
from .placement import Placements, recording
from .pool import PoolStats, ProcessStat, WarmPool
from .sandbox import SandboxPolicy, uses_namespaces
from .sandbox import available as sandbox_tools
from .sandbox import wrapper as sandbox_wrapper
from .slot import Elaboration, PoolKey, Slot, lean_refused

__all__ = [
    "Completed",
    "Elaboration",
    "GoalsAnswer",
    "Header",
    "LeanEnvironment",
    "NoNodes",
    "NodeLost",
    "Placements",
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
    "Slot",
    "SlotBroken",
    "WarmPool",
    "base_env",
    "default_max_processes",
    "goals_in",
    "lean_refused",
    "node_of",
    "parse_header",
    "protocol_stdout",
    "recording",
    "run_once",
    "sandbox_tools",
    "sandbox_wrapper",
    "tree_rss",
    "unless_refused",
    "uses_namespaces",
]
