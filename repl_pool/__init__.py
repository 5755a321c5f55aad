"""repl_pool: owns Lean processes: a warm pool keyed by environment + header, health, limits."""

from .cluster import NodeLost, NoNodes, RayOptions, RayPool, node_of
from .config import PoolConfig
from .environment import LeanEnvironment
from .errors import PoolBusy, PoolClosed, PoolError, SlotBroken
from .header import Header, parse_header
from .placement import Placements, recording
from .pool import PoolStats, ProcessStat, WarmPool
from .slot import PoolKey, Slot

__all__ = [
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
    "Slot",
    "SlotBroken",
    "WarmPool",
    "node_of",
    "parse_header",
    "recording",
]
