"""LSP faults: malformed frames (from a FAKE peer, the only way to produce them), bad input, bad
Lean, stray and cancelled processes."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import psutil
import pytest
import structlog
import structlog.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_bridge import (
    DocQuery,
    DocumentError,
    ElaborationFailed,
    LeanClient,
    LeanNotFound,
    LspPos,
    PlainGoal,
    ProtocolError,
    RequestTimeout,
    ServerCommand,
    ServerDied,
    ServerStartFailed,
    Timeouts,
    WorkerCrashed,
    find_lean,
)
from lsp_bridge.framing import (
    MAX_HEADER_BYTES,
    FrameDecoder,
    encode_message,
    parse_content_length,
)
from lsp_bridge.proctree import TOKEN_VAR, children, new_token, spawn_marked, token_of
from lsp_bridge.transport import LspTransport
from repl_pool import SandboxPolicy, sandbox_wrapper, uses_namespaces

from .conftest import RUN_VAR, leanrig_processes, stray_guard

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_lsp_peer.py")


def fake_command(mode: str, cwd: Path) -> ServerCommand:
    return ServerCommand(argv=(sys.executable, str(FAKE), mode), cwd=cwd)


@pytest.mark.parametrize("mode", ["bad-json", "no-length", "truncated", "huge-header"])
async def test_malformed_frames_from_a_fake_peer_fail_typed_without_hanging(
    mode: str, tmp_path: Path
) -> None:
    async with LeanClient.start(fake_command(mode, tmp_path)) as client:
        with anyio.fail_after(5), pytest.raises(ServerDied) as info:
            await client.transport.request("anything", {}, timeout=3)
        assert not client.alive
    assert "protocol error" in str(info.value) or "exited" in str(info.value)


async def test_goals_for_a_problem_reported_with_the_last_answer_are_still_asked(
    tmp_path: Path,
) -> None:
    """FAKE peer: the first error arrives in the same read as the barrier's answer."""
    async with LeanClient.start(fake_command("problem-with-answer", tmp_path)) as client:
        uri = (tmp_path / "P.lean").as_uri()
        goal = DocQuery.plain_goal(LspPos(0, 0)).made_unless_clean()
        with anyio.fail_after(10):
            for text in ("first", "second"):  # the open, then a change
                report, (answer,) = await client.update(uri, text, [goal])
                assert not report.clean and report.errors[0].message == "fake error"
                assert answer == PlainGoal("no_goal")  # the fake's answer: null
                assert client.transport.pending_count == 0


async def _fake_log(client: LeanClient) -> list[list[Any]]:
    log = await client.transport.request("fake/log", {}, timeout=3)
    assert isinstance(log, list)
    return log


async def test_goals_needed_only_for_a_problem_go_out_with_the_change(tmp_path: Path) -> None:
    """FAKE peer: it publishes the error with the barrier's answer."""
    async with LeanClient.start(fake_command("problem-with-answer", tmp_path)) as client:
        uri = (tmp_path / "P.lean").as_uri()
        goal = DocQuery.plain_goal(LspPos(0, 0)).made_unless_clean()
        with anyio.fail_after(10):
            await client.update(uri, "first", [goal])
            report, (answer,) = await client.update(uri, "second", [goal])
            log = await _fake_log(client)
    assert not report.clean and answer == PlainGoal("no_goal")
    change = log.index(["textDocument/didChange"])
    goals = [entry for entry in log[change:] if entry[0] == "$/lean/plainGoal"]
    assert len(goals) == 1, log
    assert "textDocument/waitForDiagnostics" not in goals[0][1], log


async def test_a_clean_version_does_not_wait_for_the_goals_asked_with_it(tmp_path: Path) -> None:
    """FAKE peer: the goals are never answered; nothing is left pending."""
    async with LeanClient.start(fake_command("unanswered:$/lean/plainGoal", tmp_path)) as client:
        uri = (tmp_path / "C.lean").as_uri()
        goal = DocQuery.plain_goal(LspPos(0, 0)).made_unless_clean()
        with anyio.fail_after(10):
            await client.update(uri, "first", [goal], timeout=5)
            report, (answer,) = await client.update(uri, "second", [goal], timeout=5)
            log = await _fake_log(client)
        assert client.transport.pending_count == 0
    assert report.clean and answer is None
    change = log.index(["textDocument/didChange"])
    assert "$/lean/plainGoal" in [entry[0] for entry in log[change:]], log  # sent, not awaited


async def test_a_timeout_cancels_every_request_of_the_exchange(tmp_path: Path) -> None:
    """FAKE peer: it answers neither the barrier nor the goals."""
    command = fake_command("unanswered:textDocument/waitForDiagnostics,$/lean/plainGoal", tmp_path)
    async with LeanClient.start(command) as client:
        uri = (tmp_path / "T.lean").as_uri()
        goal = DocQuery.plain_goal(LspPos(0, 0)).made_unless_clean()
        with anyio.fail_after(10), pytest.raises(RequestTimeout):
            await client.update(uri, "first", [goal], timeout=0.5)
        with anyio.fail_after(10):
            log = await _fake_log(client)
        assert client.transport.pending_count == 0
    asked = [entry[0] for entry in log if len(entry) == 2 and entry[0] != "$/cancelRequest"]
    assert asked[-3:] == ["textDocument/waitForDiagnostics", "$/lean/plainGoal", "fake/log"]
    assert len([entry for entry in log if entry[0] == "$/cancelRequest"]) == 2, log


