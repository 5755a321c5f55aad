"""Direct file workers (``ServerCommand.direct_workers``, one ``lean --worker`` per document) on
the real Lean: the watchdog's answers, header changes and dead workers handled, nothing left."""

from __future__ import annotations

import math
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from lsp_bridge import (
    DocQuery,
    DocumentReport,
    ElaborationFailed,
    LeanClient,
    LeanInstall,
    LspPos,
    RequestTimeout,
    ServerCommand,
    ServerStartFailed,
    Severity,
    Timeouts,
    WorkerCrashed,
)
from lsp_bridge import transport as transport_module
from lsp_bridge.framing import unread_notification
from lsp_bridge.transport import LspTransport
from repl_pool import LeanEnvironment, PoolConfig, WarmPool

from .conftest import process_gone
from .lean_snippets import ARITH, GOOD, PRELUDE, slow_theorem

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_lsp_peer.py")
TIMEOUTS = Timeouts(barrier=30, request=30)

# A benchmark-like file (universes, a namespace, unicode names, a docstring); BODIES vary.
HEAD = """prelude
/-! # Functions respect equality, in two universes -/
universe u v
inductive Eq {α : Sort u} (a : α) : α → Prop where
  | refl : Eq a a
inductive N where
  | z : N
  | s : N → N

namespace Demo.Function

/-- If `a₁ = a₂` then `φ a₁ = φ a₂`, for every `φ : α → β`. -/
theorem congr_φ {α : Sort u} {β : Sort v} (φ : α → β) {a₁ a₂ : α} (h : @Eq α a₁ a₂) :
    @Eq β (φ a₁) (φ a₂) :=
  """
TAIL = "\n\nend Demo.Function\n"
BODIES = [
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h",  # a proof
    "@Eq.refl β (φ a₁)",  # a type mismatch
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂",  # one short
    "h₀",  # unknown identifier
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h",
    "(",  # a parse error
]


def text(body: str) -> str:
    return HEAD + body + TAIL


def direct(command: ServerCommand) -> ServerCommand:
    return replace(command, direct_workers=True)


@pytest.fixture
async def workers(server_command: ServerCommand) -> AsyncIterator[LeanClient]:
    async with LeanClient.start(direct(server_command), timeouts=TIMEOUTS) as c:
        assert c.direct
        yield c


def worker_processes(client: LeanClient) -> list[psutil.Process]:
    return [psutil.Process(pid) for pid in client.pids]


