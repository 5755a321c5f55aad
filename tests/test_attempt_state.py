"""A human attempt's clock, verdicts, saved state and results line, without Lean (made-up
verdicts), including one connection at a time per attempt."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import orjson
import pytest

from agent_tools.editor import HumanAttempt, rundir
from agent_tools.editor.rundir import attempt_lock, attempt_state
from agent_tools.runs import read_results
from agent_tools.sessions import Ledger
from agent_tools.tasks import SuiteError, Task, load_suite
from agent_tools.verdict import Verdict

ROOT = Path(__file__).resolve().parent.parent
TASK = load_suite(ROOT / "lean_project" / "suites" / "demo").task("refl_z")
LIMIT = 0.3

pytestmark = pytest.mark.anyio


def verdict(accepted: bool, why: str = "") -> Verdict:
    return Verdict(accepted, () if accepted else (why,), (), 12.0, "4.35.0")


def attempt(run: Path, task: Task = TASK, limit: float | None = LIMIT) -> HumanAttempt:
    a = HumanAttempt(
        task,
        Ledger(run / "ledger.jsonl"),
        run / "results.jsonl",
        time_limit=limit,
        state=attempt_state(run, task, limit),
    )
    a.open({"name": "t", "version": "1"}, None)
    return a


def edited(a: HumanAttempt, version: int, body: str) -> None:
    a.forwarded(version, time.perf_counter())
    a.elaborated(version, errors=1, fatal=False, body=body)


def test_after_the_limit_the_last_bodys_verdict_is_the_attempts(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    a.checked(verdict(False, "A wrong"), "A", requested=time.time())
    edited(a, 2, "B")
    time.sleep(LIMIT)
    assert a.expire()
    assert a.state is not None and not a.state.over  # B was never judged
    assert attempt_state(tmp_path, TASK, LIMIT) is not None
    a.checked(verdict(False, "B wrong"), "B", requested=time.time())
    assert a.state.over
    line = a.result()
    assert line.reasons == ["B wrong"] and line.timed_out and not line.accepted


def test_accepted_after_the_limit_is_after_the_timeout_and_a_later_line_replaces(
    tmp_path: Path,
) -> None:
    a = attempt(tmp_path)
    edited(a, 2, "B")
    time.sleep(LIMIT)
    a.expire()
    a.checked(verdict(False, "not yet"), "A", requested=time.time() - 1.0)  # asked in time
    a.write_result()
    a.checked(verdict(True), "B", requested=time.time())  # asked after the limit
    a.write_result()
    (line,) = read_results(tmp_path).results
    assert line.accepted and line.timed_out
    assert line.invocation_s == pytest.approx(LIMIT, abs=0.01)


def test_accepted_when_asked_in_time_stops_the_clock_at_the_request(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    asked = time.time()
    time.sleep(LIMIT)
    a.expire()  # the timer, while the verdict ran
    a.checked(verdict(True), TASK.body.rstrip(), requested=asked)
    line = a.result()
    assert line.accepted and not line.timed_out and line.invocation_s < LIMIT


def test_a_state_saved_over_without_its_line_gets_the_line_at_the_next_start(
    tmp_path: Path,
) -> None:
    a = attempt(tmp_path, limit=None)
    a.checked(verdict(True), "B", requested=time.time())  # saved; killed before the line
    assert not (tmp_path / "results.jsonl").exists()
    with pytest.raises(SuiteError, match="is over"):
        attempt_state(tmp_path, TASK, None)
    (line,) = read_results(tmp_path).results
    assert line.accepted and line.task == TASK.id


async def test_one_connection_at_a_time_per_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir, "LOCK_WAIT_SECONDS", 0.3)
    async with attempt_lock(tmp_path, TASK.id):
        with pytest.raises(SuiteError, match=f"open in another editor .*pid {os.getpid()}"):
            async with attempt_lock(tmp_path, TASK.id):
                pass
    async with attempt_lock(tmp_path, TASK.id):
        pass

    async def restart() -> None:  # the next server waits for the last one's closing verdict
        async with attempt_lock(tmp_path, TASK.id):
            pass

    monkeypatch.setattr(rundir, "LOCK_WAIT_SECONDS", 5.0)
    async with anyio.create_task_group() as tg, attempt_lock(tmp_path, TASK.id):
        tg.start_soon(restart)
        await anyio.sleep(0.3)


def test_an_accepted_attempts_line_is_written_once(tmp_path: Path) -> None:
    """A version elaborated after the accepted verdict's line, then the close: still one line."""
    a = attempt(tmp_path, limit=None)
    a.checked(verdict(True), "B", requested=time.time())
    a.write_result()
    edited(a, 2, "B")
    a.close()
    lines = (tmp_path / "results.jsonl").read_bytes().splitlines()
    assert len(lines) == 1, lines


def test_the_clock_is_on_the_disk_before_the_attempt_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every save of the state fsyncs the temporary file and the directory before it returns."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    a = attempt(tmp_path)
    state = str(a.path)
    assert any(".tmp" in p and a.path.name in p for p in synced), synced  # the data
    assert str(a.path.parent) in synced  # the rename
    synced.clear()
    edited(a, 2, "B")
    assert str(a.path.parent) in synced and os.path.exists(state)


def test_a_connection_cut_off_is_noted_on_the_attempts_line(tmp_path: Path) -> None:
    """A connection ended without `shutdown` is noted on the line, also after a later normal
    connection; the ledger's closes say how each ended."""
    a = attempt(tmp_path, limit=None)
    edited(a, 2, "B")
    a.checked(verdict(False, "B wrong"), "B", requested=time.time())
    first = a.close("cut off")
    assert first is not None
    assert any("without `shutdown`" in note and "once" in note for note in first["notes"])
    b = attempt(tmp_path, limit=None)
    b.checked(verdict(True), "C", requested=time.time())
    last = b.close("shutdown")
    assert last is not None and last["accepted"]
    assert any("without `shutdown`" in note for note in last["notes"]), last["notes"]
    ledger = [orjson.loads(x) for x in (tmp_path / "ledger.jsonl").read_bytes().splitlines()]
    closes = [e["ended"] for e in ledger if e["tool"] == "close_session"]
    assert closes == ["cut off", "shutdown"]
