"""How to start a Lean language server in a project (``ServerCommand``): its command line,
directory, environment and the options leanrig starts it with, and the file worker's command
derived from it.

Must not start anything or import the client's dependencies (``toolchain`` builds commands
without loading lsprotocol).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .timeouts import REPORT_DELAY_MS


@dataclass(frozen=True, slots=True)
class ServerCommand:
    """How to start a Lean language server in a project.

    ``argv`` is the full command (e.g. ``[lean, --server]`` or ``[lake, serve, --]``); server
    options are appended. ``env`` is the complete environment (None: inherit).
    """

    argv: tuple[str, ...]
    cwd: Path
    env: Mapping[str, str] | None = None
    report_delay_ms: int = REPORT_DELAY_MS
    edit_delay_ms: int = 1
    incremental_diagnostics: bool = True
    # Talk to one `lean --worker` per document instead of the watchdog (client.py's
    # docstring); only where ``worker_argv`` knows the worker's command.
    direct_workers: bool = False
    # With direct workers: end a step when Lean's reporter is known to have published the
    # version's last diagnostics, not when it answers the barrier (``LeanClient.update``).
    early_barrier: bool = True

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
        """The file worker's command: this command with ``lean --server`` made ``lean
        --worker`` (what the watchdog itself runs per document: the same executable, options
        and environment). None for ``lake serve``: Lake's watchdog gives its workers an
        environment of its own, which has not been checked against a full toolchain here."""
        argv = self.full_argv()
        # The last `--server` right after a `lean`: a sandbox wrapper's own arguments (a bind
        # of a directory named `lean-…`) come before the program.
        for at in range(len(argv) - 1, 0, -1):
            if argv[at] == "--server":
                name = argv[at - 1].rsplit("/", 1)[-1]
                if name != "lean" and not name.startswith("lean-"):
                    return None
                argv[at] = "--worker"
                return argv
        return None
