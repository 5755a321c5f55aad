"""`leanrig lsp` driven by raw JSON-RPC frames over its stdio, from a temporary working directory:
a held body kept through a revert, SIGTERM recording the attempt, waitForDiagnostics when held."""

from __future__ import annotations

import signal
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from agent_tools.editor import TaskScope
from agent_tools.tasks import load_suite
from lsp_bridge import LineIndex

from .test_as_typed import DEADLINE, SUITE
from .test_as_typed import (
    cwd as cwd,
)
from .test_as_typed_editor import leave, lsp_session
from .test_editor_proxy import Editor, lines

pytestmark = pytest.mark.anyio

TASK = "refl_z"
RIGHT = "\n  @Eq.refl N N.z"


def lsp(cwd: Path, *args: str, task: str = TASK) -> AbstractAsyncContextManager[Editor]:
    """`leanrig lsp --suite SUITE --task TASK --workspace ws ARGS`; the caller ends it."""
    return lsp_session(cwd, "--workspace", "ws", *args, task=task)


def task_of(cwd: Path, task: str = TASK) -> tuple[Path, TaskScope]:
    t = load_suite(cwd / SUITE).task(task)
    return cwd / "ws" / t.spec.file, TaskScope(t)


def rng(text: str, start: int, end: int) -> dict[str, Any]:
    index = LineIndex(text)
    return {
        "start": index.lsp_of_offset(start).to_json(),
        "end": index.lsp_of_offset(end).to_json(),
    }


async def opened(editor: Editor, cwd: Path, task: str = TASK) -> tuple[str, TaskScope, str]:
    path, scope = task_of(cwd, task)
    await editor.initialize(cwd / "ws")
    text = scope.task.text
    uri = await editor.open(path.resolve(), text)
    await editor.diagnostics_for(uri, 1)
    return uri, scope, text


async def settle(editor: Editor, uri: str, quiet: float = 1.0) -> None:
    """Wait until no frame has arrived from the proxy for ``quiet`` seconds."""
    with anyio.fail_after(30):
        while True:
            with anyio.move_on_after(quiet) as scope:
                await editor.changed.wait()
            if scope.cancelled_caught:
                return


async def test_an_outside_edit_while_the_body_is_held_does_not_erase_the_typed_body(
    cwd: Path,
) -> None:
    """A body held by an unterminated `/-`, then a keystroke outside it: the revert restores the
    editor's last in-scope text, held body included, not Lean's."""
    async with lsp(cwd) as e:
        uri, scope, text = await opened(e, cwd)
        end = scope.task.span.end
        await e.change(uri, [{"range": rng(text, end, end), "text": " /- my long proof"}])
        await e.wait(lambda: any("not sent to Lean" in d["message"] for d in e.published(uri)))
        held = e.texts[uri]
        i = held.index("theorem main")
        await e.change(uri, [{"range": rng(held, i, i), "text": "x"}])
        await e.wait(lambda: "xtheorem" not in e.texts[uri])
        await settle(e, uri)
        assert e.texts[uri] == held
        assert await leave(e) == 0


async def test_sigterm_still_records_the_last_valid_body_and_its_verdict(cwd: Path) -> None:
    """SIGTERM after a correct proof (as Neovim force-stops a client): exit 0, no Lean process
    left, and the results line holds that body, accepted."""
    async with lsp(cwd) as e:
        uri, scope, _ = await opened(e, cwd)
        version = await e.set_text(uri, scope.task.with_body(RIGHT))
        await e.diagnostics_for(uri, version)
        kids = [c.pid for c in psutil.Process(e.process.pid).children(recursive=True)]
        e.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(DEADLINE):
            assert await e.process.wait() == 0
    alive = [k for k in kids if psutil.pid_exists(k) and psutil.Process(k).status() != "zombie"]
    assert alive == []
    (result,) = lines(cwd / "ws" / "run" / "results.jsonl")
    from agent_tools.editor.human_attempt import body_sha

    assert result["final_body_sha"] == body_sha(RIGHT.rstrip())
    assert result["accepted"] is True, result["reasons"]


async def test_wait_for_diagnostics_on_a_held_version_is_answered(cwd: Path) -> None:
    """`textDocument/waitForDiagnostics` for a held version (never sent to Lean) is answered."""
    async with lsp(cwd) as e:
        uri, scope, text = await opened(e, cwd)
        end = scope.task.span.end
        version = await e.change(uri, [{"range": rng(text, end, end), "text": " /- typing"}])
        response = await e.request(
            "textDocument/waitForDiagnostics", {"uri": uri, "version": version}, timeout=15
        )
        assert "error" not in response
        assert await leave(e) == 0
