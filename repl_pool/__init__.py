"""repl_pool: owns Lean processes: a warm pool keyed by environment + header, health, limits.

Names load on first use (PEP 562): a part used alone must not import the rest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import Header as Header
from lsp_bridge import exports as _exports
from lsp_bridge import parse_header as parse_header

if TYPE_CHECKING:
    from .config import PoolConfig as PoolConfig
    from .config import RayOptions as RayOptions
    from .config import default_max_processes as default_max_processes
    from .environment import LeanEnvironment as LeanEnvironment
    from .errors import NoCluster as NoCluster
    from .errors import NodeLost as NodeLost
    from .errors import NoNodes as NoNodes
    from .errors import PoolBusy as PoolBusy
    from .errors import PoolClosed as PoolClosed
    from .errors import PoolError as PoolError
    from .errors import SandboxProgramMissing as SandboxProgramMissing
    from .errors import SlotBroken as SlotBroken
    from .goals import GoalsAnswer as GoalsAnswer
    from .goals import goals_in as goals_in
    from .goals import unless_refused as unless_refused
    from .node_actors import import_ray as import_ray
    from .node_actors import joined_cluster as joined_cluster
    from .node_routing import RESOURCE as RESOURCE
    from .oneshot import Completed as Completed
    from .oneshot import base_env as base_env
    from .oneshot import one_shot as one_shot
    from .oneshot import tree_rss as tree_rss
    from .placement import Placements as Placements
    from .placement import recording as recording
    from .pool import WarmPool as WarmPool
    from .pool_protocol import Pool as Pool
    from .pool_stats import PoolStats as PoolStats
    from .pool_stats import ProcessStat as ProcessStat
    from .ray_actor import Shipped as Shipped
    from .ray_actor import land as land
    from .ray_actor import ship as ship
    from .ray_pool import RayPool as RayPool
    from .reaper import ProcessReaper as ProcessReaper
    from .reaper import tagged_processes as tagged_processes
    from .remote_slot import node_of as node_of
    from .sandbox import CAP_DROP as CAP_DROP
    from .sandbox import SandboxPolicy as SandboxPolicy
    from .sandbox import hiding as hiding
    from .sandbox import kernel_guards as kernel_guards
    from .sandbox import listening_sockets as listening_sockets
    from .sandbox import probe_succeeds as probe_succeeds
    from .sandbox import sandbox_program as sandbox_program
    from .sandbox import sandbox_programs as sandbox_programs
    from .sandbox import sandbox_tools as sandbox_tools
    from .sandbox import sandbox_wrapper as sandbox_wrapper
    from .sandbox import socket_dirs as socket_dirs
    from .sandbox import uses_namespaces as uses_namespaces
    from .slot import Elaboration as Elaboration
    from .slot import PoolKey as PoolKey
    from .slot import Slot as Slot
    from .slot import lean_refused as lean_refused
    from .slot_queries import ask_in as ask_in

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