async def test_a_fatal_report_while_the_client_closes_starts_nothing(tmp_path: Path) -> None:
    """FAKE peer: a document reported fatal during shutdown starts no grace timer."""
    with structlog.testing.capture_logs() as logs:
        async with LeanClient.start(fake_command("fatal-at-shutdown", tmp_path)) as client:
            with anyio.fail_after(10):
                await client.open((tmp_path / "F.lean").as_uri(), "x")
    assert not [e for e in logs if e["event"] == "lsp.notification_handler_failed"], logs


async def test_after_a_crash_report_the_document_refuses_queries_at_once(tmp_path: Path) -> None:
    """FAKE peer: fatal with no error is WorkerCrashed; the next query is ElaborationFailed."""
    async with LeanClient.start(fake_command("fatal-without-error", tmp_path)) as client:
        uri = (tmp_path / "C.lean").as_uri()
        with anyio.fail_after(10):
            with pytest.raises(WorkerCrashed):
                await client.update(uri, "first")
            with pytest.raises(ElaborationFailed):
                await client.plain_goal(uri, LspPos(0, 0), timeout=5)


async def test_server_requests_and_stale_answers_are_handled(tmp_path: Path) -> None:
    async with LeanClient.start(fake_command("out-of-order", tmp_path)) as client:
        with anyio.fail_after(5):
            result = await client.transport.request("ping", {}, timeout=3)
        assert result == {"echo": "ping"}


async def test_a_real_lean_dying_at_start_names_the_cause(tmp_path: Path) -> None:
    # The real Lean, given an option it rejects, exits before answering `initialize`.
    lean = find_lean().lean
    cmd = ServerCommand(argv=(str(lean), "--server", "--no-such-flag"), cwd=tmp_path)
    with anyio.fail_after(10), pytest.raises(ServerStartFailed) as info:
        async with LeanClient.start(cmd):
            pass
    assert info.value.returncode not in (None, 0)
    assert "no-such-flag" in info.value.stderr_tail


async def test_a_server_that_never_answers_initialize_times_out(tmp_path: Path) -> None:
    with anyio.fail_after(10), pytest.raises(ServerStartFailed):
        async with LeanClient.start(fake_command("silent", tmp_path), timeouts=Timeouts(spawn=0.5)):
            pass


async def test_a_missing_executable_is_a_typed_error(tmp_path: Path) -> None:
    cmd = ServerCommand(argv=(str(tmp_path / "no-such-lean"), "--server"), cwd=tmp_path)
    with pytest.raises(ServerDied, match="cannot start"):
        async with LeanClient.start(cmd):
            pass


async def test_missing_and_non_utf8_files_are_rejected_with_the_cause(
    client: LeanClient, project: Path
) -> None:
    with pytest.raises(DocumentError, match="no such file"):
        await client.open_file(project / "Missing.lean")
    bad = project / "Bad.lean"
    bad.write_bytes(b"prelude\ndef x := \xff\xfe\n")
    with pytest.raises(DocumentError, match="not UTF-8"):
        await client.open_file(bad)


def test_a_wrong_lean_setting_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LEANRIG_LEAN", str(tmp_path / "nope"))
    with pytest.raises(LeanNotFound, match="does not exist"):
        find_lean()
    fake = tmp_path / "lean"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    monkeypatch.setenv("LEANRIG_LEAN", str(fake))
    with pytest.raises(LeanNotFound, match="unexpected"):
        find_lean()


def test_framing_round_trip_and_bad_headers() -> None:
    frame = encode_message({"jsonrpc": "2.0", "id": 1, "result": "𝔽"})
    header, _, body = frame.partition(b"\r\n\r\n")
    assert parse_content_length(header) == len(body)
    with pytest.raises(ProtocolError):
        parse_content_length(b"Content-Length: -1")
    with pytest.raises(ProtocolError):
        parse_content_length(b"garbage")


