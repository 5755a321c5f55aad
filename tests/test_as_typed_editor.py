"""`leanrig edit` and `leanrig lsp` as a user types them, from a directory holding the demo suite,
with the sandbox on; the LSP client is tests/test_editor_proxy.py's, on the process's stdio."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from agent_tools.editor import TaskScope
from agent_tools.tasks import load_suite
from lsp_bridge import find_lean

from .test_as_typed import (
    DEADLINE,
    DEMO,
    SUITE,
    leanrig,
    leanrig_each,
    leanrig_exe,
)
from .test_as_typed import (
    cwd as cwd,
)
from .test_editor_proxy import Editor, body_edit, errors, lines

pytestmark = pytest.mark.anyio

TASK = "and_swap"
PROOF = (
    "\n  "
    + json.loads((DEMO.parent.parent.parent / "tests" / "demo_reference_proofs.json").read_text())[
        TASK
    ]
)


@asynccontextmanager
async def lsp_session(
    cwd: Path, *args: str, task: str = TASK, suite: str = SUITE
) -> AsyncIterator[Editor]:
    """`leanrig lsp --suite SUITE --task TASK ARGS` as an editor starts it, its messages read
    meanwhile; its process group is killed at the end if still running."""
    argv = [str(leanrig_exe()), "lsp", "--suite", suite, "--task", task, *args]
    with (cwd / "lsp.stderr").open("wb") as stderr:
        process = await anyio.open_process(argv, cwd=cwd, stderr=stderr, start_new_session=True)
    assert process.stdout is not None
    editor = Editor(process, BufferedByteReceiveStream(process.stdout))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(editor.reader)
            yield editor
            tg.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True):
            await process.aclose()


async def leave(editor: Editor) -> int:
    """The editor leaves politely (shutdown, exit, stdin closed): the server's exit code."""
    await editor.request("shutdown", None)
    await editor.send({"method": "exit", "params": None})
    assert editor.process.stdin is not None
    await editor.process.stdin.aclose()
    with anyio.fail_after(DEADLINE):
        return await editor.process.wait()


@asynccontextmanager
async def lsp(cwd: Path, *args: str) -> AsyncIterator[Editor]:
    """``lsp_session`` of and_swap; on exit the editor leaves politely and the server exits 0."""
    async with lsp_session(cwd, *args) as editor:
        yield editor
        code = await leave(editor)
        assert code == 0, (cwd / "lsp.stderr").read_text()[-3000:]


def task_text() -> tuple[str, TaskScope, str]:
    task = load_suite(DEMO).task(TASK)
    return task.text, TaskScope(task), task.spec.file


