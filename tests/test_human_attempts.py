"""One human attempt per task, with one clock, whatever the editor does: restarts, a killed
`leanrig lsp`, a closed editor, a verdict asked for just before the limit (real Lean)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
import psutil
import pytest

from agent_tools.runs import load_run, read_results

from .conftest import running
from .test_editor_proxy import (
    DEADLINE,
    RIGHT,
    ROOT,
    SUITE,
    TASK,
    WRONG,
    Editor,
    body_edit,
    errors,
    lines,
    lsp_argv,
    start_editor,
    task_setup,
)

pytestmark = pytest.mark.anyio

# The closing verdict, ledger close and results line after the editor ends, on a loaded machine.
RECORDS_DEADLINE = 60.0


def process_tree(pid: int) -> list[psutil.Process]:
    """The process ``pid`` and everything under it now."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def kill_server(server: psutil.Process) -> None:
    """SIGKILL an editor's server as the editor would: its process group when it leads one
    (Emacs), else the process alone (Neovim)."""
    if os.getpgid(server.pid) == server.pid:
        os.killpg(server.pid, signal.SIGKILL)
    else:
        server.send_signal(signal.SIGKILL)


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if running(p)]


def marked(name: str, value: str) -> list[psutil.Process]:
    """The running processes whose environment has ``name=value``."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(name) == value:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return alive(found)


def closed_records(
    run: Path,
    leftovers: list[psutil.Process] | Callable[[], list[psutil.Process]],
    *,
    connections: int = 1,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Wait until the ledger holds ``connections`` closes, results.jsonl a line, and none of
    ``leftovers`` runs; (results lines, ledger lines)."""
    deadline = time.monotonic() + RECORDS_DEADLINE
    while True:
        ledger = lines(run / "ledger.jsonl") if (run / "ledger.jsonl").exists() else []
        results = lines(run / "results.jsonl") if (run / "results.jsonl").exists() else []
        closes = [e for e in ledger if e["tool"] == "close_session"]
        running = leftovers() if callable(leftovers) else alive(leftovers)
        if len(closes) >= connections and results and not running:
            return results, ledger
        if time.monotonic() > deadline:
            raise AssertionError(
                f"after {RECORDS_DEADLINE} s: {len(closes)} closes, {len(results)} results "
                f"lines, still running: {running}"
            )
        time.sleep(0.05)


def ended(ledger: list[dict[str, Any]]) -> list[str]:
    """How each connection in ``ledger`` ended (its close_session's ``ended``)."""
    return [e["ended"] for e in ledger if e["tool"] == "close_session"]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


async def _check(editor: Editor, uri: str) -> dict[str, object]:
    response = await editor.request(
        "workspace/executeCommand", {"command": "leanrig.checkProof", "arguments": [uri]}
    )
    return dict(response["result"])


async def _prove(editor: Editor, workspace: Path, body: str) -> str:
    """initialize, open the task file, set ``body``; the task's uri."""
    await editor.initialize(workspace)
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    version = await editor.change(uri, body_edit(text, scope, body))
    diags = await editor.diagnostics_for(uri, version)
    assert bool(errors(diags)) == (body == WRONG), diags
    return uri


