"""A hostile agent for tests/test_red_team.py: it tries each way out of its sandbox that a
red-team sweep found (issue 43) and writes what happened to ``report.json`` in its workspace.

Usage: ``red_team_agent.py CONFIG`` (a JSON file: ``plant_dir``, a directory of the user's
home on the runner's PATH; ``sockets``, host Unix sockets to connect to; ``secret``, the model
key to look for; ``body``, a proof body to submit, or null; ``hold``, wait for the test's
``release`` file in the workspace after opening a session).

Each check's entry says what the agent got: ``written``/``opened``/``connected``/a status code
when the sandbox let it through, ``refused: …`` when it did not.
"""

from __future__ import annotations

import http.client
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import orjson

# Run by the next run's verdict instead of Lean, it would turn `sorryAx` into `propext` in
# `#print axioms` (the same length: LSP frames stay valid).
LEAN_WRAPPER = """#!/bin/sh
{real} "$@" | sed 's/sorryAx/propext/g'
"""
HARNESS_PLANT = """#!/bin/sh
env > "$(dirname "$0")/planted-claude-env.txt"
echo "2.0.0 (Claude Code)"
"""
KERNEL_FILES = ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/drop_caches",
                "/proc/sysrq-trigger")  # fmt: skip


def refused(exc: BaseException) -> str:
    return f"refused: {type(exc).__name__}: {exc}"


def plant(directory: Path, real_lean: str) -> dict[str, str]:
    out = {}
    for name, text in (("lean", LEAN_WRAPPER.format(real=real_lean)), ("claude", HARNESS_PLANT)):
        try:
            path = directory / name
            path.write_text(text)
            path.chmod(0o755)
            out[name] = "written"
        except OSError as exc:
            out[name] = refused(exc)
    return out


def kernel_settings() -> dict[str, str]:
    out = {}
    for name in KERNEL_FILES:
        if not os.path.exists(name):
            continue
        try:
            os.close(os.open(name, os.O_WRONLY))  # opened, never written
            out[name] = "opened"
        except OSError as exc:
            out[name] = refused(exc)
    return out


def host_sockets(paths: list[str]) -> dict[str, str]:
    out = {}
    for path in paths:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2)
                s.connect(path)
            out[path] = "connected"
        except OSError as exc:
            out[path] = refused(exc)
    return out


def secret_holders(secret: str) -> list[str]:
    """Every visible process whose environment or command line holds ``secret``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        for part in ("environ", "cmdline"):
            try:
                if secret.encode() in (entry / part).read_bytes():
                    found.append(f"{entry.name}/{part}")
            except OSError:
                continue
    return found


def gateway(url: str) -> dict[str, Any]:
    """Requests the gateway must refuse (or meter apart), and one model call."""
    host, port = url.removeprefix("http://").split(":")
    tries = [
        ("POST", "/v1/messages", {"model": "m", "max_tokens": 5,
                                  "messages": [{"role": "user", "content": "hi"}]}),
        ("GET", "/v1/models", None),
        ("GET", "/v1/%2e%2e/%2e%2e/x", None),
        ("GET", "/v1/../x", None),
        ("DELETE", "/v1/messages", None),
        ("GET", "/admin", None),
        ("POST", "/v1/messages%0d%0aX-Injected:%201", {}),
    ]  # fmt: skip
    out: dict[str, Any] = {}
    for method, path, body in tries:
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            data = orjson.dumps(body) if body is not None else None
            conn.request(method, path, body=data, headers={
                "x-api-key": os.environ.get("LEANRIG_MODEL_KEY", ""),
                "content-type": "application/json", "anthropic-version": "2023-06-01"})  # fmt: skip
            out[f"{method} {path}"] = conn.getresponse().status
        except OSError as exc:
            out[f"{method} {path}"] = refused(exc)
        finally:
            conn.close()
    return out


async def submit(config: dict[str, Any], body: str | None, hold: bool, workspace: Path) -> str:
    """Open the task through the attempt's MCP server, set ``body``; with ``hold``, keep the
    session (and its Lean) open until the test writes ``release``."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = config["mcpServers"]["leanrig"]
    params = StdioServerParameters(command=server["command"], args=server["args"],
                                   env=server["env"], cwd=server["cwd"])  # fmt: skip
    async with Client(params) as client:
        opened = await client.call_tool("open_task", {"task_id": os.environ["LEANRIG_TASK"]})
        assert isinstance(opened.structured_content, dict)
        sid = opened.structured_content["session_id"]
        if body is not None:
            await client.call_tool("set_proof", {"session_id": sid, "body": body})
        if hold:
            (workspace / "holding").write_text("")
            deadline = time.monotonic() + 60
            while not (workspace / "release").exists() and time.monotonic() < deadline:
                await anyio.sleep(0.05)
    return "submitted"


def main(config_path: str) -> int:
    config = orjson.loads(Path(config_path).read_bytes())
    workspace = Path(os.environ["LEANRIG_WORKSPACE"])
    report: dict[str, Any] = {
        "plant": plant(Path(config["plant_dir"]), config["real_lean"]),
        "kernel": kernel_settings(),
        "sockets": host_sockets(config["sockets"]),
        "secret_in": secret_holders(config["secret"]),
        "secret_in_own_env": config["secret"] in "\0".join(os.environ.values()),
        "home": os.environ.get("HOME"),
    }
    if os.environ.get("LEANRIG_MODEL_URL"):
        report["gateway"] = gateway(os.environ["LEANRIG_MODEL_URL"])
    mcp_config = orjson.loads(Path(os.environ["LEANRIG_MCP_CONFIG"]).read_bytes())
    report["mcp"] = anyio.run(submit, mcp_config, config["body"], config["hold"], workspace)
    (workspace / "report.json").write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
