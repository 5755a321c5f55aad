"""Misbehaving agents for tests/test_runner_faults.py (no MCP unless the mode says so).

Usage: ``fault_agent.py MODE`` in the attempt's workspace (LEANRIG_* variables set):

- ``exit``: exits at once with status 3;
- ``hang``: sleeps past any time limit;
- ``flood``: writes 12 MB to stdout and 12 MB to stderr, then sleeps past the limit;
- ``fork``: starts two children and a grandchild in a new session (``setsid``; pids in
  ``pids.txt``), then exits 0 at once, leaving them running;
- ``by-task JSON``: the argv (after this script) for each task id, e.g.
  ``{"refl_z": ["hang"], "and_swap": ["/abs/mcp_agent.py", "solve"]}`` (a path runs that
  script instead);
- ``vandal``: tries to write outside its workspace (a file in the run directory, a line
  appended to the suite's task file given as argv[2]; what was refused goes to ``vandal.json``)
  and edits its workspace copy of the task file to a "proof", then exits 0 without opening a
  session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SLEEPER = [sys.executable, "-c", "import time; time.sleep(3600)"]


def main(mode: str) -> int:
    ws = Path(os.environ["LEANRIG_WORKSPACE"])
    if mode == "by-task":
        argv = json.loads(sys.argv[2])[os.environ["LEANRIG_TASK"]]
        if argv[0].endswith(".py"):
            os.execv(sys.executable, [sys.executable, *argv])
        sys.argv = [sys.argv[0], *argv]
        return main(argv[0])
    if mode == "exit":
        return 3
    if mode == "hang":
        time.sleep(3600)
    if mode == "flood":
        chunk = b"x" * 2**20
        for _ in range(12):
            sys.stdout.buffer.write(chunk)
            sys.stderr.buffer.write(chunk)
        sys.stdout.flush()
        time.sleep(3600)
    if mode == "fork":
        # Each sleeper's last argument is the workspace: the test finds them by it (pids seen
        # here may be a PID namespace's, not the host's).
        sleeper = [*SLEEPER, str(ws)]
        children = [subprocess.Popen(sleeper) for _ in range(2)]
        # A grandchild in its own session: the child starts it with setsid and exits.
        spawn = (
            "import subprocess, sys; "
            "print(subprocess.Popen(sys.argv[1:], start_new_session=True, "
            "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)"
        )
        out = subprocess.run([sys.executable, "-c", spawn, *sleeper], capture_output=True,
                             text=True, check=True, timeout=30)  # fmt: skip
        pids = [c.pid for c in children] + [int(out.stdout)]
        (ws / "pids.txt").write_text(" ".join(map(str, pids)))
        return 0
    if mode == "vandal":
        run_dir = ws.parents[3]
        blocked = {}  # what the sandbox refused (the suite is read-only, the run dir hidden)
        try:
            (run_dir / "vandal.txt").write_text("written outside the workspace")
        except OSError as exc:
            blocked["run_dir"] = exc.strerror
        try:
            with open(sys.argv[2], "a", encoding="utf-8") as task_file:
                task_file.write("\n-- vandalised\n")
        except OSError as exc:
            blocked["suite"] = exc.strerror
        copy = next(p for p in ws.glob("*.lean") if p.name != "Submission.lean")
        copy.write_text(copy.read_text().replace("sorryAx (@Eq N N.z N.z) Bool.false",
                                                 "@Eq.refl N N.z"))  # fmt: skip
        (ws / "vandal.json").write_text(json.dumps(blocked))
        return 0
    if mode == "peek":
        # Which of the files listed in the JSON file argv[2] it can read (a path named on the
        # command line the runner shows): {path: bytes read, or the error}.
        seen: dict[str, object] = {}
        for path in json.loads(Path(sys.argv[2]).read_text()):
            try:
                seen[path] = len(Path(path).read_bytes())
            except OSError as exc:
                seen[path] = exc.strerror
        (ws / "peek.json").write_text(json.dumps(seen))
        return 0
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
