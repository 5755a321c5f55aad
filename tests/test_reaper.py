"""`repl_pool.ProcessReaper`: every process tagged for an owner dies when the owner is closed,
or killed together with its direct children (the reaper among them), as Ray ends a worker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import psutil

from repl_pool import ProcessReaper, tagged_processes

VAR = "LEANRIG_TEST_REAPER_TAG"

# An owner: a reaper, then a tagged process in a session of its own, its pid on stdout; then
# it waits to be ended.
OWNER = f"""
import os, subprocess, sys, time
from repl_pool import ProcessReaper
tag = sys.argv[1]
os.environ["{VAR}"] = tag
reaper = ProcessReaper("{VAR}", tag)
reaper.start()
# A grandchild (its parent, sh, exits at once), as Lean's workers and an agent's tools are.
out = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"], capture_output=True,
                     text=True, start_new_session=True, check=True).stdout
print(int(out), flush=True)
if sys.argv[2] == "close":
    reaper.close()
    reaper.wait(10)
    print("swept", flush=True)
time.sleep(600)
"""


def owner(tag: str, how: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, tag, how], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_the_tagged_process_dies_when_the_owner_and_its_children_are_killed() -> None:
    tag = uuid.uuid4().hex
    proc, tagged = owner(tag, "wait")
    try:
        assert tagged in tagged_processes(VAR, tag)
        # As Ray ends a worker: its direct children killed, then the worker.
        for child in psutil.Process(proc.pid).children():
            child.kill()
        proc.kill()
        proc.wait(10)
        assert gone(tagged), "the tagged process outlived its owner"
    finally:
        proc.kill()
        proc.communicate(timeout=10)
        if not gone(tagged, 0):
            os.kill(tagged, signal.SIGKILL)
    assert tagged_processes(VAR, tag) == []


def test_close_sweeps_and_wait_returns_once_swept() -> None:
    tag = uuid.uuid4().hex
    proc, tagged = owner(tag, "close")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "swept"
        assert gone(tagged, 1.0)
    finally:
        proc.kill()
        proc.communicate(timeout=10)
        if not gone(tagged, 0):
            os.kill(tagged, signal.SIGKILL)


def test_a_reaper_spares_its_owner_and_untagged_processes() -> None:
    reaper = ProcessReaper(VAR, uuid.uuid4().hex)
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        reaper.start()
        reaper.close()
        reaper.wait(10)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
