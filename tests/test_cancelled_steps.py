"""A cancelled step (MCP `notifications/cancelled`, a TCP reset, an HTTP client giving up) leaves
no Lean process elaborating it; `leanrig serve` runs as a subprocess on the demo suite."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from tests.rpc_client import DEMO, ROOT
from tests.test_network_servers import http_post, mcp_reply

# A step whose elaboration runs away until the step timeout kills it.
RUNAWAY = "  set_option maxRecDepth 100000000 in " + "(" * 100_000 + "h" + ")" * 100_000


def busiest_lean_cpu(server_pid: int, seconds: float = 1.0) -> float:
    """CPU percent of the busiest `lean` descendant of ``server_pid`` over ``seconds``."""
    procs = []
    for p in psutil.Process(server_pid).children(recursive=True):
        try:  # a child may exit meanwhile (a Lean worker the pool replaced)
            if p.name() == "lean":
                p.cpu_percent(None)
                procs.append(p)
        except psutil.NoSuchProcess:
            pass
    time.sleep(seconds)
    busiest = 0.0
    for p in procs:
        try:
            busiest = max(busiest, p.cpu_percent(None))
        except psutil.NoSuchProcess:
            pass
    return busiest


@contextmanager
def serving_on_a_port(*wire: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`leanrig serve --suite <demo> <wire> PORT` once it listens: the process and its port;
    terminated afterwards."""
    import socket

    from .test_network_servers import free_port

    port = free_port()
    cwd = tempfile.TemporaryDirectory(prefix="leanrig-port-")
    server = subprocess.Popen(
        [sys.executable, "-m", "agent_tools.cli", "serve", "--suite", str(DEMO), *wire, str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cwd.name,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=60).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.1)
        yield server, port
    finally:
        server.terminate()
        server.wait(20)
        cwd.cleanup()


class Stdio:
    """A `leanrig serve` subprocess spoken to line by line, every read with a deadline."""

    def __init__(self, *extra: str) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="leanrig-wire12-")
        self.cwd = self.tmp.name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent_tools.cli", "serve", "--suite", str(DEMO), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.cwd,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        self.buf = b""

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def reply(self, rid: Any, timeout: float = 60) -> dict[str, Any]:
        assert self.proc.stdout is not None
        end = time.monotonic() + timeout
        while True:
            while b"\n" not in self.buf:
                ready, _, _ = select.select([self.proc.stdout], [], [], end - time.monotonic())
                if not ready:
                    raise TimeoutError(f"no reply to {rid!r} within {timeout} s")
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert chunk, "server closed its output"
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            msg: dict[str, Any] = json.loads(line)
            if msg.get("id") == rid:
                return msg

    def call_tool(self, rid: Any, name: str, **args: Any) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/call",
                "params": {"name": name, "arguments": args},
            }
        )

    def lean_cpu(self, seconds: float = 1.0) -> float:
        return busiest_lean_cpu(self.proc.pid, seconds)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            self.tmp.cleanup()


def test_mcp_cancelled_step_does_not_leave_lean_elaborating_it() -> None:
    """`notifications/cancelled` for a runaway `set_proof`: Lean's CPU falls, the session
    stays usable, and its next step opens a fresh document at the next version."""
    server = Stdio()
    try:
        server.send(
            {
                "jsonrpc": "2.0",
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "wire12", "version": "0"},
                },
            }
        )
        server.reply("init", 60)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.call_tool(1, "open_task", task_id="and_swap")
        sid = server.reply(1, 60)["result"]["structuredContent"]["session_id"]
        server.call_tool(2, "set_proof", session_id=sid, body=RUNAWAY)
        time.sleep(2.0)
        server.send(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 2, "reason": "user"},
            }
        )
        server.call_tool(3, "get_proof_state", session_id=sid)
        assert not server.reply(3, 10)["result"].get("isError")
        deadline = time.monotonic() + 20
        cpu = server.lean_cpu()
        while cpu > 30 and time.monotonic() < deadline:
            cpu = server.lean_cpu()
        assert cpu <= 30, f"a Lean process still elaborates the cancelled step ({cpu:.0f}% CPU)"
        right = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"
        server.call_tool(4, "set_proof", session_id=sid, body=right)
        step = server.reply(4, 60)["result"]["structuredContent"]
        assert step["complete"] and step["version"] == 2, step
    finally:
        server.close()