async def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run ``argv`` with no input: its exit code and stderr."""
    with anyio.fail_after(DEADLINE):
        done = await anyio.run_process(argv, cwd=cwd, stdin=subprocess.DEVNULL, check=False)
    return done.returncode, done.stderr.decode()


async def _lsp(workspace: Path, run: Path, *extra: str) -> tuple[int, str]:
    """`leanrig lsp` started and given no input."""
    return await _run(lsp_argv(workspace, run, *extra), ROOT)


async def _lsp_initialize(workspace: Path, run: Path) -> tuple[int, dict[str, Any], str]:
    """`leanrig lsp` sent `initialize`: its exit code, its answer, its stderr."""
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": workspace.as_uri(), "capabilities": {}},
        }
    )
    data = b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    with anyio.fail_after(DEADLINE):
        done = await anyio.run_process(lsp_argv(workspace, run), cwd=ROOT, input=data, check=False)
    rest = done.stdout.partition(b"\r\n\r\n")[2]
    return done.returncode, dict(orjson.loads(rest)), done.stderr.decode()


async def test_a_restart_resumes_the_attempt_with_its_clock(
    workspace: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    started = time.time()
    async with start_editor(workspace, run) as editor:
        await _prove(editor, workspace, WRONG)
    gap = 1.0
    await anyio.sleep(gap)  # the editor closed: the clock runs on
    async with start_editor(workspace, run) as editor:
        uri = await _prove(editor, workspace, RIGHT)
        verdict = await _check(editor, uri)
        asked = time.time()
        assert verdict["accepted"] is True, verdict
    results = read_results(run).results
    assert [(r.task, r.attempt) for r in results] == [(TASK, 1)]
    (result,) = results
    assert result.accepted
    # From the first connection (not the second one's start) to the request.
    assert gap < result.invocation_s <= asked - started
    assert any("connected 2 times" in note for note in result.notes), result.notes
    sessions = {e["session"] for e in lines(run / "ledger.jsonl")}
    assert len(sessions) == 1
    # Over: a third start is refused.
    code, stderr = await _lsp(workspace, run)
    assert code == 2, stderr
    assert "is over (accepted after" in stderr and "--run-dir" in stderr
    assert len(read_results(run).results) == 1
    # An editor gets the refusal as `initialize`'s error, which it shows to the user.
    code, answer, stderr = await _lsp_initialize(workspace, run)
    assert code == 2 and answer["id"] == 1, (answer, stderr)
    assert "is over" in answer["error"]["message"] and answer["error"]["data"] == {"retry": False}
    # `leanrig edit` for another attempt into it is refused too, before writing anything.
    fresh = workspace.parent / "ws-again"
    code, stderr = await _run(
        [
            sys.executable,
            "-m",
            "agent_tools.editor",
            "edit",
            "--suite",
            str(SUITE),
            "--task",
            TASK,
            "--workspace",
            str(fresh),
            "--run-dir",
            str(run),
        ],
        ROOT,
    )
    assert code == 2 and "is over" in stderr, stderr
    assert not fresh.exists()


async def test_a_killed_lsp_closes_its_attempt_and_the_next_start_resumes_it(
    workspace: Path, tmp_path: Path
) -> None:
    """SIGKILL of the server's process group without `shutdown`: the closing verdict, ledger
    close and results line are written with the kill noted, and the next start resumes."""
    run = tmp_path / "run"
    started = time.time()
    async with start_editor(workspace, run) as editor:
        await _prove(editor, workspace, WRONG)
        tree = process_tree(editor.process.pid)
        os.killpg(editor.process.pid, signal.SIGKILL)
        await editor.process.wait()
    results, ledger = closed_records(run, tree)
    (line,) = results
    assert not line["accepted"] and line["reasons"] != ["no verdict"], line
    from agent_tools.editor.human_attempt import body_sha

    assert line["final_body_sha"] == body_sha(WRONG.rstrip())  # the last body Lean checked
    assert any("without `shutdown`" in note for note in line["notes"]), line["notes"]
    assert ended(ledger) == ["cut off"]
    code, stderr = await _run(
        [sys.executable, "-m", "agent_tools.cli", "report", str(run), "--no-plots"], tmp_path
    )
    assert code == 0, stderr
    report = (run / "report" / "report.md").read_text()
    assert "no result yet" not in stderr + report
    assert "without `shutdown`" in report, report
    async with start_editor(workspace, run) as editor:
        uri = await _prove(editor, workspace, RIGHT)
        assert (await _check(editor, uri))["accepted"] is True
        asked = time.time()
    (result,) = read_results(run).results
    assert result.attempt == 1 and result.accepted
    assert any("without `shutdown`" in note for note in result.notes), result.notes
    ledger = lines(run / "ledger.jsonl")
    opened = [e for e in ledger if e["tool"] == "open_task"]
    assert [e["connection"] for e in opened] == [1, 2]
    carried = opened[1]["attempt_s"]
    assert carried > 0
    # Both connections' time: bounded by the wall time since the first start, not the second.
    assert carried < result.invocation_s <= asked - started


async def test_the_clock_starts_when_the_editor_connects_not_when_it_opens_the_file(
    workspace: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    async with start_editor(workspace, run) as editor:
        await editor.initialize(workspace)
        connected = time.time()
        await anyio.sleep(1.0)
        path, _, scope = task_setup(workspace)
        uri = await editor.open(path, scope.task.with_body(RIGHT))
        assert errors(await editor.diagnostics_for(uri, 1)) == []
        verdict = await _check(editor, uri)
        assert verdict["accepted"] is True, verdict
    (result,) = read_results(run).results
    assert result.invocation_s >= 1.0 and result.invocation_s <= time.time() - connected + 1
    assert any("opened with a proof already in it" in note for note in result.notes)


async def test_a_limit_that_ran_out_while_the_editor_was_closed_ends_the_attempt(
    workspace: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    limit = 3.0
    async with start_editor(workspace, run, "--time-limit", str(limit)) as editor:
        await _prove(editor, workspace, RIGHT)  # proved, never checked, editor closed
    before = read_results(run).results
    assert [r.timed_out for r in before] == [False]
    assert before[0].accepted and before[0].invocation_s < limit

    run2, ws2 = tmp_path / "run2", tmp_path / "ws2"
    async with start_editor(ws2, run2, "--time-limit", str(limit)) as editor:
        await editor.initialize(ws2)
        path, text, scope = task_setup(ws2)
        uri = await editor.open(path, text)
        await editor.diagnostics_for(uri, 1)
        version = await editor.change(uri, body_edit(text, scope, WRONG))
        await editor.diagnostics_for(uri, version)
        # Closed before the limit: the closing verdict rejects the wrong proof.
    (line,) = read_results(run2).results
    assert not line.accepted and not line.timed_out
    await anyio.sleep(limit)
    code, stderr = await _lsp(ws2, run2, "--time-limit", str(limit))
    assert code == 2, stderr
    assert "ran out while the editor was closed" in stderr
    (final,) = read_results(run2).results
    assert final.timed_out and not final.accepted
    assert final.invocation_s == pytest.approx(limit, abs=0.01)
    code, stderr = await _lsp(ws2, run2, "--time-limit", str(limit))
    assert code == 2 and "is over (out of time)" in stderr


async def test_a_verdict_asked_for_in_time_stops_the_clock_at_the_request(
    workspace: Path, tmp_path: Path
) -> None:
    """A verdict asked for 0.3 s before the limit: accepted, not out of time, and the timer runs
    no second verdict."""
    run = tmp_path / "run"
    limit = 4.0
    async with start_editor(workspace, run, "--time-limit", str(limit)) as editor:
        connected = time.time()  # no later than the server's clock starts
        await editor.initialize(workspace)
        path, _, scope = task_setup(workspace)
        uri = await editor.open(path, scope.task.with_body(RIGHT))
        await editor.diagnostics_for(uri, 1)
        await anyio.sleep(max(0.0, connected + limit - 0.3 - time.time()))
        verdict = await _check(editor, uri)
        assert verdict["accepted"] is True and verdict["timed_out"] is False, verdict
        await anyio.sleep(0.5)  # past the limit
    (result,) = read_results(run).results
    assert result.accepted and not result.timed_out and result.invocation_s < limit
    checks = [e for e in lines(run / "ledger.jsonl") if e["tool"] == "check_proof"]
    assert len(checks) == 1
    loaded = load_run(run)
    assert loaded.metrics.accepted == 1 and loaded.metrics.accepted_after_timeout == 0
