"""lsp_bridge.LeanClient against the real bootstrap `lean --server`."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsp_bridge import (
    DocQuery,
    DocumentError,
    ElaborationFailed,
    LeanClient,
    LeanTag,
    LspPos,
    RequestTimeout,
    ResponseError,
    ServerCommand,
    ServerDied,
    Timeouts,
    WorkerCrashed,
    WorkerExited,
)
from repl_pool.slot import slot_fate

from .conftest import running
from .lean_snippets import ARITH, BAD, GOOD, PRELUDE, decls, slow_theorem

pytestmark = pytest.mark.anyio


def uri_in(project: Path, name: str = "A.lean") -> str:
    return (project / name).as_uri()


async def test_initialize_reports_the_lean_server(client: LeanClient) -> None:
    assert client.server_info.get("name") == "Lean 4 Server"
    assert client.alive


async def test_an_error_and_its_fix_give_fresh_diagnostics(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project)
    v1 = await client.open(uri, PRELUDE + BAD)
    bad = await client.wait_for(uri, v1)
    assert bad.status == "done" and bad.version == 1
    assert any("mismatch" in d.message for d in bad.errors)
    v2 = await client.change(uri, PRELUDE + GOOD)
    good = await client.wait_for(uri, v2)
    assert good.version == 2 and good.errors == ()
    assert any(LeanTag.GOALS_ACCOMPLISHED in d.lean_tags for d in good.diagnostics)
    v3 = await client.change(uri, PRELUDE + BAD)
    again = await client.wait_for(uri, v3)
    assert len(again.errors) >= 1


async def test_barrier_under_rapid_edits_reports_only_the_newest_version(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + ARITH + slow_theorem("(add two two)"))
    versions = []
    for i in range(8):
        body = GOOD if i % 2 else BAD
        versions.append(await client.change(uri, PRELUDE + body))
    early = await client.wait_for(uri, versions[0])
    assert early.status == "superseded"
    assert early.version == versions[-1] and early.requested_version == versions[0]
    assert early.errors == ()  # the last text is GOOD: no stale error from BAD versions
    final = await client.wait_for(uri, versions[-1])
    assert final.status == "done" and final.errors == ()


async def test_edit_ranges_apply_to_the_text_lean_sees(client: LeanClient, project: Path) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + "def 𝔽x : N := N.z\n" + BAD)
    # Only the last line differs: one small range edit after a non-BMP name.
    v = await client.change(uri, PRELUDE + "def 𝔽x : N := N.z\n" + GOOD)
    report = await client.wait_for(uri, v)
    assert report.errors == ()
    assert client.text(uri).endswith(GOOD)


async def test_goal_at_by_and_term_goal(client: LeanClient, project: Path) -> None:
    uri = uri_in(project)
    text = PRELUDE + "theorem t : N := by\n  exact N.z\ndef u : N := N.s N.z\n"
    v = await client.open(uri, text)
    report = await client.wait_for(uri, v)
    assert report.status == "done"
    by_line = text.splitlines().index("theorem t : N := by")
    goal = await client.plain_goal(uri, LspPos(by_line, 19))
    assert goal.status == "goals" and goal.goals == ("⊢ N",)
    term = await client.plain_term_goal(uri, LspPos(by_line + 2, 16))
    assert term.status == "goal" and term.goal == "⊢ N"
    structured = await client.interactive_goals(uri, LspPos(by_line, 19))
    assert [g.target for g in structured] == ["N"]
    none = await client.plain_goal(uri, LspPos(0, 0))
    assert none.status == "no_goal"


async def test_hypotheses_appear_in_structured_goals(client: LeanClient, project: Path) -> None:
    uri = uri_in(project)
    text = PRELUDE + "theorem t (a b : N) (h : @Eq N a b) : N := by\n  exact a\n"
    await client.open(uri, text)
    await client.wait_for(uri)
    line = text.splitlines().index("  exact a")
    goals = await client.interactive_goals(uri, LspPos(line, 2))
    assert len(goals) == 1
    hyps = {names: h.type for h in goals[0].hypotheses for names in [h.names]}
    assert hyps[("a", "b")] == "N"
    assert hyps[("h",)] == "Eq a b"


async def test_document_symbols_have_declaration_ranges(client: LeanClient, project: Path) -> None:
    uri = uri_in(project)
    text = PRELUDE + GOOD + "def u : N := N.s N.z\n"
    await client.open(uri, text)
    await client.wait_for(uri)
    symbols = {s.name: s for s in await client.document_symbols(uri)}
    foo_line = text.splitlines().index(GOOD.strip())
    assert symbols["foo"].range.start.line == foo_line
    assert symbols["foo"].selection_range.start.character == len("theorem ")
    assert symbols["u"].range.start.line == foo_line + 1


async def test_hover_shows_the_type(client: LeanClient, project: Path) -> None:
    uri = uri_in(project)
    text = PRELUDE + "def u : N := N.s N.z\n"
    await client.open(uri, text)
    await client.wait_for(uri)
    hover = await client.hover(uri, LspPos(len(text.splitlines()) - 1, 4))
    assert hover is not None
    assert "N" in str(hover.contents)


async def test_close_then_reopen_a_document(client: LeanClient, project: Path) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + BAD)
    await client.wait_for(uri)
    await client.close_document(uri)
    assert not client.is_open(uri)
    with pytest.raises(DocumentError):
        await client.wait_for(uri)
    v = await client.open(uri, PRELUDE + GOOD)
    assert (await client.wait_for(uri, v)).errors == ()


async def test_request_timeout_is_typed_and_the_server_stays_usable(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + ARITH + slow_theorem())
    with pytest.raises(RequestTimeout) as info:
        await client.wait_for(uri, timeout=0.3)
    assert info.value.method == "textDocument/waitForDiagnostics"
    other = uri_in(project, "B.lean")
    await client.open(other, PRELUDE + GOOD)
    assert (await client.wait_for(other)).errors == ()
    await client.change(uri, PRELUDE + GOOD)  # cancels the runaway elaboration
    assert (await client.wait_for(uri)).errors == ()


# -- one write: the change, the barrier and the queries (LeanClient.update) -------------------

# Bodies for a `theorem t (a : N) : N := by …` prelude file: right, wrong, incomplete,
# unparsable, and ones that end the declaration and start others.
_BODIES = [
    "a",
    "N.s a",
    "N.z",
    "@Eq.refl N a",
    "b",
    "(a",
    "N.s (N.s a)",
    "a\ndef v : N := N.z",
    "a\ntheorem w : N := N.z",
    "fun x => x",
]


def _query_text(body: str) -> str:
    return PRELUDE + f"def u : N := N.z\ntheorem t (a : N) : N :=\n  {body}\ndef z : N := N.z\n"


def _positions(text: str) -> tuple[LspPos, LspPos]:
    line = text.splitlines().index("theorem t (a : N) : N :=") + 1
    return LspPos(line, len(text.splitlines()[line])), LspPos(line, 2)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    bodies=st.lists(st.sampled_from(_BODIES), min_size=2, max_size=6),
    unless_clean=st.booleans(),
)
async def test_queries_sent_with_the_change_answer_for_that_version(
    client: LeanClient, project: Path, bodies: list[str], unless_clean: bool
) -> None:
    """As asked after the barrier, over any edits; ``unless_clean`` goals None iff clean."""
    uri = uri_in(project, "Q.lean")
    if client.is_open(uri):
        await client.close_document(uri)
    for body in bodies:
        text = _query_text(body)
        goal_at, term_at = _positions(text)
        goals = [DocQuery.plain_goal(goal_at), DocQuery.plain_term_goal(term_at)]
        if unless_clean:
            goals = [q.made_unless_clean() for q in goals]
        line = goal_at.line - 1  # the theorem's line (the body is on the next)
        report, (symbols, goal, term, from_theorem) = await client.update(
            uri, text, [DocQuery.symbols(), *goals, DocQuery.symbols(from_line=line)]
        )
        assert report.status == "done" and report.version == client.version(uri)
        after = await client.wait_for(uri)
        assert after.diagnostics == report.diagnostics
        assert await client.document_symbols(uri) == symbols
        # From the theorem's line: the same symbols, less those ending before it (`u`).
        assert from_theorem == [s for s in symbols if s.range.end.line >= line]
        assert "u" not in {s.name for s in from_theorem} and "u" in {s.name for s in symbols}
        if unless_clean and report.clean:
            assert goal is None and term is None
        else:
            assert await client.plain_goal(uri, goal_at) == goal
            assert await client.plain_term_goal(uri, term_at) == term
        names = {s.name for s in symbols}
        assert ("v" in names) == ("def v" in body) and ("w" in names) == ("theorem w" in body)
    await client.close_document(uri)


async def test_symbols_from_a_line_drop_earlier_ones_inside_namespaces_too(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project, "Ns.lean")
    text = PRELUDE + "namespace Pad\n" + decls(30) + "theorem t : N := N.z\nend Pad\n"
    line = text.splitlines().index("theorem t : N := N.z")
    _, (everything, from_theorem) = await client.update(
        uri, text, [DocQuery.symbols(), DocQuery.symbols(from_line=line)]
    )
    [pad] = [s for s in everything if s.name == "Pad"]
    assert [c.name for c in pad.children or ()] == [*(f"d{i}" for i in range(30)), "t"]
    [pad_from] = from_theorem
    assert pad_from.name == "Pad" and pad_from.range == pad.range
    assert [c.name for c in pad_from.children or ()] == ["t"]


async def test_update_opens_a_new_document_and_reports_its_first_version(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project, "New.lean")
    report, (symbols,) = await client.update(uri, PRELUDE + GOOD, [DocQuery.symbols()])
    assert report.version == 1 and report.status == "done" and report.errors == ()
    assert "foo" in {s.name for s in symbols}
    report, _ = await client.update(uri, PRELUDE + BAD)
    assert report.version == 2 and report.errors


async def test_exchange_times_out_cancels_and_the_server_stays_usable(
    client: LeanClient, project: Path
) -> None:
    """A barrier not answered in time: RequestTimeout at the deadline, then cancelled."""
    uri = uri_in(project)
    with anyio.fail_after(20):
        with pytest.raises(RequestTimeout) as info:
            await client.update(uri, PRELUDE + ARITH + slow_theorem(), timeout=0.3)
        assert info.value.method == "textDocument/waitForDiagnostics"
        report, _ = await client.update(uri, PRELUDE + GOOD)  # cancels the runaway version
        assert report.errors == ()
        assert client.transport.pending_count == 0


async def test_an_optional_query_error_is_returned_and_a_required_one_raised(
    client: LeanClient, project: Path
) -> None:
    """The barrier's report is there either way."""
    uri = uri_in(project, "Opt.lean")
    bogus = DocQuery("$/lean/noSuchMethod", lambda raw: raw)
    report, (symbols, answer) = await client.update(
        uri, PRELUDE + GOOD, [DocQuery.symbols(), bogus.made_optional()]
    )
    assert report.errors == () and "foo" in {s.name for s in symbols}
    assert isinstance(answer, ResponseError)
    with pytest.raises(ResponseError):
        await client.update(uri, PRELUDE + BAD, [bogus])
    assert client.transport.pending_count == 0


