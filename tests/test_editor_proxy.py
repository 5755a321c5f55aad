"""`leanrig lsp` against a plain LSP client, with the real Lean: pass-through, edit scoping, the
verdict command, Lean crashing under the proxy, an editor that disconnects, the workspace shims."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import psutil
import pytest
from anyio.abc import ByteReceiveStream, Process

from agent_tools.editor import EditOptions, TaskScope, apply_changes, prepare_workspace
from agent_tools.runs import read_results, read_run_info
from agent_tools.tasks import load_suite
from lsp_bridge import LineIndex, decode_body, find_lean, read_frames

from .conftest import running

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "lean_project" / "suites" / "demo"
TASK = "refl_z"
RIGHT = "\n  @Eq.refl N N.z"
WRONG = "\n  @Eq.refl N (N.s N.z)"
DEADLINE = 60

pytestmark = pytest.mark.anyio


@dataclass
class Editor:
    """A minimal LSP client speaking to `python -m agent_tools.editor lsp`."""

    process: Process
    stream: ByteReceiveStream
    notifications: list[dict[str, Any]] = field(default_factory=list)
    server_requests: list[dict[str, Any]] = field(default_factory=list)
    responses: dict[Any, dict[str, Any]] = field(default_factory=dict)
    changed: anyio.Event = field(default_factory=anyio.Event)
    apply_edits: bool = True
    on_apply: Callable[[dict[str, Any]], None] | None = None
    next_id: int = 0
    texts: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)

    async def send(self, message: dict[str, Any]) -> None:
        body = orjson.dumps({"jsonrpc": "2.0", **message})
        assert self.process.stdin is not None
        await self.process.stdin.send(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def reader(self) -> None:
        try:
            async for body in read_frames(self.stream):
                message = decode_body(body)
                if "method" in message and "id" in message:
                    self.server_requests.append(message)
                    await self._answer(message)
                elif "method" in message:
                    self.notifications.append(message)
                else:
                    self.responses[message.get("id")] = message
                self._wake()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        self._wake()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def _answer(self, message: dict[str, Any]) -> None:
        if message["method"] == "workspace/applyEdit":
            if self.on_apply is not None:
                self.on_apply(message)
            result: Any = {"applied": self.apply_edits}
            await self.send({"id": message["id"], "result": result})
            if self.apply_edits:
                for change in message["params"]["edit"]["documentChanges"]:
                    uri = change["textDocument"]["uri"]
                    edits = [{"range": e["range"], "text": e["newText"]} for e in change["edits"]]
                    await self.change(uri, edits)
        else:
            await self.send({"id": message["id"], "result": None})

    async def wait(self, predicate: Callable[[], Any], timeout: float = DEADLINE) -> Any:
        with anyio.fail_after(timeout):
            while not (found := predicate()):
                await self.changed.wait()
        return found

    async def request(self, method: str, params: Any, timeout: float = DEADLINE) -> dict[str, Any]:
        rid = await self.send_request(method, params)
        return dict(await self.wait(lambda: self.responses.get(rid), timeout))

    async def send_request(self, method: str, params: Any) -> int:
        self.next_id += 1
        await self.send({"id": self.next_id, "method": method, "params": params})
        return self.next_id

    async def initialize(self, root: Path) -> dict[str, Any]:
        response = await self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri(),
                "clientInfo": {"name": "test-client", "version": "1"},
                "capabilities": {
                    "workspace": {
                        "didChangeWatchedFiles": {"dynamicRegistration": True},
                        "applyEdit": True,
                    },
                    "lean": {
                        "silentDiagnosticSupport": True,
                        "incrementalDiagnosticSupport": True,
                        "rpcWireFormat": "v1",
                    },
                },
                "initializationOptions": {"editDelay": 1, "hasWidgets": True},
            },
        )
        await self.send({"method": "initialized", "params": {}})
        return response

    async def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.as_uri()
        self.texts[uri], self.versions[uri] = text, version
        await self.send(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {
                        "uri": uri,
                        "languageId": "lean4",
                        "version": version,
                        "text": text,
                    },
                    "dependencyBuildMode": "never",
                },
            }
        )
        return uri

    async def change(self, uri: str, changes: list[dict[str, Any]]) -> int:
        self.texts[uri] = apply_changes(self.texts[uri], changes)
        self.versions[uri] += 1
        await self.send(
            {
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": self.versions[uri]},
                    "contentChanges": changes,
                },
            }
        )
        return self.versions[uri]

    async def set_text(self, uri: str, text: str) -> int:
        return await self.change(uri, [{"text": text}])

    async def diagnostics_for(self, uri: str, version: int) -> list[dict[str, Any]]:
        """Diagnostics once ``version`` is fully reported (waitForDiagnostics as the barrier)."""
        response = await self.request(
            "textDocument/waitForDiagnostics", {"uri": uri, "version": version}
        )
        assert "error" not in response, response
        return self.published(uri)

    def published(self, uri: str) -> list[dict[str, Any]]:
        diags: list[dict[str, Any]] = []
        for n in self.notifications:
            if n["method"] == "textDocument/publishDiagnostics" and n["params"]["uri"] == uri:
                if n["params"].get("isIncremental"):
                    diags = diags + n["params"]["diagnostics"]
                else:
                    diags = list(n["params"]["diagnostics"])
        return diags


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
async def editor(workspace: Path, tmp_path: Path) -> AsyncIterator[Editor]:
    async with start_editor(workspace, tmp_path / "run") as e:
        yield e


def lsp_argv(workspace: Path, run_dir: Path, *extra: str, suite: Path = SUITE) -> list[str]:
    return [
        sys.executable,
        "-m",
        "agent_tools.editor",
        "lsp",
        "--suite",
        str(suite),
        "--task",
        TASK,
        "--workspace",
        str(workspace),
        "--run-dir",
        str(run_dir),
        *extra,
    ]


class start_editor:
    def __init__(self, workspace: Path, run_dir: Path, *extra: str, suite: Path = SUITE) -> None:
        self.argv = lsp_argv(workspace, run_dir, *extra, suite=suite)
        self.workspace = workspace

    async def __aenter__(self) -> Editor:
        self.process = await anyio.open_process(
            self.argv, cwd=ROOT, stderr=subprocess.DEVNULL, start_new_session=True
        )
        assert self.process.stdout is not None
        self.editor = Editor(self.process, self.process.stdout)
        self.tg = anyio.create_task_group()
        await self.tg.__aenter__()
        self.tg.start_soon(self.editor.reader)
        return self.editor

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self.process.returncode is None:
                with anyio.move_on_after(5):
                    await self.editor.request("shutdown", None, timeout=5)
                with anyio.move_on_after(2):
                    await self.editor.send({"method": "exit", "params": None})
                assert self.process.stdin is not None
                await self.process.stdin.aclose()
                with anyio.fail_after(30):
                    await self.process.wait()
        finally:
            if self.process.returncode is None:
                os.killpg(self.process.pid, signal.SIGKILL)
            self.tg.cancel_scope.cancel()
            await self.tg.__aexit__(None, None, None)
            with anyio.CancelScope(shield=True):
                await self.process.aclose()


def task_setup(workspace: Path) -> tuple[Path, str, TaskScope]:
    task = load_suite(SUITE).task(TASK)
    return workspace / task.spec.file, task.text, TaskScope(task)


def body_edit(text: str, scope: TaskScope, body: str) -> list[dict[str, Any]]:
    """A range edit replacing the body of ``text``."""
    index = LineIndex(text)
    after = scope.task.text[scope.task.span.end :]
    start, end = len(scope.prefix), len(text) - len(after)
    rng = {"start": index.lsp_of_offset(start).to_json(), "end": index.lsp_of_offset(end).to_json()}
    return [{"range": rng, "text": body}]


def errors(diags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in diags if d.get("severity") == 1]


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines() if x.strip()]


def test_scope_decides_outside_held_and_ok() -> None:
    _, text, scope = task_setup(Path("/nonexistent"))
    assert scope.decide(text).outcome == "ok"
    assert scope.decide(text.replace("namespace", "namespac")).outcome == "outside"
    task = scope.task
    held = scope.decide(task.with_body("\n  /- open comment"))
    assert held.outcome == "held"
    assert held.reason is not None
    assert "comment" in held.reason
    right = task.with_body(RIGHT)
    assert scope.decide(right).outcome == "ok" and scope.final_body(right) == RIGHT
    # Typing over the proof's last line and its line break is an edit of the proof; the
    # submission keeps the task's own blank lines.
    tight = scope.prefix + RIGHT + "\n" + scope.suffix
    assert scope.decide(tight).outcome == "ok"
    assert scope.submission(tight) == right
    # The next command must still start its line.
    assert scope.decide(scope.prefix + RIGHT + " " + scope.suffix).outcome == "outside"


def test_a_task_whose_next_command_is_indented_is_editable(tmp_path: Path) -> None:
    from .test_verifier import INDENTED_AFTER, SYMM, exploit_suite_with

    for i, text in enumerate(INDENTED_AFTER.values()):
        _, task = exploit_suite_with(tmp_path / str(i), "indented", text)
        scope = TaskScope(task)
        assert scope.decide(task.text).outcome == "ok"
        proved = task.with_body("\n  " + SYMM)
        assert scope.decide(proved).outcome == "ok"
        assert scope.submission(proved) == proved
        assert scope.decide(proved.replace("  theorem after", "theorem after")).outcome == (
            "outside" if "theorem after" in text else "ok"
        )


def test_a_last_target_with_trailing_whitespace_is_editable(tmp_path: Path) -> None:
    from .test_verifier import ESCAPED_TASK, SYMM, exploit_suite_with

    last = ESCAPED_TASK.replace("\n\nend Exploit.Ünï\n", "  ")  # the namespace ends with the file
    _, task = exploit_suite_with(tmp_path, "last", last)
    scope = TaskScope(task)
    assert scope.suffix == ""
    assert scope.decide(task.text).outcome == "ok"
    assert scope.decide(task.with_body("\n  " + SYMM)).outcome == "ok"


def test_apply_changes_uses_utf16_ranges() -> None:
    text = "a𝔽b\nc"
    # 𝔽 is two UTF-16 units: character 3 is just after it.
    rng = {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 4}}
    assert apply_changes(text, [{"range": rng, "text": "X"}]) == "a𝔽X\nc"
    assert apply_changes(text, [{"text": "whole"}]) == "whole"


async def test_lean_extensions_and_extra_fields_pass_through(
    editor: Editor, workspace: Path
) -> None:
    init = await editor.initialize(workspace)
    caps = init["result"]["capabilities"]
    assert "leanrig.checkProof" in caps["executeCommandProvider"]["commands"]
    assert "rpcProvider" in caps["experimental"]  # Lean's own capabilities, untouched
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    diags = await editor.diagnostics_for(uri, 1)
    sorry = [d for d in diags if "sorry" in str(d["message"])]
    assert sorry, diags
    assert "fullRange" in sorry[0]  # Lean's extra diagnostic fields reach the editor
    # Server → client request (file watcher registration) with Lean's own string id.
    registration = await editor.wait(
        lambda: [r for r in editor.server_requests if r["method"] == "client/registerCapability"]
    )
    assert registration[0]["id"] == "register_lean_watcher"
    await editor.wait(
        lambda: any(
            n["method"] == "$/lean/fileProgress"
            and n["params"]["processing"] == []
            and n["params"]["textDocument"]["version"] == 1
            for n in editor.notifications
        )
    )
    index = LineIndex(text)
    body_pos = index.lsp_of_offset(len(scope.prefix) + 3).to_json()
    doc = {"uri": uri}
    plain = await editor.request("$/lean/plainGoal", {"textDocument": doc, "position": body_pos})
    assert "error" not in plain
    term = await editor.request("$/lean/plainTermGoal", {"textDocument": doc, "position": body_pos})
    assert "Eq N.z N.z" in term["result"]["goal"]
    session = (await editor.request("$/lean/rpc/connect", {"uri": uri}))["result"]["sessionId"]
    call = {"textDocument": doc, "position": body_pos, "sessionId": session}
    goals = await editor.request(
        "$/lean/rpc/call",
        {
            **call,
            "method": "Lean.Widget.getInteractiveGoals",
            "params": {"textDocument": doc, "position": body_pos},
        },
    )
    assert "error" not in goals  # term mode: no tactic goals (null), but the call went through
    term_goal = await editor.request(
        "$/lean/rpc/call",
        {
            **call,
            "method": "Lean.Widget.getInteractiveTermGoal",
            "params": {"textDocument": doc, "position": body_pos},
        },
    )
    assert term_goal["result"] is not None, term_goal
    await editor.send(
        {"method": "$/lean/rpc/keepAlive", "params": {"uri": uri, "sessionId": session}}
    )
    hierarchy = await editor.request("$/lean/prepareModuleHierarchy", {"textDocument": doc})
    assert "error" not in hierarchy, hierarchy
    # The proxy's own ids never collide with the editor's.
    again = await editor.request(
        "$/lean/plainTermGoal", {"textDocument": doc, "position": body_pos}
    )
    assert again["result"] == term["result"]


async def test_a_second_file_is_not_scoped(editor: Editor, workspace: Path) -> None:
    await editor.initialize(workspace)
    other = workspace / "Other.lean"
    uri = await editor.open(other, "prelude\ninductive N where\n  | z : N\n")
    assert errors(await editor.diagnostics_for(uri, 1)) == []
    version = await editor.set_text(uri, "prelude\ninductive N where\n  | z : N\n#check N.q\n")
    diags = await editor.diagnostics_for(uri, version)
    assert errors(diags), diags
    assert not [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]


async def test_edit_outside_the_body_is_reverted_and_explained(
    editor: Editor, workspace: Path
) -> None:
    await editor.initialize(workspace)
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    version = await editor.change(
        uri,
        [
            {
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "text": "-- ",
            }
        ],
    )
    revert = await editor.wait(
        lambda: [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
    )
    change = revert[0]["params"]["edit"]["documentChanges"][0]
    assert change["textDocument"]["version"] >= version
    await editor.wait(lambda: editor.texts[uri] == text)
    scoping = await editor.wait(
        lambda: [d for d in editor.published(uri) if d.get("source") == "leanrig"]
    )
    assert "only the proof body" in scoping[0]["message"]
    # Lean never saw the edit: the file still elaborates with only the sorry warning.
    diags = await editor.diagnostics_for(uri, editor.versions[uri])
    assert errors([d for d in diags if d.get("source") != "leanrig"]) == []
    version = await editor.change(uri, body_edit(editor.texts[uri], scope, WRONG))
    diags = await editor.diagnostics_for(uri, version)
    assert [d for d in diags if d.get("source") == "leanrig"] == []
    assert errors(diags), diags


def saved_by_vscode(text: str) -> list[dict[str, Any]]:
    """The content changes vscode-lean4's save sends by default (trim trailing whitespace and
    final newlines, insert a final newline), bottom up."""
    index = LineIndex(text)
    changes = []
    lines = text.split("\n")
    if not text.endswith("\n"):
        end = index.lsp_of_offset(len(text)).to_json()
        changes.append({"range": {"start": end, "end": end}, "text": "\n"})
    for n in reversed(range(len(lines))):
        kept = len(lines[n].rstrip(" \t"))
        if kept < len(lines[n]):
            start = {"line": n, "character": kept}
            end = {"line": n, "character": len(lines[n])}
            changes.append({"range": {"start": start, "end": end}, "text": ""})
    return changes


async def reached_lean_and_accepted(editor: Editor, uri: str, version: int) -> None:
    """``version`` of ``uri`` went to Lean as it is (no leanrig notice, no revert), Lean found
    no error, and `leanrig.checkProof` accepts it."""
    diags = await editor.diagnostics_for(uri, version)
    assert [d for d in diags if d.get("source") == "leanrig"] == []
    assert errors(diags) == []
    assert not [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
    verdict = await editor.request(
        "workspace/executeCommand", {"command": "leanrig.checkProof", "arguments": [uri]}
    )
    assert verdict["result"]["accepted"] is True, verdict


async def test_a_save_that_trims_whitespace_outside_the_body_reaches_lean_and_is_accepted(
    workspace: Path, tmp_path: Path
) -> None:
    """A task file with line-end spaces and no final line break, saved as vscode-lean4 does."""
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    task_file = suite / load_suite(suite).task(TASK).spec.file
    original = task_file.read_text(encoding="utf-8")
    assert original.endswith("\n") and "theorem" in original
    spaced = original.replace("\n", "  \n", 2).rstrip("\n")  # spaces, no final line break
    task_file.write_text(spaced, encoding="utf-8")
    task = load_suite(suite).task(TASK)
    scope = TaskScope(task)
    async with start_editor(workspace, tmp_path / "run", suite=suite) as editor:
        await editor.initialize(workspace)
        uri = await editor.open(workspace / task.spec.file, task.text)
        await editor.diagnostics_for(uri, 1)
        await editor.change(uri, body_edit(task.text, scope, RIGHT))
        version = await editor.change(uri, saved_by_vscode(editor.texts[uri]))
        assert editor.texts[uri] == editor.texts[uri].rstrip() + "\n"
        assert "  \n" not in editor.texts[uri]
        await reached_lean_and_accepted(editor, uri, version)


async def test_a_file_changed_to_crlf_line_ends_reaches_lean_and_is_accepted(
    editor: Editor, workspace: Path
) -> None:
    """The whole text resent with CRLF line ends, as VS Code's "Change End of Line Sequence"."""
    await editor.initialize(workspace)
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    await editor.change(uri, body_edit(text, scope, RIGHT))
    version = await editor.set_text(uri, editor.texts[uri].replace("\n", "\r\n"))
    await reached_lean_and_accepted(editor, uri, version)


