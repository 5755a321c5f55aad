"""One attempt's task-bound service, owned by the runner, served as MCP on a Unix socket.

Failing to open, serve or close is an infrastructure failure; ``failed`` is set at once."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Final

import anyio
import structlog
from anyio.abc import SocketListener

from ..servers import ServeOptions, open_service, serve_mcp_listener
from ..sessions import ProofService

log = structlog.get_logger("leanrig.run")

ServiceFactory = Callable[[ServeOptions], AbstractAsyncContextManager[ProofService]]
CLOSE_DEADLINE: Final = 30.0  # seconds the service may take to close before it is cancelled


class AttemptServer:
    def __init__(
        self,
        options: ServeOptions,
        socket: Path,
        factory: ServiceFactory | None = None,
    ) -> None:
        self.options = options
        self.socket = socket
        self.factory: ServiceFactory = factory or open_service
        self.failure: str | None = None
        self.failed = anyio.Event()
        self.open_s: float | None = None  # the service's open, from the start of `run`
        self.close_s: float | None = None  # from `stop` until the service is closed
        self._listener: SocketListener | None = None
        self._serving: anyio.CancelScope | None = None
        self._outer = anyio.CancelScope()
        self._stopping = False
        self._done = anyio.Event()

    async def bind(self) -> None:
        """Listen on the socket; call before the agent starts."""
        await anyio.Path(self.socket.parent).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._listener = await anyio.create_unix_listener(self.socket)

    async def run(self) -> None:
        """Open the service and serve until `stop`; run it in the attempt's task group."""
        assert self._listener is not None, "bind() first"
        t0 = time.perf_counter()
        try:
            with self._outer:
                async with self.factory(self.options) as service:
                    self.open_s = time.perf_counter() - t0
                    if not self._stopping:
                        with anyio.CancelScope() as self._serving:
                            await serve_mcp_listener(service, self._listener)
                        if not self._serving.cancel_called:
                            self._fail("the service stopped serving on its own")
                    # Nothing in the attempt's Lean is kept: no polite shutdown on our clock.
                    service.pool.kill_all("attempt ended")
        except Exception as exc:
            self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            with anyio.CancelScope(shield=True):
                await self._listener.aclose()  # idempotent: serving closed it already
                await anyio.Path(self.socket).unlink(missing_ok=True)
            self._done.set()

    def _fail(self, why: str) -> None:
        # Even after the agent exited: the attempt's record may be incomplete, so it is retried.
        log.warning("run.service_failed", task=self.options.task, why=why)
        self.failure = f"leanrig's service failed: {why}"
        self.failed.set()

    async def stop(self) -> None:
        """End serving (every connection closed), then close the service; bounded."""
        t0 = time.perf_counter()
        self._stopping = True
        # Still opening: let it finish (a cancelled open could cut its pool's cleanup short).
        if self._serving is not None:
            self._serving.cancel()
        with anyio.move_on_after(CLOSE_DEADLINE) as waited:
            await self._done.wait()
        if waited.cancelled_caught:
            log.warning("run.service_close_slow", task=self.options.task)
            self._outer.cancel()
            with anyio.fail_after(CLOSE_DEADLINE):
                await self._done.wait()
        self.close_s = time.perf_counter() - t0
