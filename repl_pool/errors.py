"""repl_pool's errors: subclasses of lsp_bridge's tree, named by the pool's states.

LeanrigError
└── PoolError
    ├── PoolBusy        no slot within the acquire deadline (queue position, waited s)
    ├── PoolClosed      the pool is shutting down or closed
    ├── SlotBroken      the slot's process died or was killed while you held it
    └── SandboxProgramMissing  LEANRIG_BWRAP / LEANRIG_PRLIMIT names no program
"""

from __future__ import annotations

from lsp_bridge.errors import LeanrigError


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
    """The operator named a sandbox program (``LEANRIG_BWRAP``, ``LEANRIG_PRLIMIT``) that is
    not there: running Lean without it, as if it were not installed, would drop the sandbox
    the operator asked for."""

    def __init__(self, variable: str, value: str) -> None:
        super().__init__(
            f"{variable}={value} is not an executable file",
            hint=f"point {variable} at the program, or unset it to use the system's",
        )
