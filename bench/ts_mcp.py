"""The official MCP TypeScript SDK's client driving `leanrig serve` (bench/ts_client/driver.mjs
under Node.js): the client Node-based agent harnesses use, measured beside the official Python
SDK's client and the minimal one (raw_mcp.py). Installed on first use from the committed
lockfile into bench/ts_client/node_modules (`npm ci`; idempotent), never into leanrig itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_tools.servers import serve_argv

from .raw_lsp import piped

CLIENT = Path(__file__).with_name("ts_client")
SDK = "@modelcontextprotocol/sdk"


class TsClientUnavailable(RuntimeError):
    """No Node.js here, or its packages could not be installed: the row is left out."""


def sdk_version() -> str:
    return str(json.loads((CLIENT / "package.json").read_text())["dependencies"][SDK])


def ensure_ts_client() -> Path:
    """The node executable, with the pinned SDK installed (``npm ci`` when it is missing or
    another version)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise TsClientUnavailable("node and npm are not on PATH")
    # npm writes node_modules/.package-lock.json last: an interrupted install has none.
    installed = CLIENT / "node_modules" / ".package-lock.json"
    sdk = CLIENT / "node_modules" / SDK / "package.json"
    if (
        not installed.exists()
        or not sdk.exists()
        or json.loads(sdk.read_text())["version"] != sdk_version()
    ):
        try:
            done = subprocess.run(
                [npm, "ci", "--silent", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=CLIENT, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise TsClientUnavailable("npm ci took over 600 s") from exc
        if done.returncode != 0:
            raise TsClientUnavailable(f"npm ci failed: {done.stderr.strip()[-300:]}")
    return Path(node)


class TsMcp:
    """`leanrig serve` (as users run it) under the TypeScript SDK's client; ``call_tool``
    returns the structured result and the client's own wall time for the call."""

    def __init__(self, suite: Path, run_dir: Path, cwd: Path) -> None:
        node = ensure_ts_client()
        argv = [str(node), str(CLIENT / "driver.mjs"), *serve_argv(suite, run_dir)]
        self.proc, self.stdin, self.stdout = piped(argv, cwd)
        try:
            self._read()  # {"ready": true}: connected and initialized
        except (EOFError, RuntimeError, ValueError) as exc:
            self.close()  # no process left behind (nor a zombie)
            raise TsClientUnavailable(f"the TypeScript client did not start: {exc}") from exc

    def _read(self) -> dict[str, Any]:
        line = self.stdout.readline()
        if not line:
            raise EOFError("the TypeScript client exited")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return dict(reply)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], float]:
        self.stdin.write(json.dumps({"name": name, "arguments": arguments}).encode() + b"\n")
        self.stdin.flush()
        reply = self._read()
        assert not reply["is_error"], reply
        return dict(reply["structured"]), float(reply["ms"])

    def close(self) -> None:
        try:
            self.stdin.close()  # the driver closes its client, whose server exits on EOF
        except BrokenPipeError:
            pass  # the driver is gone already
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stdout.close()


if __name__ == "__main__":  # a quick look: python -m bench.ts_mcp SUITE TASK BODY
    suite, task, body = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    client = TsMcp(suite, Path("runs-ts"), Path.cwd())
    sid = client.call_tool("open_task", {"task_id": task})[0]["session_id"]
    print(client.call_tool("set_proof", {"session_id": sid, "body": body}))
    client.close()
