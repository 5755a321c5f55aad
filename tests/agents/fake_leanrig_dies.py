"""A FAKE `leanrig` for the runner's infrastructure-retry test: the MCP config's server
command. On an attempt's first invocation it starts the real `leanrig serve` with the same
arguments, waits until the attempt's ledger shows a tool call, then kills that server with
SIGKILL (leanrig died, not the agent) and exits. On the retry (run dir under ``…-retry``) it
becomes the real server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_tools.cli.main import main as leanrig_main


def arg(name: str) -> str:
    return sys.argv[sys.argv.index(name) + 1]


def fake() -> int:
    run_dir, ledger = Path(arg("--run-dir")), Path(arg("--ledger"))
    if run_dir.parent.name.endswith("-retry"):
        return leanrig_main(sys.argv[1:])
    real = subprocess.Popen([sys.executable, "-m", "agent_tools.cli", *sys.argv[1:]])
    deadline = time.monotonic() + 60
    # Poll the ledger file (no event exists for "a line was appended"), bounded.
    while time.monotonic() < deadline and real.poll() is None:
        if ledger.exists() and b"open_task" in ledger.read_bytes():
            break
        time.sleep(0.02)
    os.kill(real.pid, signal.SIGKILL)
    real.wait()
    return 70


if __name__ == "__main__":
    sys.exit(fake())
