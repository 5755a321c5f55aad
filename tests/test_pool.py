"""WarmPool against the real bootstrap `lean --server`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from lsp_bridge import LeanInstall, LeanrigError, RequestTimeout, Timeouts
from repl_pool import (
    LeanEnvironment,
    PoolBusy,
    PoolConfig,
    PoolKey,
    SandboxPolicy,
    Slot,
    WarmPool,
    sandbox_wrapper,
    uses_namespaces,
)

from .conftest import process_gone
from .lean_snippets import ARITH, BAD, GOOD, PRELUDE, decls, slow_theorem

pytestmark = pytest.mark.anyio

BODY = PRELUDE.removeprefix("prelude\n")
CORE_SUITE = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "core"


def prelude_file(body: str, header: str = "prelude\n") -> str:
    return header + BODY + body


@pytest.fixture
def environment(lean_install: LeanInstall, project: Path) -> LeanEnvironment:
    return LeanEnvironment(lean_install, project)


def config(**kw: object) -> PoolConfig:
    base: dict[str, object] = {
        "max_processes": 2,
        "default_header": "prelude",
        "monitor_interval": 0.2,
        "timeouts": Timeouts(spawn=30, barrier=30, acquire=60),
    }
    base.update(kw)
    return PoolConfig(**base)  # type: ignore[arg-type]


@pytest.fixture
async def pool(environment: LeanEnvironment) -> AsyncIterator[WarmPool]:
    async with WarmPool.open(environment, config()) as p:
        yield p


async def wait_until(predicate: object, seconds: float = 10) -> None:
    assert callable(predicate)
    with anyio.fail_after(seconds):
        while not predicate():
            await anyio.sleep(0.05)


async def test_32_concurrent_checks_over_2_processes_are_all_correct(pool: WarmPool) -> None:
    results: dict[int, bool] = {}

    async def check(i: int) -> None:
        body = GOOD if i % 2 == 0 else BAD
        report = await pool.check(prelude_file(f"-- check {i}\n" + body))
        results[i] = not report.errors

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for i in range(32):
                tg.start_soon(check, i)
    assert results == {i: i % 2 == 0 for i in range(32)}
    stats = pool.stats()
    assert len(stats.processes) <= 2
    assert stats.acquire_count == 32


async def test_two_headers_never_share_a_process(pool: WarmPool, project: Path) -> None:
    # A tiny prelude library lets a second header import something real.
    lib = project / "build"
    lib.mkdir()
    (project / "Lib.lean").write_text(PRELUDE + "def libval : N := N.z\n")
    from tests.conftest import compile_module

    compile_module(project, "Lib", lib)
    env2 = LeanEnvironment(
        pool.environment.install, project, env={**os.environ, "LEAN_PATH": str(lib)}
    )
    plain = prelude_file(GOOD)
    imported = "prelude\nimport Lib\n" + "def uses : N := libval\n"
    key_plain = pool.key_for(plain)
    key_import = pool.key_for(imported, env2)
    assert key_plain != key_import
    pids: dict[str, set[int]] = {"plain": set(), "import": set()}
    for _ in range(3):
        async with pool.acquire(key_plain) as slot:
            assert (await slot.elaborate(plain, timeout=30)).errors == ()
            pids["plain"].add(slot.pid or 0)
        async with pool.acquire(key_import) as slot:
            report = await slot.elaborate(imported, timeout=30)
            assert report.errors == (), report.errors
            pids["import"].add(slot.pid or 0)
    assert not pids["plain"] & pids["import"]


async def test_same_header_modulo_comments_reuses_the_warm_process(pool: WarmPool) -> None:
    a = pool.key_for("prelude\n" + BODY)
    b = pool.key_for("-- hello\nprelude   \n\n" + BODY)
    assert a == b
    async with pool.acquire(a) as slot:
        first = slot.pid
    async with pool.acquire(b) as slot:
        assert slot.pid == first


async def _busy_worker(pool: WarmPool) -> tuple[int, psutil.Process]:
    """A busy slot's server pid and its file worker (polled: processes have no events)."""
    with anyio.fail_after(20):
        while True:
            for p in pool.stats().processes:
                if p.state == "busy" and p.pid:
                    try:
                        workers = [
                            c for c in psutil.Process(p.pid).children() if "--worker" in c.cmdline()
                        ]
                    except psutil.Error:
                        continue
                    if workers:
                        return p.pid, workers[0]
            await anyio.sleep(0.02)


async def _gone(proc: psutil.Process) -> None:
    with anyio.fail_after(10):
        while not process_gone(proc.pid):
            await anyio.sleep(0.02)