async def test_an_unreadable_answer_fails_its_request_not_the_server(
    client: LeanClient, project: Path
) -> None:

    def unreadable(raw: object) -> object:
        raise KeyError("range")

    uri = uri_in(project, "Bad.lean")
    with pytest.raises(ResponseError) as info:
        await client.update(
            uri, PRELUDE + GOOD, [DocQuery("textDocument/documentSymbol", unreadable)]
        )
    assert "unreadable answer" in info.value.message
    fate = slot_fate(info.value)
    assert not fate.discard and not fate.retry
    assert client.alive
    report, _ = await client.update(uri, PRELUDE + BAD)
    assert report.errors


async def test_a_change_cancelled_before_its_write_is_resent_whole(
    client: LeanClient, project: Path
) -> None:
    """Cancelled while another write holds the pipe; the next change goes whole."""
    uri = uri_in(project, "Cut.lean")
    first = PRELUDE + GOOD
    cut = first + "def extra : N := N.z\n"
    then = cut + "def more : N := N.z\n"
    await client.update(uri, first)
    scope = anyio.CancelScope()

    async def step() -> None:
        with scope:
            await client.update(uri, cut)

    async with anyio.create_task_group() as tg, client.transport._write_lock:
        tg.start_soon(step)
        await anyio.wait_all_tasks_blocked()
        scope.cancel()
    report, (symbols,) = await client.update(uri, then, [DocQuery.symbols()])
    assert report.errors == ()
    assert {"foo", "extra", "more"} <= {s.name for s in symbols}


