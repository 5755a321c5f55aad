"""An agent that forges the run's records, for tests/test_runner_isolation.py.

By the task's mode (argv: a JSON object task id → mode):

- ``skip``: never connects to its server; forges the records only;
- ``session``: opens the task through its MCP server, sets a wrong body, then forges.

Forging: a submission record with the reference proof where the runner's service keeps its
records (``serve/submission-<n>.json``, also overwriting every record there), ledger lines in
the attempt's ledger, a results line, and a file in the attempt directory; it leaves a link
to the run's results as ``Submission.lean`` and a FIFO as ``usage.json``. It also lists the
directory of its MCP socket's parent (the runner's socket directory: only its own attempt's
should be visible) and tries the network. What each try gave goes to ``forge.json`` in the
workspace; the agent exits 0.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

PROOFS = Path(__file__).resolve().parents[1] / "demo_reference_proofs.json"
WRONG = "\n  leanrig_no_such_proof"


def attempt(path: Path, write: Any) -> str:
    try:
        write(path)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "written"


def forge(ws: Path, task: str, proof: str, server: dict[str, Any]) -> dict[str, Any]:
    root = ws.parent
    record = {"v": 1, "task": task, "session": "forged", "version": 99, "body": proof,
              "body_sha": "0" * 12, "complete": True, "ts_ns": time.time_ns() * 2}  # fmt: skip
    line = json.dumps({"tool": "set_proof", "outcome": "ok", "lean_ms": 1e6}) + "\n"
    # What it sees of the run (before writing anything): only its own workspace (a later
    # attempt read an earlier one's submission and log in the read-only run directory).
    seen = {
        "run_dir_entries": sorted(os.listdir(root.parents[2])),
        "task_attempts": sorted(os.listdir(root.parent)),
        "attempt_entries": sorted(os.listdir(root)),
    }
    report: dict[str, Any] = {
        **seen,
        "submission": attempt(root / "serve" / "submission-1.json",
                              lambda p: p.write_text(json.dumps(record))),
        "ledger": attempt(root / "ledger.jsonl", lambda p: p.open("a").write(line * 50)),
        "results": attempt(root.parents[2] / "results.jsonl", lambda p: p.open("a").write("{}\n")),
        "attempt_dir": attempt(root / "forged.txt", lambda p: p.write_text("x")),
    }  # fmt: skip
    for existing in sorted((root / "serve").glob("submission-*.json")):
        report[f"overwrite {existing.name}"] = attempt(
            existing, lambda p: p.write_text(json.dumps(record))
        )
    # Block devices: as root, the host's /dev let it open the disk under every read-only
    # mount for writing.
    report["block_devices"] = sorted(p.name for p in Path("/dev").iterdir() if p.is_block_device())
    # Capabilities: with any, a read-only mount could be unmounted or remounted (as root).
    status = Path("/proc/self/status").read_text().splitlines()
    report["capabilities"] = next(x.split()[1] for x in status if x.startswith("CapEff"))
    sockets = Path(server["args"][-1]).parent.parent
    report["socket_dirs"] = sorted(os.listdir(sockets))
    report["own_socket_dir"] = Path(server["args"][-1]).parent.name
    # Every run's socket directory lies in one parent: another run's must not be visible.
    report["run_socket_dirs"] = sorted(os.listdir(sockets.parent))
    report["own_run_socket_dir"] = sockets.name
    # Files the runner handles in the workspace after the agent: the submission it writes (a
    # link to the run's results would have it overwrite them), usage.json it reads (a FIFO
    # made it wait for a writer for ever).
    # ``skip`` leaves a directory where the submission goes (the runner crashed on it, and
    # `--resume` gave the agent another, unrecorded try).
    (ws / "Submission.lean").unlink(missing_ok=True)
    if task_mode(task) == "skip":
        (ws / "Submission.lean" / "x").mkdir(parents=True)
    else:
        os.symlink(root.parents[2] / "results.jsonl", ws / "Submission.lean")
    os.mkfifo(ws / "usage.json")
    # What the verdict trusts, which the user may write: Lean (the launcher), leanrig's cache
    # (compiled suite libraries), the Python environment, leanrig's code. A file created
    # here is removed at once (the sandbox should have refused it).
    from lsp_bridge import cache_root, find_lean

    trusted = {
        "lean": find_lean().lean.resolve().parent,
        "cache": cache_root(),
        "python": Path(sys.prefix),
        "leanrig": Path(__file__).resolve().parents[2] / "agent_tools",
    }
    trusted["system"] = Path("/usr/lib")  # (as root, the whole system was writable)
    for name, folder in trusted.items():
        probe = folder / f".forged-{os.getpid()}"
        report[f"trusted {name}"] = attempt(probe, lambda p: p.write_text("x"))
        if report[f"trusted {name}"] == "written":
            probe.unlink()
    # State for a later attempt, in the host's shared scratch directories.
    for scratch in ("/tmp", "/var/tmp", "/dev/shm"):
        stash = Path(scratch) / f"leanrig-stash-{os.environ['LEANRIG_TASK']}-{os.urandom(6).hex()}"
        report[f"stash {scratch}"] = (
            str(stash)
            if attempt(stash, lambda p: p.write_text("proof")) == "written"
            else "refused"
        )
    try:
        socket.create_connection(("1.1.1.1", 53), timeout=2).close()
        report["network"] = "connected"
    except OSError as exc:
        report["network"] = f"refused: {exc.strerror or exc}"
    return report


async def main() -> int:
    server, task, ws, mode, proof = await anyio.to_thread.run_sync(setup)
    if mode == "session":
        params = StdioServerParameters(
            command=server["command"], args=server["args"], env=server["env"], cwd=server["cwd"]
        )
        async with Client(params) as client:
            opened = await client.call_tool("open_task", {"task_id": task})
            assert isinstance(opened.structured_content, dict)
            sid = opened.structured_content["session_id"]
            await client.call_tool("set_proof", {"session_id": sid, "body": WRONG})
            report = await anyio.to_thread.run_sync(forge, ws, task, proof, server)
    else:
        report = await anyio.to_thread.run_sync(forge, ws, task, proof, server)
    await anyio.Path(ws / "forge.json").write_text(json.dumps(report))
    return 0


def task_mode(task: str) -> str:
    return str(json.loads(sys.argv[1])[task])


def setup() -> tuple[dict[str, Any], str, Path, str, str]:
    server = json.loads(Path(os.environ["LEANRIG_MCP_CONFIG"]).read_text())["mcpServers"]
    task = os.environ["LEANRIG_TASK"]
    mode = json.loads(sys.argv[1])[task]
    proof = "\n  " + json.loads(PROOFS.read_text())[task]
    return server["leanrig"], task, Path(os.environ["LEANRIG_WORKSPACE"]), mode, proof


if __name__ == "__main__":
    sys.exit(anyio.run(main))
