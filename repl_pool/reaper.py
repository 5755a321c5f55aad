"""`ProcessReaper`: no process tagged ``<var>=<tag>`` outlives its owner, however the owner ends.

A detached reaper kills every tagged process when its stdin pipe (held by the owner) hits EOF,
even after a SIGKILL. It must not know what the tagged processes are."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from typing import IO, Final

START_DEADLINE: Final = 10.0

_SCRIPT: Final = r"""
import os, signal, sys
if os.fork():
    os._exit(0)
sys.stdout.write(f"{os.getpid()}\n")
sys.stdout.flush()
needle = (sys.argv[1] + "=" + sys.argv[2]).encode()
sys.stdin.buffer.read()  # EOF: the owner is gone (closed, crashed or killed)
for _ in range(2):
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                marked = needle in fh.read().split(b"\0")
            if marked:
                os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass
"""


class ProcessReaper:
    """``close()`` or the owner's death makes it kill every process tagged ``var=tag``."""

    def __init__(self, var: str, tag: str) -> None:
        self.var = var
        self.tag = tag
        # Forked away: Ray kills a leaving worker's direct children before they could sweep.
        self._pid: int | None = None
        self._done: IO[bytes] | None = None  # its stdout: EOF once it has swept
        self._pipe: int | None = None

    def start(self, timeout: float = START_DEADLINE) -> None:
        read_end, write_end = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != self.var}  # it must spare itself
        try:
            launcher = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SCRIPT, self.var, self.tag],
                stdin=read_end,
                env=env,
                stdout=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(read_end)
        os.set_inheritable(write_end, False)
        self._pipe = write_end
        assert launcher.stdout is not None
        self._done = launcher.stdout
        launcher.wait(timeout)  # it exits once it has forked
        ready, _, _ = select.select([self._done], [], [], timeout)
        line = self._done.readline() if ready else b""
        if not line.strip().isdigit():
            self.close()
            raise OSError(f"the process reaper did not start within {timeout:g} s")
        self._pid = int(line)

    def close(self) -> None:
        """Send EOF to the reaper: it sweeps and exits (idempotent)."""
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None

    def wait(self, timeout: float) -> None:
        """Wait until the reaper has swept (``close`` first); kill it if it takes longer."""
        if self._done is None:
            return
        ready, _, _ = select.select([self._done], [], [], timeout)
        if (not ready or self._done.read(1)) and self._pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self._pid, signal.SIGKILL)
        self._done.close()
        self._done = None

    def tagged(self) -> list[int]:
        """Every live process carrying the tag."""
        return tagged_processes(self.var, self.tag)


def tagged_processes(var: str, tag: str) -> list[int]:
    needle = f"{var}={tag}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


__all__ = ["ProcessReaper", "tagged_processes"]
