"""`leanrig serve`: the agent tools on one wire (MCP over stdio, JSON-RPC, or MCP over HTTP)."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ..servers import on_first, stop_signals

if TYPE_CHECKING:
    from ..sessions import ProofService


def cmd_serve(args: argparse.Namespace) -> int:
    from ..servers import (
        ServeOptions,
        claimed_stdio,
        freeze_heap,
        listen_local,
        open_service,
        run_event_loop,
    )
    from ..sessions import MAX_SESSIONS_PER_CLIENT, SHARED_CLIENT_SESSIONS

    options = ServeOptions(
        suite=Path(args.suite),
        run_dir=Path(args.run_dir),
        ledger=Path(args.ledger) if args.ledger else None,
        max_processes=args.max_processes,
        step_timeout=args.step_timeout,
        sandbox=not args.no_sandbox,
        task=args.task,
        ray=args.ray,
        condition="lad" if args.lad else args.condition,
        sessions_per_client=SHARED_CLIENT_SESSIONS
        if args.http is not None
        else MAX_SESSIONS_PER_CLIENT,
    )

    stdio = args.port is None and args.http is None
    stop_http = anyio.Event()  # set by a stop signal: graceful HTTP shutdown

    async def main() -> None:
        opened: list[ProofService] = []  # the service, once open
        with stop_signals() as signals:
            async with anyio.create_task_group() as tg:
                http = stop_http if args.http is not None else None
                stop = partial(_shut_down, opened, tg.cancel_scope, http)
                tg.start_soon(on_first, signals, stop)
                async with open_service(options) as service:
                    opened.append(service)
                    await run(service)
                    if stdio:
                        # The client closed stdin and waits for our exit: kill the trees now.
                        service.pool.kill_all("stdio client gone")
                tg.cancel_scope.cancel()

    async def run(service: ProofService) -> None:
        if args.jsonrpc:
            from ..servers import serve_stdio, serve_tcp

            freeze_heap()
            if args.port is None:
                await serve_stdio(service, wire)
            else:
                assert listener is not None
                await serve_tcp(service, listener, ready=_announce_port)
            return
        from ..servers import build_mcp

        server = build_mcp(service)
        freeze_heap()
        if args.http is not None:
            assert listener is not None
            await server.run_http_async(listener, stop_http, ready=_announce_url)
        else:
            await server.run_stdio_async(wire)

    # Wire and port are taken before any process starts: no child inherits the wire.
    listener = None if stdio else listen_local(args.http if args.port is None else args.port)
    with listener or nullcontext(), claimed_stdio() if stdio else nullcontext(None) as wire:
        run_event_loop(main)
    # A stdio client waits for the exit: skip the interpreter's final collections.
    gc.freeze()
    return 0


def _announce_port(port: int) -> None:
    print(f"leanrig: JSON-RPC on 127.0.0.1:{port}", file=sys.stderr, flush=True)


def _announce_url(url: str) -> None:
    print(f"leanrig: MCP (streamable HTTP) on {url}", file=sys.stderr, flush=True)


def _shut_down(
    opened: list[ProofService],
    scope: anyio.CancelScope,
    stop_http: anyio.Event | None,
    signum: int,
) -> None:
    """SIGTERM/SIGINT: kill every Lean process, then stop the server or cancel its start.

    A timer bounds the exit, which a thread blocked on stdin could delay."""
    for service in opened:
        service.pool.kill_all(f"signal {signum}")
    timer = threading.Timer(3.0, os._exit, (128 + signum,))
    timer.daemon = True
    timer.start()
    if opened and stop_http is not None:
        stop_http.set()
    else:
        scope.cancel()