def test_a_tcp_reset_cancels_the_client_s_runaway_step() -> None:
    """A JSON-RPC TCP client resetting its connection (not a half-close) mid-step: Lean's CPU
    falls, as the reset cancels the client's calls."""
    import socket
    import struct

    with serving_on_a_port("--jsonrpc", "--port") as (server, port):
        conn = socket.create_connection(("127.0.0.1", port), timeout=60)
        reader = conn.makefile("rb")

        def call(rid: int, name: str, **args: Any) -> dict[str, Any]:
            request = {"jsonrpc": "2.0", "id": rid, "method": name, "params": args}
            conn.sendall(json.dumps(request).encode() + b"\n")
            reply: dict[str, Any] = json.loads(reader.readline())
            return reply

        sid = call(1, "open_task", task_id="and_swap")["result"]["session_id"]
        request = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "set_proof",
            "params": {"session_id": sid, "body": RUNAWAY},
        }
        conn.sendall(json.dumps(request).encode() + b"\n")
        time.sleep(2.0)
        reader.close()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # with SO_LINGER 0: a reset
        busiest = busiest_lean_cpu(server.pid)
        end = time.monotonic() + 15
        while busiest > 30 and time.monotonic() < end:
            busiest = busiest_lean_cpu(server.pid)
        assert busiest <= 30, (
            f"a Lean process still elaborates the reset client's step ({busiest:.0f}%)"
        )


MODERN = "2026-07-28"


def _tool_call(
    era: str, rid: int, name: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """A `tools/call` message of ``era`` and the headers it goes with."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    headers = {"Accept": "application/json, text/event-stream"}
    if era == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers |= {"Mcp-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}, headers


@pytest.mark.parametrize(
    ("era", "in_session"),
    [(MODERN, False), ("2025-06-18", True), (MODERN, True)],
    ids=["stateless", "session", "stateless-with-a-session-header"],
)
def test_an_http_client_giving_up_on_its_runaway_step_cancels_it(
    era: str, in_session: bool, tmp_path: Path
) -> None:
    """Over `serve --http`, giving up as the revision says (2026-07-28: closing the connection;
    a handshake-era session: `notifications/cancelled`) stops the runaway step's Lean work,
    its ledger line says `cancelled`, and the session answers its next call."""
    import socket

    ledger = tmp_path / "ledger.jsonl"
    with serving_on_a_port("--ledger", str(ledger), "--http") as (server, port):
        session: dict[str, str] = {}
        accept = {"Accept": "application/json, text/event-stream"}
        if in_session:
            handshake = "2025-06-18"
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": handshake,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            got, _ = anyio.run(http_post, port, init, accept)
            session = {"Mcp-Session-Id": got["mcp-session-id"], "Mcp-Protocol-Version": handshake}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            anyio.run(http_post, port, initialized, accept | session)

        def call(rid: int, name: str, **arguments: Any) -> Any:
            message, headers = _tool_call(era, rid, name, arguments)
            got, body = anyio.run(http_post, port, message, session | headers)
            return mcp_reply(got, body)["result"]

        sid = call(1, "open_task", task_id="and_swap")["structuredContent"]["session_id"]
        message, headers = _tool_call(era, 2, "set_proof", {"session_id": sid, "body": RUNAWAY})
        body = json.dumps(message).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in (session | headers).items())
        conn = socket.create_connection(("127.0.0.1", port), timeout=60)
        try:
            conn.sendall(
                (
                    f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{head}\r\n"
                ).encode()
                + body
            )
            deadline = time.monotonic() + 30  # until its Lean is busy
            while busiest_lean_cpu(server.pid) <= 30:
                assert time.monotonic() < deadline, "the runaway step is not running"
            if era != MODERN:
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 2, "reason": "the client gave up"},
                }
                anyio.run(http_post, port, cancel, accept | session)
        finally:
            conn.close()  # the client gives up
        busiest = busiest_lean_cpu(server.pid)
        end = time.monotonic() + 15
        while busiest > 30 and time.monotonic() < end:
            busiest = busiest_lean_cpu(server.pid)
        assert busiest <= 30, f"a Lean process still elaborates the abandoned step ({busiest:.0f}%)"
        state = call(3, "get_proof_state", session_id=sid)
        assert not state.get("isError"), state
    steps = [json.loads(line) for line in ledger.read_text().splitlines()]
    outcomes = [e["outcome"] for e in steps if e["tool"] == "set_proof"]
    assert outcomes == ["cancelled"], steps