async def test_kill_9_of_a_busy_server_or_worker_gives_results_and_refills(
    environment: LeanEnvironment,
) -> None:
    # Through Lean's watchdog: a server and its workers (direct workers: test_direct_workers).
    async with WarmPool.open(environment, config(min_processes=2, direct_workers=False)) as pool:
        await pool.wait_idle(2, timeout=30)
        slow = prelude_file(ARITH + slow_theorem("(add ten (add two two))") + GOOD)
        killed: dict[str, int] = {}

        async def killer() -> None:
            server, worker = await _busy_worker(pool)
            worker.kill()
            await _gone(worker)
            killed["worker"] = worker.pid
            assert server in {p.pid for p in pool.stats().processes}
            server, _ = await _busy_worker(pool)
            victim = psutil.Process(server)
            os.kill(server, signal.SIGKILL)
            await _gone(victim)
            killed["server"] = server

        outcomes: list[str] = []

        async def check(i: int) -> None:
            try:
                report = await pool.check(slow.replace("theorem big", f"theorem big{i}"))
                outcomes.append("result" if report.version else "?")
            except LeanrigError as exc:  # a typed error is acceptable, a hang is not
                outcomes.append(type(exc).__name__)

        with anyio.fail_after(90):
            async with anyio.create_task_group() as tg:
                tg.start_soon(killer)
                for i in range(4):
                    tg.start_soon(check, i)
        assert len(outcomes) == 4
        assert set(killed) == {"worker", "server"}
        assert outcomes.count("result") >= 3  # retried once on the kept or a fresh slot
        await pool.wait_idle(2, timeout=30)
        assert killed["server"] not in {p.pid for p in pool.stats().processes}
        assert pool.stats().restarts >= 1


async def test_a_stopped_server_hits_the_deadline_and_is_replaced(
    environment: LeanEnvironment,
) -> None:
    async with WarmPool.open(environment, config(request_deadline=1.0)) as pool:
        key = pool.key_for(prelude_file(GOOD))
        async with pool.acquire(key) as slot:
            stopped = slot.pid
        assert stopped is not None
        os.kill(stopped, signal.SIGSTOP)
        try:
            with anyio.fail_after(15), pytest.raises(RequestTimeout):
                await pool.check(prelude_file(BAD))
            await wait_until(lambda: process_gone(stopped))
            report = await pool.check(prelude_file(BAD))
            assert report.errors
            assert stopped not in {p.pid for p in pool.stats().processes}
        finally:
            if psutil.pid_exists(stopped):
                os.kill(stopped, signal.SIGCONT)


async def test_processes_are_recycled_after_max_uses(environment: LeanEnvironment) -> None:
    async with WarmPool.open(environment, config(max_uses=3, max_processes=1)) as pool:
        key = pool.key_for(prelude_file(GOOD))
        pids = []
        for _ in range(7):
            async with pool.acquire(key) as slot:
                pids.append(slot.pid)
        assert pids[0] == pids[1] == pids[2]
        assert pids[3] == pids[4] == pids[5] != pids[0]
        assert pids[6] != pids[3]


async def test_a_process_over_the_rss_cap_is_recycled(environment: LeanEnvironment) -> None:
    async with WarmPool.open(environment, config(rss_cap_mb=1, max_processes=1)) as pool:
        key = pool.key_for(prelude_file(GOOD))
        async with pool.acquire(key) as slot:
            first = slot.pid
        async with pool.acquire(key) as slot:
            assert slot.pid != first
        assert pool.stats().restarts >= 1


async def test_acquire_waits_then_raises_pool_busy(environment: LeanEnvironment) -> None:
    async with WarmPool.open(environment, config(max_processes=1)) as pool:
        key = pool.key_for(prelude_file(GOOD))
        async with pool.acquire(key):
            with pytest.raises(PoolBusy) as info:
                async with pool.acquire(key, timeout=0.3):
                    pass
            assert info.value.key == key.short() and info.value.queued == 0
        async with pool.acquire(key, timeout=1):
            pass


async def test_waiters_are_served_in_order_across_headers(environment: LeanEnvironment) -> None:
    async with WarmPool.open(environment, config(max_processes=1)) as pool:
        k1 = pool.key_for(prelude_file(GOOD))
        other = LeanEnvironment(environment.install, environment.project, extra=("variant",))
        k2 = pool.key_for(prelude_file(GOOD), other)
        assert k1 != k2
        order: list[str] = []
        release = anyio.Event()

        async def holder() -> None:
            async with pool.acquire(k1):
                await release.wait()

        async def user(name: str, key: PoolKey) -> None:
            async with pool.acquire(key, timeout=60):
                order.append(name)

        def queued() -> int:
            return sum(pool.stats().queued.values())

        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await wait_until(lambda: [p.state for p in pool.stats().processes] == ["busy"])
            for n, (name, key) in enumerate([("b1", k2), ("a1", k1), ("b2", k2)], start=1):
                tg.start_soon(user, name, key)
                await wait_until(lambda n=n: queued() == n)
            release.set()
        assert order == ["b1", "a1", "b2"]


