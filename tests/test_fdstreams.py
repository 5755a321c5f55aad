"""servers.fdstreams: a server's wire is its own while it serves — children and stray prints
never reach it — and fds 0 and 1 are back afterwards. Each case runs in a fresh interpreter
whose stdin and stdout are pipes, as a server's are when a client starts it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVER = """
import json, os, subprocess, sys
from agent_tools.servers.fdstreams import claimed_stdio

def fd(n, pid="self"):
    return os.readlink(f"/proc/{pid}/fd/{n}")

wire = (fd(0), fd(1))
with claimed_stdio() as (wire_in, wire_out):
    assert (fd(wire_in), fd(wire_out)) == wire  # the wire, on private descriptors
    print("stray output")  # a library printing to stdout
    child = subprocess.Popen(["sleep", "30"])  # a child inheriting what it can (Lean, bwrap)
    seen = {n: fd(n, child.pid) for n in os.listdir(f"/proc/{child.pid}/fd")}
    child.kill()
    child.wait()
    os.write(wire_out, os.read(wire_in, 100).upper())
    sys.stderr.write(json.dumps({"child": seen, "wire": wire, "stderr": fd(2)}) + "\\n")
print("after")  # fds 0 and 1 are the wire again
"""


def test_the_wire_is_claimed_from_stdio_while_serving(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVER], input="ping", capture_output=True, text=True,
        timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # The client reads only the server's own bytes, then what is printed after serving.
    assert done.stdout == "PING" + "after\n"
    facts = json.loads(done.stderr.strip().splitlines()[-1])
    child = facts["child"]
    assert "stray output" in done.stderr
    # The child holds neither end of the wire: stdin is the null device, stdout is stderr.
    assert set(child.values()).isdisjoint(facts["wire"]), child
    assert child["0"] == "/dev/null"
    assert child["1"] == facts["stderr"]
