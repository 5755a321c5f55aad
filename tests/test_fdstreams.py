"""While a server serves, its wire is its own (children and stray prints never reach it), and fds
0 and 1 come back afterwards (servers/fdstreams.py); checked in process and on the stdio servers."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from .test_as_typed import DEADLINE, DEMO, SUITE, leanrig_exe, sandbox_or_skip

SERVER = """
import json, os, subprocess, sys
from agent_tools.servers.fdstreams import claimed_stdio

def fd(n, pid="self"):
    return os.readlink(f"/proc/{pid}/fd/{n}")

wire = (fd(0), fd(1))
with claimed_stdio() as (wire_in, wire_out):
    assert (fd(wire_in), fd(wire_out)) == wire  # the wire, on private descriptors
    print("stray output")  # a library printing to stdout (buffered: stdout is a pipe)
    # A child inheriting all it can (close_fds=False): Lean, bwrap, a one-shot run.
    child = subprocess.Popen(["sleep", "30"], close_fds=False)
    seen = {n: fd(n, child.pid) for n in os.listdir(f"/proc/{child.pid}/fd")}
    child.kill()
    child.wait()
    os.write(wire_out, os.read(wire_in, 100).upper())
    during = (fd(0), fd(1))
after = (fd(0), fd(1))
sys.stderr.write(json.dumps({"child": seen, "wire": wire, "stderr": fd(2), "during": during,
                             "after": after}) + "\\n")
print("after")  # fds 0 and 1 are the wire again
"""


def test_the_wire_is_claimed_from_stdio_while_serving(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-c", SERVER],
        input="ping",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    # The client reads the server's bytes, then what is printed after serving; the stray print
    # went to stderr.
    assert done.stdout == "PING" + "after\n"
    assert "stray output" in done.stderr
    facts = json.loads(done.stderr.strip().splitlines()[-1])
    child = facts["child"]
    assert set(child.values()).isdisjoint(facts["wire"]), child
    assert child["0"] == "/dev/null"
    assert child["1"] == facts["stderr"]
    assert facts["during"] == ["/dev/null", facts["stderr"]]
    assert facts["after"] == facts["wire"]


def _message(method: str, params: object) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


MCP_INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "0"},
}
LSP_INIT = _message("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
# argv after `leanrig`, and the first message a client sends
SERVERS = {
    "serve (MCP)": (["serve", "--suite", SUITE], _message("initialize", MCP_INIT) + "\n"),
    "serve --jsonrpc": (
        ["serve", "--suite", SUITE, "--jsonrpc"],
        _message("list_tasks", {}) + "\n",
    ),
    "lsp": (
        ["lsp", "--suite", SUITE, "--task", "and_swap", "--workspace", "attempt"],
        f"Content-Length: {len(LSP_INIT)}\r\n\r\n{LSP_INIT}",
    ),
}


@pytest.mark.parametrize("name", list(SERVERS))
def test_a_stdio_server_serves_on_a_claimed_wire(tmp_path: Path, name: str) -> None:
    """While serving, the server's fd 0 is the null device and fd 1 is stderr, so nothing it
    starts holds the client's pipes."""
    sandbox_or_skip()
    shutil.copytree(DEMO, tmp_path / SUITE)
    (tmp_path / "attempt").mkdir()
    args, first = SERVERS[name]
    server = subprocess.Popen(
        [str(leanrig_exe()), *args],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write(first.encode())
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], DEADLINE)
        assert ready and os.read(server.stdout.fileno(), 65536), "no answer to the first message"
        fds = {n: os.readlink(f"/proc/{server.pid}/fd/{n}") for n in (0, 1, 2)}
        assert fds[0] == "/dev/null", fds
        assert fds[1] == fds[2], fds
    finally:
        # Leave as a client does: close stdin.
        server.stdin.close()
        try:
            server.wait(timeout=DEADLINE)
        finally:
            if server.returncode is None:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
            server.stdout.close()


@pytest.mark.anyio
async def test_eagain_after_readiness_means_wait_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """EAGAIN after the descriptor looked ready (faked once each for os.read and os.write) waits
    again rather than reading as a client gone."""
    from agent_tools.servers import FdReceive, FdSend

    real_read, real_write = os.read, os.write
    refused: set[str] = set()

    def once(name: str, real: Any) -> Any:
        def call(*args: Any) -> Any:
            if name not in refused:
                refused.add(name)
                raise BlockingIOError(11, "fake EAGAIN")
            return real(*args)

        return call

    r, w = os.pipe()
    try:
        monkeypatch.setattr(os, "write", once("write", real_write))
        monkeypatch.setattr(os, "read", once("read", real_read))
        with anyio.fail_after(10):
            await FdSend(w, timeout=5)(b"frame")
            assert await FdReceive(r).receive() == b"frame"
        assert refused == {"read", "write"}
    finally:
        monkeypatch.undo()
        os.close(r)
        os.close(w)