async def test_closing_the_pool_kills_every_lean_process_at_once(
    environment: LeanEnvironment,
) -> None:
    """Closing kills every server and worker without waiting for Lean's polite shutdown."""
    async with WarmPool.open(environment, config(min_processes=2)) as pool:
        await wait_until(lambda: len(pool.stats().processes) == 2)
        key = pool.key_for(prelude_file(GOOD))
        async with pool.acquire(key) as slot:
            await slot.elaborate(prelude_file(GOOD), timeout=30)
        pids = [p.pid for p in pool.stats().processes if p.pid]
        tree = [
            c for pid in pids for c in [psutil.Process(pid), *psutil.Process(pid).children(True)]
        ]
        assert len(tree) >= (2 if slot.client and slot.client.direct else 4)
        leaving = anyio.current_time()
    closed_in = anyio.current_time() - leaving
    assert closed_in < 1.5, f"closing took {closed_in:.2f} s (the 2 s goodbye wait is back?)"
    assert all(process_gone(p.pid) for p in tree)


async def test_stats_report_processes_queues_and_latency(pool: WarmPool) -> None:
    key = pool.key_for(prelude_file(GOOD))
    for _ in range(5):
        async with pool.acquire(key):
            pass
    stats = pool.stats().to_json()
    assert stats["acquire"]["count"] == 5
    assert sum(stats["acquire"]["histogram"].values()) == 5
    (proc,) = stats["processes"]
    assert proc["pid"] and proc["state"] == "idle" and proc["uses"] == 5 and proc["rss_mb"] > 10


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_the_pool_runs_on_trio(environment: LeanEnvironment) -> None:
    async with WarmPool.open(environment, config(max_processes=1)) as pool:
        bad = await pool.check(prelude_file(BAD))
        good = await pool.check(prelude_file(GOOD))
    assert bad.errors and not good.errors


@pytest.mark.toolchain
@pytest.mark.skipif(
    shutil.which("lake") is None or shutil.which("elan") is None,
    reason="needs a full Lean toolchain (elan + lake)",
)
async def test_lake_serve_slots_check_core_tasks_on_a_toolchain() -> None:
    import json

    from agent_tools.tasks import load_suite
    from lsp_bridge import find_lean

    root = CORE_SUITE
    suite = load_suite(root)
    install = find_lean(root)
    assert install.mode == "toolchain" and install.lake is not None
    env = LeanEnvironment(install, root)  # a lakefile is present: slots run `lake serve`
    assert env.server_command().argv[1] == "serve"
    refs = json.loads(
        await anyio.Path(__file__).with_name("core_reference_proofs.json").read_text()
    )
    async with WarmPool.open(env, config(default_header="")) as pool:
        for task_id, proof in refs.items():
            task = suite.task(task_id)
            report = await pool.check(task.with_body("\n  " + proof))
            assert report.errors == (), (task_id, report.errors)


async def test_an_idle_process_of_another_header_is_evicted_when_at_max(
    environment: LeanEnvironment,
) -> None:
    async with WarmPool.open(environment, config(max_processes=1)) as pool:
        other = LeanEnvironment(environment.install, environment.project, extra=("other",))
        k1 = pool.key_for(prelude_file(GOOD))
        k2 = pool.key_for(prelude_file(GOOD), other)
        async with pool.acquire(k1) as slot:
            first = slot.pid
        async with pool.acquire(k2, timeout=30) as slot:
            assert slot.pid != first
            assert slot.key == k2
        await wait_until(lambda: [p.pid for p in pool.stats().processes] != [first])
        assert len(pool.stats().processes) == 1


async def test_idle_processes_beyond_the_wanted_count_expire(
    environment: LeanEnvironment,
) -> None:
    async with WarmPool.open(environment, config(idle_ttl=0.3, monitor_interval=0.1)) as pool:
        async with pool.acquire(pool.key_for(prelude_file(GOOD))):
            pass
        assert len(pool.stats().processes) == 1
        await wait_until(lambda: not pool.stats().processes)


