"""How to start a Lean language server in a project, and the file worker's command from it.

Must not start anything or import the client's dependencies (such as lsprotocol)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .timeouts import REPORT_DELAY_MS


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """How to start a Lean language server in a project.

    ``argv`` is the full command (e.g. ``[lean, --server]`` or ``[lake, serve, --]``); server
    options are appended. ``env`` is the complete environment (None: inherit)."""

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str] | None = None
    report_delay_ms: int = REPORT_DELAY_MS
    edit_delay_ms: int = 1
    incremental_diagnostics: bool = True
    direct_workers: bool = False  # one `lean --worker` per document, no watchdog
    early_barrier: bool = True  # direct workers: see ``client.EarlyBarrier``

    @property
    def program(self) -> str:
        """The Lean (or lake) executable, past any sandbox wrapper in front of it."""
        for arg in self.argv:
            name = arg.rsplit("/", 1)[-1]
            if name in ("lean", "lake") or name.startswith(("lean-", "lake-")):
                return arg
        return self.argv[0]

    def full_argv(self) -> list[str]:
        return [*self.argv, f"-Dserver.reportDelayMs={self.report_delay_ms}"]

    def worker_argv(self) -> list[str] | None:
        """This command with ``lean --server`` made ``lean --worker``; None for ``lake serve``."""
        argv = self.full_argv()
        # The last `--server` after a `lean`: a sandbox wrapper's arguments come first.
        for at in range(len(argv) - 1, 0, -1):
            if argv[at] == "--server":
                name = argv[at - 1].rsplit("/", 1)[-1]
                if name != "lean" and not name.startswith("lean-"):
                    return None
                argv[at] = "--worker"
                return argv
        return None
