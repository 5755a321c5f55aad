"""A minimal, blocking MCP client over a `leanrig serve` subprocess's stdio — the MCP
counterpart of raw_lsp.py: one JSON line out, read lines until the answer, nothing else. It
measures what the server costs, without an MCP client library's own time (the official
Python SDK's client spends ~1.5 ms of CPU per call on this machine, inside the measured wall
time of every row that uses it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from agent_tools.servers import serve_argv

from .raw_lsp import piped


class RawMcp:
    def __init__(
        self, suite: Path, run_dir: Path, cwd: Path, module: tuple[str, ...] | None = None
    ) -> None:
        """``module``: run the server as ``python -m MODULE... serve ...`` (a wrapped
        `leanrig serve`, e.g. bench/step_stamps.py) instead of the CLI."""
        argv = serve_argv(suite, run_dir)
        if module is not None:
            argv = [sys.executable, "-m", *module, *argv[3:]]
        self.proc, self.stdin, self.stdout = piped(argv, cwd)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "raw-mcp", "version": "0"}})  # fmt: skip
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}})

    def _send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        self.stdin.flush()

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            line = self.stdout.readline()
            if not line:
                raise EOFError("leanrig serve exited")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        assert not result.get("isError"), result
        return dict(result["structuredContent"])

    def close(self) -> None:
        self.stdin.close()  # MCP's stdio shutdown: the server exits when its input ends
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stdout.close()


def time_set_proof(
    suite: Path, run_dir: Path, cwd: Path, task: str, right: str, wrong: str, steps: int
) -> list[float]:
    """ms per `set_proof`, alternating the right and the wrong body (two warm-up steps)."""
    (samples,) = time_sessions(suite, run_dir, cwd, (task,), right, wrong, steps)
    return samples


def time_two_sessions(
    suite: Path,
    run_dir: Path,
    cwd: Path,
    tasks: tuple[str, str],
    right: str,
    wrong: str,
    steps: int,
) -> tuple[list[float], list[float]]:
    """Two sessions on one server (``tasks``), taking turns step by step: ms per `set_proof`
    of each (two warm-up rounds)."""
    first, second = time_sessions(suite, run_dir, cwd, tasks, right, wrong, steps)
    return first, second


def time_sessions(
    suite: Path,
    run_dir: Path,
    cwd: Path,
    tasks: tuple[str, ...],
    right: str,
    wrong: str,
    steps: int,
) -> list[list[float]]:
    """One session per task on one server, taking turns step by step, each alternating the
    right and the wrong body: ms per `set_proof` of each (two warm-up rounds)."""
    client = RawMcp(suite, run_dir, cwd)
    try:
        sids = [client.call_tool("open_task", {"task_id": t})["session_id"] for t in tasks]
        samples: list[list[float]] = [[] for _ in tasks]
        for i in range(steps + 2):
            for k, sid in enumerate(sids):
                t = time.perf_counter()
                out = client.call_tool(
                    "set_proof", {"session_id": sid, "body": right if i % 2 == 0 else wrong}
                )
                ms = (time.perf_counter() - t) * 1000
                assert out["complete"] == (i % 2 == 0), out
                if i >= 2:
                    samples[k].append(ms)
        return samples
    finally:
        client.close()