async def test_prewarm_starts_processes_before_anyone_asks(environment: LeanEnvironment) -> None:
    header = "prelude\n"
    async with WarmPool.open(environment, config(prewarm={header: 2})) as pool:
        await pool.wait_idle(2, timeout=30)
        assert pool.stats().acquire_count == 0
        warm = {p.pid for p in pool.stats().processes}
        assert {p.state for p in pool.stats().processes} == {"idle"}
        async with pool.acquire(pool.key_for(prelude_file(GOOD))) as slot:
            assert slot.pid in warm
        assert pool.stats().started == 2


async def test_a_lean_that_cannot_start_is_retried_with_backoff(
    lean_install: LeanInstall, project: Path
) -> None:
    import dataclasses

    broken = dataclasses.replace(lean_install, lean=project / "no-such-lean")
    env = LeanEnvironment(broken, project)
    async with WarmPool.open(env, config(prewarm={"prelude": 1}, monitor_interval=0.05)) as pool:
        await wait_until(lambda: pool.stats().start_failures >= 1)
        first = time.monotonic()
        await wait_until(lambda: pool.stats().start_failures >= 2)
        # The second attempt waited out the 1 s backoff, not a 0.05 s monitor tick (a lower
        # bound: load makes it longer, never shorter).
        assert time.monotonic() - first >= 0.5
        assert pool.stats().start_failures == 2
        with pytest.raises(LeanrigError):
            await pool.check(prelude_file(GOOD))


# -- documents per process: switching sessions does not re-elaborate ---------------------------


def _record_progress(slot: Slot, into: list[tuple[str, int]]) -> None:
    """Record (uri, first line processed) of each ``$/lean/fileProgress`` the slot gets."""
    client = slot.client
    assert client is not None
    # Direct workers' messages go through the client's handler; through the watchdog, the
    # one server's transport has it.
    owner: Any = client if client.direct else client.transport
    handler = owner._on_notification
    if getattr(handler, "_recording", False):
        return

    def recording(method: str, params: Any) -> None:
        if method == "$/lean/fileProgress":
            lines = [r["range"]["start"]["line"] for r in params.get("processing") or ()]
            if lines:
                into.append((params["textDocument"]["uri"], min(lines)))
        handler(method, params)

    recording._recording = True  # type: ignore[attr-defined]
    owner._on_notification = recording


async def _alternate(pool: WarmPool, rounds: int) -> tuple[list[int], dict[str, set[str]]]:
    """Where Lean re-processes "big" (200 declarations first) as it alternates with "small"."""
    texts = {
        "big": lambda i: prelude_file(decls(200) + (GOOD if i % 2 else BAD)),
        "small": lambda i: prelude_file(BAD if i % 2 else GOOD),
    }
    theorem_line = texts["big"](0).count("\n") - 1
    progress: list[tuple[str, int]] = []
    first_lines: list[int] = []
    uris: dict[str, set[str]] = {"big": set(), "small": set()}
    for i in range(rounds):
        for holder in ("big", "small"):
            text = texts[holder](i)
            async with pool.acquire(pool.key_for(text), holder=holder) as slot:
                _record_progress(slot, progress)
                progress.clear()
                report = await slot.elaborate(text, timeout=60)
                assert report.status == "done"
                uris[holder].add(slot.uri)
                if holder == "big" and i > 0:
                    # No processing reported at all: nothing was long enough to report.
                    lines = [line for uri, line in progress if uri == slot.uri]
                    first_lines.append(min(lines, default=theorem_line))
    assert theorem_line > 200
    return [line - theorem_line for line in first_lines], uris


async def test_sessions_taking_turns_on_one_process_keep_their_own_documents(
    environment: LeanEnvironment,
) -> None:
    async with WarmPool.open(environment, config(max_processes=1)) as pool:
        offsets, uris = await _alternate(pool, 4)
    # Each session keeps its own document, and Lean re-processes only from the changed theorem.
    assert len(uris["big"]) == 1 and len(uris["small"]) == 1 and uris["big"] != uris["small"]
    assert offsets and all(offset >= 0 for offset in offsets), offsets


async def test_one_document_per_process_re_elaborates_the_whole_file_at_every_switch(
    environment: LeanEnvironment,
) -> None:
    async with WarmPool.open(environment, config(max_processes=1), documents_per_process=1) as pool:
        offsets, uris = await _alternate(pool, 3)
    assert uris["big"] == uris["small"]
    # fileProgress reports what is being processed when it is sent: most of the 200 lines
    assert offsets and all(offset < -100 for offset in offsets), offsets