async def test_a_refused_revert_keeps_lean_on_the_last_valid_text(
    editor: Editor, workspace: Path
) -> None:
    editor.apply_edits = False
    await editor.initialize(workspace)
    path, text, _scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    await editor.set_text(uri, text.replace("theorem main", "theorem main2"))
    notice = await editor.wait(
        lambda: [d for d in editor.published(uri) if "did not undo" in str(d.get("message"))]
    )
    assert notice
    reverts = [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
    assert len(reverts) == 3  # retried, then explained


async def test_a_held_body_is_not_sent_and_not_reverted(editor: Editor, workspace: Path) -> None:
    await editor.initialize(workspace)
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    await editor.change(uri, body_edit(text, scope, "\n  /- still typing"))
    held = await editor.wait(
        lambda: [d for d in editor.published(uri) if d.get("code") == "leanrig.held"]
    )
    assert "not sent to Lean" in held[0]["message"]
    assert not [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
    version = await editor.change(uri, body_edit(editor.texts[uri], scope, RIGHT))
    diags = await editor.diagnostics_for(uri, version)
    assert diags == [] or errors(diags) == [], diags
    assert not [d for d in diags if d.get("source") == "leanrig"]


async def test_check_proof_accepts_and_writes_ledger_and_result(
    editor: Editor, workspace: Path, tmp_path: Path
) -> None:
    await editor.initialize(workspace)
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    version = await editor.change(uri, body_edit(text, scope, RIGHT))
    assert errors(await editor.diagnostics_for(uri, version)) == []
    verdict = await editor.request(
        "workspace/executeCommand", {"command": "leanrig.checkProof", "arguments": [uri]}
    )
    assert verdict["result"]["accepted"] is True, verdict
    await editor.wait(
        lambda: [
            n for n in editor.notifications if "ACCEPTED" in str(n["params"].get("message", ""))
        ]
    )
    run = tmp_path / "run"
    (result,) = lines(run / "results.jsonl")
    assert result["task"] == TASK
    assert result["accepted"] is True
    assert result["condition"] == "human"
    assert result["agent_tool"] == "test-client 1"
    assert result["invocation_s"] > 0
    assert read_results(run).results[0].accepted
    assert read_run_info(run).condition == "human"
    # The connection's closing ledger line comes when the editor leaves.
    await editor.request("shutdown", None)
    await editor.send({"method": "exit", "params": None})
    with anyio.fail_after(DEADLINE):
        await editor.process.wait()
    ledger = lines(run / "ledger.jsonl")
    (closing,) = [e for e in ledger if e["tool"] == "close_session"]
    assert closing["edit_delay_ms"] == 1
    edits = [e for e in ledger if e["tool"] == "edit" and e["outcome"] == "ok"]
    assert {e["version"] for e in edits} >= {1, version}
    assert all(e["lean_ms"] > 0 for e in edits)
    assert [e["errors"] for e in edits if e["version"] == version] == [0]
    assert [e["accepted"] for e in ledger if e["tool"] == "check_proof"] == [True]


async def test_typing_over_the_proof_line_is_an_edit_and_the_ledger_counts_what_lean_said(
    editor: Editor, workspace: Path, tmp_path: Path
) -> None:
    """The ledger's error count per version is what Lean reported for it, a revert's echo is no
    version, and the accepted attempt's result says so."""
    await editor.initialize(workspace)
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    body_line = LineIndex(text).lsp_of_offset(scope.task.span.start).line + 1
    whole_line = {
        "start": {"line": body_line, "character": 0},
        "end": {"line": body_line + 1, "character": 0},
    }
    wrong = await editor.change(uri, [{"range": whole_line, "text": WRONG.lstrip("\n")}])
    seen = errors(await editor.diagnostics_for(uri, wrong))
    assert seen and not [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
    outside = await editor.change(
        uri,
        [
            {
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "text": "-- ",
            }
        ],
    )
    assert outside > wrong
    await editor.wait(lambda: not editor.texts[uri].startswith("-- "))
    typed = editor.texts[uri].split("\n")[body_line]  # the line now holds the wrong proof
    line_only = {
        "start": {"line": body_line, "character": 0},
        "end": {"line": body_line, "character": len(typed)},
    }
    right = await editor.change(uri, [{"range": line_only, "text": RIGHT.lstrip("\n")}])
    assert errors(await editor.diagnostics_for(uri, right)) == []
    verdict = await editor.request(
        "workspace/executeCommand", {"command": "leanrig.checkProof", "arguments": [uri]}
    )
    assert verdict["result"]["accepted"] is True, verdict
    run = tmp_path / "run"
    (result,) = lines(run / "results.jsonl")
    assert result["accepted"] is True and result["reasons"] == []
    ledger = lines(run / "ledger.jsonl")
    edits = {e["version"]: e for e in ledger if e["tool"] == "edit" and e["outcome"] == "ok"}
    assert edits[wrong]["errors"] == len(seen), edits[wrong]
    assert edits[right]["errors"] == 0
    assert set(edits) == {1, wrong, right}


async def test_time_limit_refuses_edits_and_runs_the_verdict(
    workspace: Path, tmp_path: Path
) -> None:
    async with start_editor(workspace, tmp_path / "run", "--time-limit", "1") as editor:
        await editor.initialize(workspace)
        path, text, scope = task_setup(workspace)
        uri = await editor.open(path, text)
        await editor.wait(
            lambda: [
                n
                for n in editor.notifications
                if "time limit" in str(n["params"].get("message", ""))
            ]
        )
        results = tmp_path / "run" / "results.jsonl"
        await editor.wait(lambda: results.exists() and lines(results), timeout=DEADLINE)
        await editor.change(uri, body_edit(text, scope, RIGHT))
        await editor.wait(
            lambda: [r for r in editor.server_requests if r["method"] == "workspace/applyEdit"]
        )
    (result,) = lines(results)
    assert result["timed_out"] is True
    assert result["accepted"] is False
    assert result["invocation_s"] == pytest.approx(1.0, abs=0.05)


def lean_server_under(pid: int) -> psutil.Process:
    for child in psutil.Process(pid).children(recursive=True):
        cmd = child.cmdline()
        if cmd and Path(cmd[0]).name == "lean" and "--server" in cmd:
            return child
    raise AssertionError("no lean --server under the proxy")


async def test_lean_crash_gives_an_error_and_restarts_with_the_document(
    editor: Editor, workspace: Path
) -> None:
    await editor.initialize(workspace)
    path, text, scope = task_setup(workspace)
    uri = await editor.open(path, text)
    await editor.diagnostics_for(uri, 1)
    index = LineIndex(text)
    goal = {
        "textDocument": {"uri": uri},
        "position": index.lsp_of_offset(len(scope.prefix) + 3).to_json(),
    }
    # A request Lean holds (a version not sent yet), then Lean dies under it. The answered
    # request after it shows the held one reached Lean (one stream, in order) before the kill.
    held = await editor.send_request("textDocument/waitForDiagnostics", {"uri": uri, "version": 50})
    await editor.request("$/lean/plainTermGoal", goal)
    lean_server_under(editor.process.pid).kill()
    failed = await editor.wait(lambda: editor.responses.get(held))
    assert "error" in failed
    assert "restart" in failed["error"]["message"]
    await editor.wait(
        lambda: [n for n in editor.notifications if n["method"] == "window/showMessage"]
    )
    # The new Lean has the document: queries and edits work without re-opening.
    term = await editor.request("$/lean/plainTermGoal", goal)
    assert term["result"] is not None, term
    version = await editor.change(uri, body_edit(text, scope, WRONG))
    assert errors(await editor.diagnostics_for(uri, version))


async def test_a_crashed_file_worker_is_said_recorded_and_restarted_by_the_next_edit(
    workspace: Path, tmp_path: Path
) -> None:
    """The task file's `lean --worker` killed (the watchdog lives on): a message, a new worker
    at the next edit, and `worker_stops` 1 on the closing ledger line."""
    run = tmp_path / "run"
    async with start_editor(workspace, run) as editor:
        await editor.initialize(workspace)
        path, text, scope = task_setup(workspace)
        uri = await editor.open(path, text)
        await editor.diagnostics_for(uri, 1)
        server = lean_server_under(editor.process.pid)
        (worker,) = [c for c in server.children(recursive=True) if "--worker" in c.cmdline()]
        worker.kill()
        shown = await editor.wait(
            lambda: [
                n
                for n in editor.notifications
                if n["method"] == "window/showMessage"
                and "worker crashed" in n["params"]["message"]
            ]
        )
        assert "next edit" in shown[0]["params"]["message"]
        version = await editor.change(uri, body_edit(text, scope, WRONG))
        assert errors(await editor.diagnostics_for(uri, version))
    ledger = lines(run / "ledger.jsonl")
    (closing,) = [e for e in ledger if e["tool"] == "close_session"]
    assert closing["worker_stops"] == 1 and closing["lean_restarts"] == 0


async def test_a_header_lean_cannot_import_is_no_worker_crash(
    workspace: Path, tmp_path: Path
) -> None:
    """Lean's fatal progress for an unimportable header (worker alive) gets no crash message."""
    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    task_file = suite / load_suite(SUITE).task(TASK).spec.file
    text = task_file.read_text().replace("import Demo.Basic", "import Nope.Missing", 1)
    task_file.write_text(text)
    run = tmp_path / "run"
    starter = start_editor(workspace, run)
    starter.argv[starter.argv.index(str(SUITE))] = str(suite)
    async with starter as editor:
        await editor.initialize(workspace)
        uri = await editor.open(workspace / task_file.relative_to(suite), text)
        assert errors(await editor.diagnostics_for(uri, 1))
        await anyio.sleep(0.5)  # the fatal progress has come and gone
        assert not [
            n
            for n in editor.notifications
            if n["method"] == "window/showMessage" and "crashed" in n["params"]["message"]
        ]
    (closing,) = [e for e in lines(run / "ledger.jsonl") if e["tool"] == "close_session"]
    assert closing["worker_stops"] == 0


async def test_editor_disconnecting_mid_request_leaves_no_lean(
    workspace: Path, tmp_path: Path
) -> None:
    argv = lsp_argv(workspace, tmp_path / "run")
    process = await anyio.open_process(
        argv, cwd=ROOT, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        assert process.stdout is not None
        editor = Editor(process, process.stdout)
        async with anyio.create_task_group() as tg:
            tg.start_soon(editor.reader)
            await editor.initialize(workspace)
            path, text, _ = task_setup(workspace)
            uri = await editor.open(path, text)
            await editor.diagnostics_for(uri, 1)
            server = lean_server_under(process.pid)
            await editor.send_request(
                "textDocument/waitForDiagnostics", {"uri": uri, "version": 50}
            )
            assert process.stdin is not None
            await process.stdin.aclose()  # the editor is gone, the request unanswered
            with anyio.fail_after(DEADLINE):
                await process.wait()
            tg.cancel_scope.cancel()
        assert process.returncode == 0
        assert not running(server)
        (result,) = lines(tmp_path / "run" / "results.jsonl")
        assert result["accepted"] is False  # the final verdict ran on the last valid body
        assert result["reasons"] != ["no verdict"]
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.CancelScope(shield=True):
            await process.aclose()


def test_workspace_shims_answer_version_and_settings_point_at_them(tmp_path: Path) -> None:
    ws = prepare_workspace(EditOptions(suite=SUITE, task=TASK, workspace=tmp_path / "ws"))
    real = find_lean()
    lean_version = subprocess.run(
        [str(ws.shim_dir / "lean"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    expected = subprocess.run(
        [str(real.lean), "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert lean_version == expected
    lake = subprocess.run(
        [str(ws.shim_dir / "lake"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    assert lake.startswith("Lake version") or "Lake" in lake
    assert f"Lean version {real.version}" in lake or real.lake is not None
    settings = orjson.loads((ws.root / ".vscode" / "settings.json").read_bytes())
    assert settings["lean4.envPathExtensions"] == [str(ws.shim_dir)]
    assert str(ws.shim_dir.parent) in (ws.root / ".dir-locals.el").read_text()
    lua = ws.files["neovim"].read_text()
    assert "agent_tools.editor" in lua
    assert "'lsp'" in lua or '"lsp"' in lua
    assert ws.task_file.read_text() == load_suite(SUITE).task(TASK).text
    assert "VS Code" in ws.instructions()