def _worker_of(server_pid: int) -> psutil.Process:
    children = psutil.Process(server_pid).children(recursive=True)
    workers = [c for c in children if "--worker" in c.cmdline()]
    assert len(workers) == 1, children
    return workers[0]


async def test_sigkill_of_a_worker_mid_request_gives_a_typed_error(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + ARITH + slow_theorem())
    with anyio.fail_after(5):
        while True:  # the worker is spawned on didOpen (no event for that)
            try:
                worker = _worker_of(client.pid)
                break
            except (AssertionError, psutil.Error):
                await anyio.sleep(0.02)
    crashed: list[BaseException] = []

    async def barrier() -> None:
        with anyio.fail_after(10):
            try:
                await client.wait_for(uri)
            except (WorkerCrashed, WorkerExited) as exc:
                crashed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(barrier)
        await anyio.wait_all_tasks_blocked()  # the barrier request is out and waiting
        worker.kill()
    assert len(crashed) == 1
    # Queries on the dead worker fail at once, typed, instead of being queued by the watchdog.
    with pytest.raises(ElaborationFailed):
        await client.plain_goal(uri, LspPos(0, 0), timeout=20)
    v = await client.change(uri, PRELUDE + GOOD)
    with anyio.fail_after(10):
        report = await client.wait_for(uri, v)
    assert report.errors == ()