async def test_a_new_holder_gets_its_own_document_while_there_is_room_then_takes_over(
    environment: LeanEnvironment,
) -> None:
    # Room: a new document (taking another session's would make sessions that take turns
    # take it from each other at every step). No room: the cheapest one is taken over.
    async with WarmPool.open(environment, config(max_processes=1), documents_per_process=2) as pool:
        first = prelude_file(GOOD)
        async with pool.acquire(pool.key_for(first), holder="a") as slot:
            await slot.elaborate(first, timeout=30)  # the (unowned) header document
            opened, uri_a = slot.documents_opened, slot.uri
        async with pool.acquire(pool.key_for(first), holder="b") as slot:
            await slot.elaborate(prelude_file(BAD), timeout=30)
            assert slot.documents_opened == opened + 1 and slot.uri != uri_a
            assert slot.documents_taken_over == 0
        async with pool.acquire(pool.key_for(first), holder="c") as slot:
            await slot.elaborate(prelude_file(BAD + "-- c\n"), timeout=30)
            assert slot.documents_opened == opened + 1
            assert slot.documents_taken_over == 1
            assert slot.holders().count("c") == 1 and len(slot.holders()) == 2


async def test_holderless_work_goes_to_the_free_document_sharing_the_most_with_it(
    environment: LeanEnvironment,
) -> None:
    # Holderless texts of one key taking turns (try_proofs candidates of two tasks) each go back
    # to the free document they share most with, not the most recent one.
    async with WarmPool.open(environment, config(max_processes=1), documents_per_process=3) as pool:
        big = prelude_file(decls(150) + GOOD)
        small = prelude_file(GOOD)
        seen: dict[str, list[str]] = {"big": [], "small": []}
        for i in range(4):
            for name, text in (("big", big), ("small", small)):
                text += f"-- turn {i}\n"
                async with pool.acquire(pool.key_for(text)) as slot:
                    report = await slot.elaborate(text, timeout=30)
                    assert report.errors == ()
                    seen[name].append(slot.uri)
        # The first turn settles them: small took the document big had just made.
        assert len(set(seen["big"][1:])) == 1 and len(set(seen["small"][1:])) == 1
        assert seen["big"][1] != seen["small"][1]


async def test_a_long_file_is_elaborated_in_the_warm_header_document_not_a_new_worker(
    environment: LeanEnvironment,
) -> None:
    """A process starts with its header elaborated; a session's first text, however long,
    is an edit of that document, with no second worker to start and import the header."""
    async with WarmPool.open(environment, config(max_processes=1)) as pool:
        text = prelude_file(decls(150) + GOOD)
        async with pool.acquire(pool.key_for(text), holder="a") as slot:
            opened, header_document = slot.documents_opened, slot.uri
            report = await slot.elaborate(text, timeout=30)
            assert report.errors == ()
            assert slot.documents_opened == opened and slot.uri == header_document
            assert slot.client is not None
            assert len(slot.client.pids) == 1, slot.client.pids


async def test_a_process_keeps_at_most_its_document_limit_open(
    environment: LeanEnvironment,
) -> None:
    async with WarmPool.open(environment, config(max_processes=1), documents_per_process=2) as pool:
        texts = [prelude_file(decls(150 + 10 * i) + GOOD) for i in range(3)]
        for i, text in enumerate(texts):
            async with pool.acquire(pool.key_for(text), holder=f"h{i}") as slot:
                report = await slot.elaborate(text, timeout=30)
                assert report.errors == ()
        assert slot.client is not None
        # h0 edited the header document, h1 opened a second; then no room: h2 took one over.
        assert slot.documents_opened == 2 and slot.documents_taken_over == 1
        assert len(slot.holders()) <= 2 and "h2" in slot.holders()


@pytest.mark.skipif(not uses_namespaces(SandboxPolicy()), reason="bwrap cannot sandbox Lean here")
def test_lean_s_sandbox_hides_what_it_is_told_to(tmp_path: Path) -> None:
    """A writable directory inside a hidden one stays writable."""
    secret = tmp_path / "runs"
    (secret / "earlier").mkdir(parents=True)
    (secret / "earlier" / "proof.lean").write_text("a proof")
    note = tmp_path / "note.md"
    note.write_text("a note")
    scratch = secret / "now" / "scratch"
    scratch.mkdir(parents=True)
    gone = tmp_path / "deleted-since.md"  # bwrap cannot mount over it: skipped
    policy = SandboxPolicy(writable=(scratch,), hidden=(secret, note, gone))
    script = f"ls {secret}; cat {note}; touch {scratch}/made && echo made"
    done = subprocess.run(
        [*sandbox_wrapper(policy), "/bin/sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert "earlier" not in done.stdout and "a note" not in done.stdout, done
    assert "made" in done.stdout and (scratch / "made").exists(), done