def hold_starts(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Delay every worker start's first write by ``seconds``, until ``monkeypatch.undo()``."""
    real_post = LspTransport.post

    async def held_post(self: LspTransport, messages: Any) -> None:
        await anyio.sleep(seconds)
        await real_post(self, messages)

    monkeypatch.setattr(LspTransport, "post", held_post)


def test_the_worker_command_is_the_server_command_with_worker_in_place_of_server() -> None:
    wrapped = ServerCommand(
        argv=("prlimit", "--as=1", "bwrap", "--die-with-parent", "/opt/lean/bin/lean", "--server"),
        cwd=Path("/p"),
    )
    assert wrapped.worker_argv() == [
        "prlimit",
        "--as=1",
        "bwrap",
        "--die-with-parent",
        "/opt/lean/bin/lean",
        "--worker",
        f"-Dserver.reportDelayMs={wrapped.report_delay_ms}",
    ]
    # A sandbox binding a directory named like Lean: only the program's `--server` changes.
    bound = ServerCommand(
        argv=("bwrap", "--bind", "/w/lean-bench", "/w/lean-bench", "--", "/l/lean", "--server"),
        cwd=Path("/p"),
    )
    assert bound.worker_argv() == [
        "bwrap",
        "--bind",
        "/w/lean-bench",
        "/w/lean-bench",
        "--",
        "/l/lean",
        "--worker",
        f"-Dserver.reportDelayMs={bound.report_delay_ms}",
    ]
    # Lake's watchdog prepares its workers' environment itself.
    lake = ServerCommand(argv=("/opt/lean/bin/lake", "serve", "--"), cwd=Path("/p"))
    assert lake.worker_argv() is None
    fake = ServerCommand(argv=(sys.executable, str(FAKE)), cwd=Path("/p"))
    assert fake.worker_argv() is None


async def test_a_command_without_a_worker_form_is_served_through_its_server(
    tmp_path: Path,
) -> None:
    command = ServerCommand(argv=(sys.executable, str(FAKE)), cwd=tmp_path, direct_workers=True)
    async with LeanClient.start(command, timeouts=TIMEOUTS) as client:
        assert not client.direct
        uri = (tmp_path / "A.lean").as_uri()
        report, _ = await client.update(uri, "prelude\n")
        assert report.status == "done"


async def test_direct_workers_answer_each_version_as_the_watchdog_does(
    server_command: ServerCommand, project: Path
) -> None:
    uri = (project / "Congr.lean").as_uri()
    line = HEAD.count("\n")
    column = len(HEAD.rsplit("\n", 1)[1])
    queries = [
        DocQuery.symbols(0),
        DocQuery.plain_goal(LspPos(line, column)).made_optional(),
        DocQuery.plain_term_goal(LspPos(line, column)).made_optional(),
    ]
    seen: dict[bool, list[object]] = {}
    for is_direct in (False, True):
        command = direct(server_command) if is_direct else server_command
        answers: list[object] = []
        async with LeanClient.start(command, timeouts=TIMEOUTS) as client:
            assert client.direct is is_direct
            for body in BODIES:
                report, (symbols, goal, term) = await client.update(uri, text(body), queries)
                assert report.status == "done"
                answers.append(
                    (
                        [(d.severity, d.range, d.message) for d in report.diagnostics],
                        symbols,
                        goal,
                        term,
                    )
                )
        seen[is_direct] = answers
    assert seen[True] == seen[False]
    errors = [[d for d in a[0] if d[0] == Severity.ERROR] for a in seen[True]]  # type: ignore[index]
    assert errors[0] == [] and errors[4] == []
    assert all(errors[i] for i in (1, 2, 3, 5))


async def test_the_references_index_lean_sends_is_dropped_unread(
    workers: LeanClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$/lean/ileanInfo…`` notifications are dropped before decoding; diagnostics, progress
    and answers are still dispatched."""
    dropped: list[bytes] = []
    dispatched: list[str] = []
    real_unread, real_dispatch = unread_notification, LspTransport._dispatch

    def unread(body: bytes) -> bool:
        if real_unread(body):
            dropped.append(body)
            return True
        return False

    def dispatch(self: LspTransport, message: dict[str, Any]) -> None:
        dispatched.append(str(message.get("method", "(answer)")))
        real_dispatch(self, message)

    monkeypatch.setattr(transport_module, "unread_notification", unread)
    monkeypatch.setattr(LspTransport, "_dispatch", dispatch)
    uri = (project / "Congr.lean").as_uri()
    for body in BODIES[:2]:
        report = (await workers.update(uri, text(body)))[0]
        assert report.status == "done"
    assert not report.clean and report.diagnostics
    assert dropped, "Lean sent no references index in the form the client drops"
    assert all(b'"method":"$/lean/ilean' in body for body in dropped)
    assert not [m for m in dispatched if "ilean" in m]
    assert "$/lean/fileProgress" in dispatched
    assert "textDocument/publishDiagnostics" in dispatched


def test_only_leans_references_index_is_dropped_unread() -> None:
    assert unread_notification(b'{"jsonrpc":"2.0","method":"$/lean/ileanInfoFinal","params":{}}')
    assert unread_notification(b'{"jsonrpc":"2.0","method":"$/lean/ileanInfoUpdate","params":{}}')
    for kept in (
        b'{"jsonrpc":"2.0","method":"textDocument/publishDiagnostics","params":{}}',
        b'{"jsonrpc":"2.0","method":"$/lean/fileProgress","params":{}}',
        b'{"id":3,"jsonrpc":"2.0","method":"$/lean/ileanInfoFinal","params":{}}',  # a request
        b'{"id":3,"jsonrpc":"2.0","result":"$/lean/ileanInfoFinal"}',
        b'{"jsonrpc": "2.0", "method": "$/lean/ileanInfoFinal"}',  # spaced: not Lean's form
    ):
        assert not unread_notification(kept)


async def test_one_worker_per_document_and_closing_a_document_ends_its_worker(
    workers: LeanClient, project: Path
) -> None:
    a, b = (project / "A.lean").as_uri(), (project / "B.lean").as_uri()
    await workers.update(a, text(BODIES[0]))
    await workers.update(b, text(BODIES[1]))
    procs = worker_processes(workers)
    assert len(procs) == 2 and all("--worker" in p.cmdline() for p in procs)
    assert all(p.ppid() == os.getpid() for p in procs)  # no watchdog between
    await workers.close_document(a)
    with anyio.fail_after(10):
        while not process_gone(procs[0].pid):
            await anyio.sleep(0.02)
    assert workers.pids == (procs[1].pid,)


async def test_closing_the_client_ends_every_worker(
    server_command: ServerCommand, project: Path
) -> None:
    async with LeanClient.start(direct(server_command), timeouts=TIMEOUTS) as client:
        for name in ("A", "B", "C"):
            await client.update((project / f"{name}.lean").as_uri(), text(BODIES[1]))
        pids = client.pids
        assert len(pids) == 3
    assert all(process_gone(pid) for pid in pids)


async def test_a_header_change_starts_a_new_worker_for_the_document(
    workers: LeanClient, project: Path
) -> None:
    """A comment before `prelude` moves the header (Lean's worker exits): a new worker answers."""
    uri = (project / "A.lean").as_uri()
    report, _ = await workers.update(uri, text(BODIES[1]))
    assert report.errors
    (first,) = workers.pids
    moved = "-- Copyright (c) 2026. Released under Apache 2.0.\n" + text(BODIES[0])
    report, (symbols,) = await workers.update(uri, moved, [DocQuery.symbols(0)])
    assert report.status == "done" and report.errors == ()
    assert symbols and workers.pids != (first,)
    assert process_gone(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
    (second,) = workers.pids
    report, _ = await workers.update(uri, moved.replace(BODIES[0], BODIES[3]))
    assert report.errors and workers.pids == (second,)


async def test_a_killed_worker_is_a_worker_crash_and_the_next_change_restarts_it(
    workers: LeanClient, project: Path
) -> None:
    uri = (project / "A.lean").as_uri()
    await workers.update(uri, text(BODIES[0]))
    (pid,) = workers.pids
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(10):
        while workers.pids:
            await anyio.sleep(0.02)
    with pytest.raises((WorkerCrashed, ElaborationFailed)):
        await workers.plain_goal(uri, LspPos(0, 0))
    assert workers.alive  # as Lean's watchdog: the server is fine, the document is not
    report, _ = await workers.update(uri, text(BODIES[1]))
    assert report.status == "done" and report.errors
    assert workers.pids and workers.pids[0] != pid


async def test_the_pool_serves_through_direct_workers_by_default(
    lean_install: LeanInstall, project: Path
) -> None:
    config = PoolConfig(max_processes=1, default_header="prelude", timeouts=TIMEOUTS)
    assert config.direct_workers
    async with WarmPool.open(LeanEnvironment(lean_install, project), config) as pool:
        key = pool.key_for(text(BODIES[0]))
        for holder, body in (("a", BODIES[0]), ("b", BODIES[1])):
            async with pool.acquire(key, holder=holder) as slot:
                report = await slot.elaborate(text(body), timeout=30)
                assert bool(report.errors) is (holder == "b")
        assert slot.client is not None and slot.client.direct
        processes = [psutil.Process(pid) for pid in slot.client.pids]
        # One worker per open document ("a" took over the header's), no watchdog process.
        assert len(processes) == len(slot.holders()) == 2
        assert all("--worker" in p.cmdline() for p in processes)
        (stat,) = pool.stats().processes
        assert stat.rss_mb > sum(p.memory_info().rss for p in processes[:1]) / 2**20 / 2
    assert all(process_gone(p.pid) for p in processes)


def failing_lean(tmp_path: Path, lean: Path) -> tuple[ServerCommand, Path]:
    """A `lean` that runs the real one until ``flag`` exists, then prints a reason and exits 7."""
    flag = tmp_path / "refuse"
    script = tmp_path / "bin" / "lean"
    script.parent.mkdir()
    script.write_text(
        f'#!/bin/sh\nif [ -e "{flag}" ]; then echo "boom: sandbox refused" >&2; exit 7; fi\n'
        f'exec "{lean}" "$@"\n'
    )
    script.chmod(0o755)
    project = tmp_path / "p"
    project.mkdir()
    command = ServerCommand(argv=(str(script), "--server"), cwd=project, direct_workers=True)
    return command, flag


@pytest.mark.parametrize("how", ["new document", "header change", "edit with header change"])
async def test_a_worker_that_cannot_start_says_why(
    tmp_path: Path, lean_install: LeanInstall, how: str
) -> None:
    """ServerStartFailed with the exit code and stderr on every path; the next change works."""
    command, flag = failing_lean(tmp_path, lean_install.lean)
    async with LeanClient.start(command, timeouts=TIMEOUTS) as client:
        uri = (command.cwd / "A.lean").as_uri()
        report, _ = await client.update(uri, text(BODIES[0]))
        assert report.status == "done"
        flag.touch()

        async def act() -> None:
            if how == "new document":
                other = (command.cwd / "B.lean").as_uri()
                await client.open(other, text(BODIES[0]))  # (may be written before it exits)
                await client.wait_for(other)
            elif how == "header change":
                await client.update(uri, "-- moved\n" + text(BODIES[1]))
            else:
                await client.change(uri, "-- moved\n" + text(BODIES[1]))  # (as open: above)
                await client.wait_for(uri)

        with anyio.fail_after(20), pytest.raises(ServerStartFailed) as info:
            await act()
        assert "boom: sandbox refused" in info.value.message
        assert info.value.returncode == 7 and "boom" in info.value.stderr_tail
        flag.unlink()
        report, _ = await client.update(uri, text(BODIES[3]))
        assert report.errors


async def test_a_start_interrupted_before_the_document_reached_the_worker_leaves_no_worker(
    workers: LeanClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled before the worker got `initialize` + `didOpen`: the worker is stopped, and the
    next change starts a fresh one."""
    uri = (project / "A.lean").as_uri()
    await workers.update(uri, text(BODIES[0]))
    hold_starts(monkeypatch, math.inf)
    with anyio.move_on_after(1.0) as scope:
        await workers.update(uri, "-- moved\n" + text(BODIES[1]))  # a header change: restart
    assert scope.cancelled_caught
    monkeypatch.undo()
    with anyio.fail_after(10):
        while workers.pids:
            await anyio.sleep(0.02)
    report, _ = await workers.update(uri, "-- moved\n" + text(BODIES[3]))
    assert report.status == "done" and report.errors


async def test_a_header_change_supersedes_a_version_being_waited_for(
    workers: LeanClient, project: Path
) -> None:
    """The waiter gets "superseded", the header change its own report, as via the watchdog."""
    uri = (project / "Slow.lean").as_uri()
    await workers.open(uri, PRELUDE + ARITH + slow_theorem())
    seen: dict[str, object] = {}

    async def waiter() -> None:
        seen["wait_for"] = await workers.wait_for(uri, timeout=30)

    async def changer() -> None:
        await anyio.sleep(0.5)
        seen["update"], _ = await workers.update(uri, "-- moved\n" + PRELUDE + ARITH + GOOD)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            tg.start_soon(changer)
    waited, updated = seen["wait_for"], seen["update"]
    assert isinstance(waited, DocumentReport) and isinstance(updated, DocumentReport)
    assert waited.status == "superseded" and waited.version == updated.version == 2
    assert updated.status == "done" and updated.errors == ()


OWNER = """
import sys
from dataclasses import replace
from pathlib import Path
import anyio
from lsp_bridge import LeanClient, find_lean
async def main() -> None:
    project = Path(sys.argv[1])
    command = replace(find_lean().server_command(project), direct_workers=True)
    async with LeanClient.start(command) as client:
        await client.open((project / "Slow.lean").as_uri(), sys.argv[2])
        print("PIDS", *client.pids, flush=True)
        await anyio.sleep(300)
anyio.run(main)
"""


def test_a_killed_owner_leaves_no_worker_even_a_busy_one(project: Path) -> None:
    """A SIGKILLed owner's worker, mid-elaboration, ends when its input ends."""
    import subprocess

    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(project), PRELUDE + ARITH + slow_theorem()],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert owner.stdout is not None
        line = ""
        while not line.startswith("PIDS"):  # (structlog's default output shares stdout)
            line = owner.stdout.readline()
            assert line, "the owner ended before it opened its document"
        pids = [int(p) for p in line.split()[1:]]
        assert pids
        worker = psutil.Process(pids[0])
        assert worker.cpu_percent(interval=0.5) > 10  # busy: the slow theorem takes minutes
        owner.kill()
        owner.wait(timeout=10)
        psutil.wait_procs([worker], timeout=10)
        assert process_gone(pids[0])
    finally:
        owner.kill()
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


async def test_requests_and_changes_during_a_worker_start_wait_for_it(
    workers: LeanClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query and a change during a held worker start both wait for it; one worker remains."""
    uri = (project / "A.lean").as_uri()
    await workers.update(uri, text(BODIES[0]))
    hold_starts(monkeypatch, 0.5)
    moved = "-- moved\n"
    seen: dict[str, object] = {}

    async def restart() -> None:  # a header change
        seen["restart"], _ = await workers.update(uri, moved + text(BODIES[1]))

    async def ask() -> None:
        await anyio.sleep(0.1)
        seen["goal"] = await workers.plain_goal(uri, LspPos(0, 0))

    async def change() -> None:
        await anyio.sleep(0.2)
        seen["change"] = await workers.change(uri, moved + text(BODIES[3]))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for job in (restart, ask, change):
                tg.start_soon(job)
    report = await workers.wait_for(uri)
    assert report.version == seen["change"] == 3
    assert [d.message for d in report.errors if "h₀" in d.message]
    assert len(workers.pids) == 1


@pytest.mark.parametrize(
    "headers",
    [("-- one\n", "-- one\n", "-- three\n"), ("-- one\n", "-- two\n", "-- one\n")],
    ids=["then a header change", "header flips back"],
)
async def test_three_writers_during_a_worker_start_leave_lean_with_the_last_text(
    workers: LeanClient,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    headers: tuple[str, str, str],
) -> None:
    """Two changes during a held restart: Lean ends with the last text, as a fresh client
    reads it, and one worker remains."""
    uri = (project / "A.lean").as_uri()
    await workers.update(uri, text(BODIES[0]))
    hold_starts(monkeypatch, 0.5)
    texts = [h + text(b) for h, b in zip(headers, (BODIES[1], BODIES[3], BODIES[2]), strict=True)]

    async def writer(delay: float, new: str) -> None:
        await anyio.sleep(delay)
        if delay == 0:
            await workers.update(uri, new)
        else:
            await workers.change(uri, new)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for delay, new in zip((0.0, 0.1, 0.2), texts, strict=True):
                tg.start_soon(writer, delay, new)
    monkeypatch.undo()
    report = await workers.wait_for(uri)
    assert workers.text(uri) == texts[2] and report.version == 4
    # What Lean read is B's text: the same report as a fresh client given it.
    async with LeanClient.start(workers.command, timeouts=TIMEOUTS) as fresh:
        alone, _ = await fresh.update((project / "B.lean").as_uri(), texts[2])
    assert [d.message for d in report.diagnostics] == [d.message for d in alone.diagnostics]
    assert len(workers.pids) == 1


async def test_a_query_whose_deadline_ends_during_a_start_times_out_and_harms_nothing(
    workers: LeanClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = (project / "A.lean").as_uri()
    await workers.update(uri, text(BODIES[0]))
    hold_starts(monkeypatch, 0.5)
    seen: dict[str, object] = {}

    async def restart() -> None:
        seen["report"], _ = await workers.update(uri, "-- moved\n" + text(BODIES[3]))

    async def query() -> None:
        await anyio.sleep(0.1)
        with pytest.raises(RequestTimeout):
            await workers.plain_goal(uri, LspPos(0, 0), timeout=0.2)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(restart)
            tg.start_soon(query)
    report = seen["report"]
    assert isinstance(report, DocumentReport) and report.status == "done" and report.errors
    await workers.plain_goal(uri, LspPos(0, 0))
