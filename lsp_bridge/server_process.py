"""A spawned language server seen from outside its conversation: stderr, kill, why it exited.

Must not read or write stdin/stdout, nor decide when the process ends (its owner does)."""

from __future__ import annotations

from collections import deque

import anyio
from anyio.abc import Process

from .errors import ServerDied
from .proctree import kill_tree, kill_tree_async

STDERR_TAIL_BYTES = 16 * 1024
STDERR_DRAIN_SECONDS = 1.0  # wait for the rest of stderr (why it exited) before reporting


class ServerProcess:
    """``process`` (started by ``proctree.spawn_marked``) and its kill ``token``."""

    __slots__ = ("_stderr", "_stderr_done", "_stderr_size", "process", "token")

    def __init__(self, process: Process, token: str) -> None:
        self.process = process
        self.token = token
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_done = anyio.Event()

    def stderr_tail(self) -> str:
        return b"".join(self._stderr).decode("utf-8", "replace")

    async def collect_stderr(self) -> None:
        """Keep the last `STDERR_TAIL_BYTES` of stderr until it ends (run as a task)."""
        try:
            if self.process.stderr is None:
                return
            async for chunk in self.process.stderr:
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > STDERR_TAIL_BYTES and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            self._stderr_done.set()

    def kill(self) -> None:
        kill_tree(self.token, self.process.pid)

    async def kill_async(self) -> None:
        # Once the leader is gone, finding orphans takes a /proc scan: off the event loop.
        await kill_tree_async(self.token, self.process.pid)

    async def exit_failure(self) -> ServerDied:
        """Why the process exited on its own, from stderr; kills orphans holding the pipe first."""
        await self.kill_async()
        with anyio.CancelScope(shield=True), anyio.move_on_after(STDERR_DRAIN_SECONDS):
            await self._stderr_done.wait()
        tail = self.stderr_tail()
        cause = last_line(tail)
        return ServerDied(
            f"Lean server exited with code {self.process.returncode}"
            + (f": {cause}" if cause else ""),
            stderr_tail=tail,
            returncode=self.process.returncode,
        )


def last_line(text: str, limit: int = 500) -> str:
    """The last non-blank line of ``text``, at most ``limit`` characters."""
    for line in reversed(text.splitlines()):
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""
