"""A serving process's heap: `servers.freeze_heap` (called by `leanrig serve` before it serves)
puts what start-up left out of the collector's sight."""

from __future__ import annotations

import subprocess
import sys

from tests.rpc_client import ROOT

# A full collection's time over a server's imports, before and after freeze_heap; in a
# subprocess, since freezing this one would change every later test's collections.
PROBE = """
import gc, time
import agent_tools.servers.mcp_server, agent_tools.sessions, lsprotocol.types, mcp
from agent_tools.servers import freeze_heap

def full_collection_ms():
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter(); gc.collect(); best = min(best, time.perf_counter() - t)
    return best * 1000

before = full_collection_ms()
freeze_heap()
print(before, full_collection_ms())
"""


def test_a_full_collection_no_longer_scans_what_the_server_started_with() -> None:
    """A full collection after freeze_heap takes under a fifth of the time it took before."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    before, after = map(float, out.stdout.split())
    assert before > 5, f"the probe's imports should take a full collection {before:.1f} ms"
    assert after < before / 5, f"full collection {before:.1f} -> {after:.1f} ms"