@contextmanager
def lean_server_process(env: Mapping[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [str(find_lean().lean), "--server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()


def _without_token() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != TOKEN_VAR}


def test_a_lean_started_outside_leanrig_during_a_test_survives_and_is_not_reported() -> None:
    # An editor's Lean server (no kill token): conftest's no_stray_lean check must neither
    # kill it nor fail the test.
    editor_env = {k: v for k, v in _without_token().items() if k != RUN_VAR}
    with ExitStack() as outside:
        with stray_guard(grace=0.5):
            editor = outside.enter_context(lean_server_process(editor_env))
        assert editor.poll() is None


def test_a_leanrig_process_of_another_test_run_is_not_touched() -> None:
    # Another checkout's suite beside this one: a kill token, but not this run's id.
    other_run = {**_without_token(), TOKEN_VAR: new_token(), RUN_VAR: "another-run"}
    with ExitStack() as outside:
        with stray_guard(grace=0.5):
            other = outside.enter_context(lean_server_process(other_run))
        assert other.poll() is None


def test_a_leanrig_process_left_behind_is_reported_and_killed() -> None:
    ours = {**os.environ, TOKEN_VAR: new_token()}  # as spawn_marked starts every Lean
    with ExitStack() as outside:
        with pytest.raises(AssertionError, match="outlived the test"), stray_guard(grace=0.5):
            leaked = outside.enter_context(lean_server_process(ours))
        assert leaked.wait(timeout=5) == -9


def test_a_process_just_started_is_seen_with_its_token() -> None:
    """Its /proc environment reads empty for a moment after `Popen` returns."""
    misses = 0
    for _ in range(200):
        token = new_token()
        child = subprocess.Popen(["sleep", "30"], env={**os.environ, TOKEN_VAR: token})
        try:
            if token_of(child.pid) != token:
                misses += 1
        finally:
            child.kill()
            child.wait()
    assert misses == 0


_BWRAP = SandboxPolicy(writable=())


@pytest.mark.skipif(not uses_namespaces(_BWRAP), reason="bwrap cannot sandbox Lean here")
async def test_a_sandboxed_lean_whose_start_is_cancelled_leaves_nothing(tmp_path: Path) -> None:
    """Cancelled at points over a bwrap-wrapped `lean --worker`'s first moments."""
    argv = [*sandbox_wrapper(_BWRAP), str(find_lean().lean), "--worker"]
    before = set(leanrig_processes())
    cancelled = 0
    for i in range(400):
        with anyio.move_on_after((i % 40) * 0.0002) as scope:
            async with LspTransport.spawn(
                argv, cwd=tmp_path, on_notification=lambda *_: None, polite=False
            ):
                pass
        cancelled += scope.cancelled_caught
    assert cancelled > 20  # enough spawns were cancelled mid-start
    left = [p for pid, p in leanrig_processes().items() if pid not in before]
    _, alive = psutil.wait_procs(left, timeout=2)
    assert not [p.cmdline() for p in alive]


async def test_a_spawn_cancelled_inside_the_library_call_kills_the_whole_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program forks a child first, as bwrap does: the deterministic form of the above."""
    real = anyio.open_process
    scope = anyio.CancelScope()

    async def cancelled_once_running(argv: list[str], **kwargs: Any) -> Any:
        process = await real(argv, **kwargs)
        while not children(process.pid):
            await anyio.sleep(0.005)
        scope.cancel()
        try:
            await anyio.lowlevel.checkpoint()
        except BaseException:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.aclose()
            raise
        return process

    monkeypatch.setattr(anyio, "open_process", cancelled_once_running)
    before = set(leanrig_processes())
    with scope:
        await spawn_marked(["sh", "-c", "sleep 30 & wait"], cwd=tmp_path, env=None, stdin=None)
    assert scope.cancelled_caught
    left = [p for pid, p in leanrig_processes().items() if pid not in before]
    _, alive = psutil.wait_procs(left, timeout=2)
    assert not [p.cmdline() for p in alive]


def test_a_start_failure_names_lean_not_the_sandbox_wrapper(tmp_path: Path) -> None:
    """The message names Lean, not `/usr/bin/prlimit` (the wrapper)."""
    from lsp_bridge import find_lean
    from repl_pool import SandboxPolicy, sandbox_wrapper

    install = find_lean()
    command = install.server_command(tmp_path, wrapper=sandbox_wrapper(SandboxPolicy()))
    assert command.argv[0] != str(install.lean)
    assert command.program == str(install.lean)


def test_concurrent_failures_of_one_kind_surface_as_that_error() -> None:
    from lsp_bridge import ServerDied, single_errors

    first, second = ServerDied("node lost"), ServerDied("node lost")
    with pytest.raises(ServerDied) as caught, single_errors():
        raise ExceptionGroup("two", [first, ExceptionGroup("nested", [second])])
    assert caught.value is first
    with pytest.raises(ExceptionGroup), single_errors():
        raise ExceptionGroup("mixed", [ServerDied("a"), ValueError("b")])


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
)
def test_frames_fed_in_any_pieces_come_out_whole_and_in_order(
    bodies: list[bytes], cuts: list[int]
) -> None:
    """Each body once, in order; a stream ending inside a body is a protocol error."""
    stream = b"".join(b"Content-Length: %d\r\n\r\n%s" % (len(b), b) for b in bodies)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    out: list[bytes] = []
    for a, b in itertools.pairwise(points):
        out += decoder.feed(stream[a:b])
    decoder.end()
    assert out == bodies
    cut = FrameDecoder()
    assert cut.feed(stream[: len(stream) - 1]) == bodies[:-1]
    if bodies[-1]:
        with pytest.raises(ProtocolError):
            cut.end()


def test_a_header_without_an_end_is_refused_within_its_bound() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(b"Content-Length: 1\r\n" + b"X-Pad: " + b"a" * MAX_HEADER_BYTES)