async def test_sigkill_of_the_server_mid_request_gives_server_died(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + ARITH + slow_theorem())
    died: list[ServerDied] = []

    async def barrier() -> None:
        with anyio.fail_after(10):
            try:
                await client.wait_for(uri)
            except ServerDied as exc:
                died.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(barrier)
        await anyio.wait_all_tasks_blocked()  # the barrier request is out and waiting
        os.kill(client.pid, signal.SIGKILL)
    assert len(died) == 1
    assert not client.alive
    with pytest.raises(ServerDied):
        await client.plain_goal(uri, LspPos(0, 0))


async def test_a_stopped_server_times_out_instead_of_hanging(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + GOOD)
    await client.wait_for(uri)
    os.kill(client.pid, signal.SIGSTOP)
    try:
        with anyio.fail_after(5), pytest.raises(RequestTimeout):
            await client.plain_goal(uri, LspPos(8, 0), timeout=0.3)
    finally:
        os.kill(client.pid, signal.SIGCONT)


async def test_closing_leaves_no_process_of_the_group(server_command: ServerCommand) -> None:
    async with LeanClient.start(server_command) as c:
        uri = (server_command.cwd / "A.lean").as_uri()
        await c.open(uri, PRELUDE + GOOD)
        await c.open((server_command.cwd / "B.lean").as_uri(), PRELUDE + GOOD)
        await c.wait_for(uri)
        await c.wait_for((server_command.cwd / "B.lean").as_uri())
        group = [psutil.Process(c.pid), *psutil.Process(c.pid).children(recursive=True)]
        assert len(group) == 3  # server + two workers
    alive = [p for p in group if running(p)]
    assert alive == []


async def test_cancelling_the_owner_kills_the_process_group(
    server_command: ServerCommand,
) -> None:
    tree: list[psutil.Process] = []
    with anyio.CancelScope() as owner:
        async with LeanClient.start(server_command) as c:
            uri = (server_command.cwd / "A.lean").as_uri()
            await c.open(uri, PRELUDE + ARITH + slow_theorem())
            with anyio.fail_after(5):
                while len(tree) < 2:  # the busy worker exists (no event for that)
                    await anyio.sleep(0.02)
                    tree = [psutil.Process(c.pid), *psutil.Process(c.pid).children(True)]
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.wait_for, uri)  # never finishes: the runaway theorem
                await anyio.wait_all_tasks_blocked()
                owner.cancel()
    assert owner.cancelled_caught
    assert len(tree) == 2
    # A SIGKILLed worker may still show as running for a moment; it must not finish.
    _, survivors = psutil.wait_procs(tree, timeout=5)
    assert [p for p in survivors if p.status() != psutil.STATUS_ZOMBIE] == []


