"""A minimal, blocking MCP client over a `leanrig serve` subprocess's stdio — the MCP
counterpart of raw_lsp.py: one JSON line out, read lines until the answer, nothing else. It
measures what the server costs, without an MCP client library's own time (the official
Python SDK's client spends ~1.5 ms of CPU per call on this machine, inside the measured wall
time of every row that uses it)."""

from __future__ import annotations

import json
import subprocess
import sys
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