def test_python_m_agent_tools_editor_edit_is_the_same_command(cwd: Path) -> None:
    python = leanrig_exe().parent / "python"
    args = ["edit", "--suite", SUITE, "--task", TASK, "--workspace", "attempt", "--json"]
    module = subprocess.run(
        [str(python), "-m", "agent_tools.editor", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert module.returncode == 0, module.stderr
    shutil.rmtree(cwd / "attempt")
    cli = leanrig(*args, cwd=cwd)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(module.stdout) == json.loads(cli.stdout)


def test_edit_writes_the_workspace_in_the_default_place(cwd: Path) -> None:
    done = leanrig("edit", "--suite", SUITE, "--task", TASK, cwd=cwd)
    assert done.returncode == 0, done.stderr
    ws = (cwd / f"leanrig-{TASK}").resolve()
    text, _, file = task_text()
    assert (ws / file).read_text() == text
    shims = ws / ".leanrig" / "bin"
    for kind in ("lean", "lake"):
        assert os.access(shims / kind, os.X_OK), kind
    settings = json.loads((ws / ".vscode" / "settings.json").read_text())
    assert settings["lean4.envPathExtensions"] == [str(shims)]
    assert f'"{ws / ".leanrig"}"' in (ws / ".dir-locals.el").read_text()
    assert "lean4-rootdir" in (ws / ".dir-locals.el").read_text()
    emacs = (ws / ".leanrig" / "emacs.el").read_text()
    assert f'"{shims / "lean"}" "--server"' in emacs
    assert f"emacs -l {ws / '.leanrig' / 'emacs.el'} {ws / file}" in done.stdout
    assert f"nvim --cmd 'luafile {ws / '.leanrig' / 'nvim.lua'}' {ws / file}" in done.stdout
    # Every path the editor's server command carries is absolute: editors start it anywhere.
    command = json.loads((ws / ".leanrig" / "edit.json").read_text())["lsp_command"]
    for flag, expected in (
        ("--suite", (cwd / SUITE).resolve()),
        ("--workspace", ws),
        ("--run-dir", ws / "run"),
    ):
        assert command[command.index(flag) + 1] == str(expected), command
    assert "--time-limit" not in command
    nvim = (ws / ".leanrig" / "nvim.lua").read_text()
    assert all(json.dumps(word) in nvim for word in command)
    for editor in ("VS Code", "Neovim", "Emacs"):
        assert editor in done.stdout
    assert str(ws) in done.stdout
    assert "Closing the editor does not stop the clock" in done.stdout

    # The shims answer --version like the real Lean, from any directory.
    real = subprocess.run(
        [str(find_lean().lean), "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    for where in (cwd, ws, Path("/")):
        shim = subprocess.run(
            [str(shims / "lean"), "--version"],
            capture_output=True,
            text=True,
            cwd=where,
            timeout=30,
            check=False,
        )
        assert (shim.returncode, shim.stdout) == (0, real.stdout), shim.stderr
    lake = subprocess.run(
        [str(shims / "lake"), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    assert lake.returncode == 0 and lake.stdout.startswith("Lake version"), lake
    assert find_lean().version in lake.stdout


def test_edit_options_json(cwd: Path) -> None:
    done = leanrig(
        "edit",
        "--suite",
        SUITE,
        "--task",
        TASK,
        "--workspace",
        "attempt",
        "--run-dir",
        "human-run",
        "--time-limit",
        "900",
        "--json",
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    paths = json.loads(done.stdout)
    ws = (cwd / "attempt").resolve()
    assert paths["workspace"] == str(ws) and paths["run_dir"] == str((cwd / "human-run").resolve())
    assert paths["task_file"] == str(ws / task_text()[2])
    assert paths["shim_dir"] == str(ws / ".leanrig" / "bin")
    command = paths["lsp_command"]
    assert command[command.index("--time-limit") + 1] == "900"
    assert command[command.index("--run-dir") + 1] == paths["run_dir"]
    assert all(Path(p).is_file() for p in paths["files"].values()), paths["files"]
    assert Path(paths["task_file"]).read_text() == task_text()[0]


def test_edit_again_keeps_the_task_file_the_human_edited(cwd: Path) -> None:
    assert leanrig("edit", "--suite", SUITE, "--task", TASK, cwd=cwd).returncode == 0
    text, _, file = task_text()
    task_file = cwd / f"leanrig-{TASK}" / file
    edited = text.replace("sorryAx (And q p) Bool.false", "And.intro (And.right h) h.1")
    assert edited != text
    task_file.write_text(edited)
    again = leanrig("edit", "--suite", SUITE, "--task", TASK, cwd=cwd)
    assert again.returncode == 0, again.stderr
    assert task_file.read_text() == edited
    assert "kept as it was: delete it to start over" in again.stdout


def test_a_human_run_directory_takes_attempts_of_one_run_only(cwd: Path) -> None:
    """After a first attempt, another suite or time limit is refused by `edit` (before writing
    anything) and by `lsp`; the same suite and limit, or a legacy directory, are taken."""
    other = cwd / "other-suite"
    shutil.copytree(cwd / SUITE, other)
    manifest = other / "suite.toml"
    manifest.write_text(manifest.read_text().replace('version = "', 'version = "9', 1))
    first = leanrig(
        "edit",
        "--suite",
        SUITE,
        "--task",
        TASK,
        "--run-dir",
        "human-run",
        "--workspace",
        "first",
        cwd=cwd,
    )
    assert first.returncode == 0, first.stderr

    async def one_attempt() -> None:  # run.json is written when an attempt starts
        async with lsp(cwd, "--workspace", "first", "--run-dir", "human-run") as editor:
            await editor.initialize(cwd / "first")

    anyio.run(one_attempt)
    assert (cwd / "human-run" / "run.json").exists()
    refused = [
        (
            "edit",
            "--suite",
            "other-suite",
            "--task",
            TASK,
            "--run-dir",
            "human-run",
            "--workspace",
            "second",
        ),
        (
            "edit",
            "--suite",
            SUITE,
            "--task",
            TASK,
            "--run-dir",
            "human-run",
            "--workspace",
            "third",
            "--time-limit",
            "600",
        ),
        (
            "lsp",
            "--suite",
            "other-suite",
            "--task",
            TASK,
            "--run-dir",
            "human-run",
            "--workspace",
            "second",
        ),
    ]
    for done in leanrig_each(*refused, cwd=cwd):
        assert done.returncode == 2, (done.args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert "run directory" in done.stderr and "another --run-dir" in done.stderr, done.stderr
        assert "suite.toml" not in done.stderr, done.stderr
    assert not (cwd / "second").exists() and not (cwd / "third").exists()
    # An agents' run directory is no human one, and a human one is not resumed as a run.
    info = json.loads((cwd / "human-run" / "run.json").read_text())
    assert info["condition"] == "human" and info["time_limit_s"] is None
    resumed = leanrig(
        "run",
        "--suite",
        SUITE,
        "--out",
        "human-run",
        "--resume",
        "--agent",
        info["agent_command"],
        cwd=cwd,
    )
    assert resumed.returncode == 2 and "human attempts" in resumed.stderr, resumed.stderr
    # The same suite and limit: another attempt of the same run.
    again = leanrig(
        "edit",
        "--suite",
        SUITE,
        "--task",
        TASK,
        "--run-dir",
        "human-run",
        "--workspace",
        "fourth",
        cwd=cwd,
    )
    assert again.returncode == 0, again.stderr
    # A limit is compared exactly as given, even after the shim passed it on.
    limited = (
        "edit",
        "--suite",
        SUITE,
        "--task",
        TASK,
        "--run-dir",
        "limited",
        "--time-limit",
        "1234567",
        "--json",
    )
    exact = leanrig(*limited, "--workspace", "fifth", cwd=cwd)
    assert exact.returncode == 0, exact.stderr
    # The editor's server, as the shim starts it: it writes run.json and, with no editor, ends.
    shim = json.loads(exact.stdout)["lsp_command"]
    subprocess.run(
        shim, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, timeout=120, check=True
    )
    assert json.loads((cwd / "limited" / "run.json").read_text())["time_limit_s"] == 1234567
    next_one = leanrig(*limited, "--workspace", "seventh", cwd=cwd)
    assert next_one.returncode == 0, next_one.stderr
    # A directory from before run.json recorded "no limit" takes attempts without one.
    legacy = {
        **info,
        "time_limit_s": 1800.0,
        "retry_policy": "an infrastructure failure is retried once",
    }
    (cwd / "human-run" / "run.json").write_text(json.dumps(legacy))
    old_dir = leanrig(
        "edit",
        "--suite",
        SUITE,
        "--task",
        TASK,
        "--run-dir",
        "human-run",
        "--workspace",
        "sixth",
        cwd=cwd,
    )
    assert old_dir.returncode == 0, old_dir.stderr


def test_edit_and_lsp_refuse_bad_arguments(cwd: Path) -> None:
    commands = [
        ("edit", "--suite", SUITE, "--task", "no_such_task"),
        ("lsp", "--suite", SUITE, "--task", "no_such_task", "--workspace", "attempt"),
    ]
    for done in leanrig_each(*commands, cwd=cwd):
        assert done.returncode == 2, (done.args, done.stdout)
        assert "Traceback" not in done.stderr
        assert "leanrig: unknown task 'no_such_task'" in done.stderr, done.stderr


async def test_lsp_session_scopes_edits_and_accepts_the_proof(cwd: Path) -> None:
    (cwd / "attempt").mkdir()
    text, scope, file = task_text()
    async with lsp(cwd, "--workspace", "attempt") as editor:
        await editor.initialize(cwd / "attempt")
        uri = await editor.open(cwd / "attempt" / file, text)
        assert errors(await editor.diagnostics_for(uri, 1)) == []
        # An edit outside the proof body is undone.
        top = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
        await editor.change(uri, [{"range": top, "text": "-- "}])
        await editor.wait(
            lambda: [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
        )
        await editor.wait(lambda: editor.texts[uri] == text)
        notice = await editor.wait(
            lambda: [d for d in editor.published(uri) if d.get("source") == "leanrig"]
        )
        assert "only the proof body" in notice[0]["message"]
        version = await editor.change(uri, body_edit(editor.texts[uri], scope, PROOF))
        assert errors(await editor.diagnostics_for(uri, version)) == []
        verdict = await editor.request(
            "workspace/executeCommand", {"command": "leanrig.checkProof", "arguments": [uri]}
        )
        assert verdict["result"]["accepted"] is True, verdict
    run = cwd / "attempt" / "run"  # the default --run-dir
    (result,) = lines(run / "results.jsonl")
    assert (result["task"], result["accepted"], result["condition"]) == (TASK, True, "human")
    assert result["timed_out"] is False and result["invocation_s"] > 0
    ledger = lines(run / "ledger.jsonl")
    assert {"open_task", "edit", "check_proof", "close_session"} <= {e["tool"] for e in ledger}
    # The accepted version's edit line, its check and the result name the same body.
    (check,) = [e for e in ledger if e["tool"] == "check_proof"]
    last_edit = max(
        (e for e in ledger if e["tool"] == "edit" and e["outcome"] == "ok"),
        key=lambda e: e["version"],
    )
    assert last_edit["body_sha"] == check["body_sha"] == result["final_body_sha"], ledger

    done = leanrig("report", "attempt/run", "--no-plots", cwd=cwd)
    assert done.returncode == 0, done.stderr
    report = json.loads((run / "report" / "report.json").read_text())
    assert (report["kind"], report["accepted"]) == ("run", 1)
    # A human run has no end: the report does not call it interrupted.
    markdown = (run / "report" / "report.md").read_text()
    assert "no end time" not in markdown
    assert "| time limit · attempts · parallel | none · 1 · 1 |" in markdown, markdown
    assert "| retry policy | none: a human attempt is never retried |" in markdown, markdown


async def test_lsp_run_dir_and_time_limit(cwd: Path) -> None:
    (cwd / "attempt").mkdir()
    text, scope, file = task_text()
    results = cwd / "human-run" / "results.jsonl"
    args = ("--workspace", "attempt", "--run-dir", "human-run", "--time-limit", "1")
    async with lsp(cwd, *args) as editor:
        await editor.initialize(cwd / "attempt")
        uri = await editor.open(cwd / "attempt" / file, text)
        await editor.wait(
            lambda: [
                n
                for n in editor.notifications
                if "time limit" in str(n["params"].get("message", ""))
            ]
        )
        await editor.wait(lambda: results.exists() and lines(results))
        # After the limit even a body edit is undone.
        await editor.change(uri, body_edit(text, scope, PROOF))
        await editor.wait(
            lambda: [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
        )
    (result,) = lines(results)
    assert (result["timed_out"], result["accepted"], result["condition"]) == (True, False, "human")
    assert result["invocation_s"] >= 1.0
    assert not (cwd / "attempt" / "run").exists()
