"""repl_pool's errors: subclasses of lsp_bridge's tree, named by the pool's states."""

from __future__ import annotations

from lsp_bridge import LeanrigError, ServerError, first_line


class PoolError(LeanrigError):
    pass


class PoolBusy(PoolError):
    hint = "all Lean processes are busy; retry later or raise max_processes"

    def __init__(self, key: str, waited: float, queued: int) -> None:
        super().__init__(
            f"no Lean process free for {key!r} within {waited:.1f} s ({queued} queued)"
        )
        self.key = key
        self.waited = waited
        self.queued = queued


class PoolClosed(PoolError):
    hint = "the pool was closed; create a new one"


class SlotBroken(PoolError):
    hint = "the Lean process was replaced; retry the step"


class SandboxProgramMissing(PoolError):
    """``LEANRIG_BWRAP``/``LEANRIG_PRLIMIT`` names no program: never silently run unsandboxed."""

    def __init__(self, variable: str, value: str) -> None:
        super().__init__(
            f"{variable}={value} is not an executable file",
            hint=f"point {variable} at the program, or unset it to use the system's",
        )


class NodeLost(ServerError):
    """A Ray node (or its actor) stopped answering; the step may be retried on another node."""

    hint = "the Lean node was lost; retry the step (it runs on another node)"

    def __init__(self, node_id: str, reason: str) -> None:
        super().__init__(f"Ray node {node_id[:12]} lost: {reason}")
        self.node_id = node_id


class NoNodes(PoolError):
    hint = "no Ray node offers lean_slots; start nodes with --resources '{\"lean_slots\": N}'"


class NoCluster(PoolError):
    """``ray.init`` could not join the cluster (none running, a wrong address)."""

    hint = (
        "start a cluster (`ray start --head --resources '{\"lean_slots\": 4}'`, "
        "docs/scale-out.md) or pass its address: --ray HOST:PORT"
    )

    def __init__(self, address: str | None, cause: BaseException) -> None:
        super().__init__(
            f"cannot join a Ray cluster at {address or 'a new local instance'!r}: "
            + first_line(cause)
        )