async def test_killing_the_server_also_stops_its_busy_worker(
    client: LeanClient, project: Path
) -> None:
    uri = uri_in(project)
    await client.open(uri, PRELUDE + ARITH + slow_theorem())
    with anyio.fail_after(5):
        while not psutil.Process(client.pid).children():
            await anyio.sleep(0.02)
    worker = psutil.Process(client.pid).children()[0]
    os.kill(client.pid, signal.SIGKILL)
    with anyio.fail_after(10), pytest.raises(ServerDied):
        await client.wait_for(uri)
    with anyio.fail_after(5):
        while worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE:
            await anyio.sleep(0.02)


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_the_client_runs_on_trio(server_command: ServerCommand) -> None:
    async with LeanClient.start(server_command, timeouts=Timeouts(barrier=30)) as c:
        uri = (server_command.cwd / "A.lean").as_uri()
        await c.open(uri, PRELUDE + BAD)
        assert len((await c.wait_for(uri)).errors) >= 1


async def test_writing_to_a_server_that_stopped_reading_does_not_hang(
    server_command: ServerCommand, project: Path
) -> None:
    async with LeanClient.start(server_command, timeouts=Timeouts(request=0.5)) as c:
        uri = uri_in(project)
        await c.open(uri, PRELUDE + GOOD)
        await c.wait_for(uri, timeout=10)
        os.kill(c.pid, signal.SIGSTOP)
        try:
            big = PRELUDE + "-- " + "x" * (4 * 2**20) + "\n" + GOOD  # far over a pipe buffer
            with anyio.fail_after(10), pytest.raises(ServerDied, match="did not read"):
                await c.change(uri, big)
            assert not c.alive
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.pid, signal.SIGCONT)


@pytest.mark.parametrize("direct", [False, True], ids=["watchdog", "direct workers"])
async def test_a_header_that_does_not_elaborate_is_its_error_not_a_crash(
    server_command: ServerCommand, project: Path, direct: bool
) -> None:
    """A missing import (`Init` on the bootstrap Lean): a fatal report with its error."""
    command = dataclasses.replace(server_command, direct_workers=direct)
    async with LeanClient.start(command, timeouts=Timeouts(barrier=30)) as client:
        uri = uri_in(project, "NoInit.lean")
        with anyio.fail_after(30):
            for text in ("theorem a : True := trivial\n", "theorem a : True := trivial\n\n"):
                report, _ = await client.update(uri, text, [DocQuery.symbols()])
                assert report.status == "fatal", report
                assert any("Init" in d.message for d in report.errors), report


async def test_a_barrier_asked_between_the_fatal_report_and_its_error_gets_the_error(
    server_command: ServerCommand, project: Path
) -> None:
    """Through the watchdog, with five documents so the race is met."""
    command = dataclasses.replace(server_command, direct_workers=False)
    async with LeanClient.start(command, timeouts=Timeouts(barrier=30)) as client:
        fatal_for: dict[str, anyio.Event] = {}
        dispatch = client.transport._on_notification

        def spy(method: str, params: Any) -> None:
            dispatch(method, params)
            uri = (params.get("textDocument") or {}).get("uri")
            kinds = [p.get("kind") for p in params.get("processing") or ()]
            if method == "$/lean/fileProgress" and 2 in kinds and uri in fatal_for:
                fatal_for[uri].set()

        client.transport._on_notification = spy
        for i in range(5):
            uri = uri_in(project, f"NoInit{i}.lean")
            fatal_for[uri] = anyio.Event()
            with anyio.fail_after(30):
                await client.open(uri, "theorem a : True := trivial\n")
                await fatal_for[uri].wait()
                report = await client.wait_for(uri)
            assert report.status == "fatal", report
            assert any("Init" in d.message for d in report.errors), report
