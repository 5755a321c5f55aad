"""Slot health: ``repl_pool.slot.slot_fate`` decides for every error whether the slot is kept
and idempotent work retried, alike in the slot's guard and ``WarmPool.execute``; faults from
the real Lean, and from a FAKE peer for error answers Lean gives only in races."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import psutil
import pytest

from lsp_bridge import (
    ContentModified,
    DocumentError,
    DocumentReport,
    ElaborationFailed,
    LeanClient,
    LeanInstall,
    LspPos,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    ResponseError,
    RpcNeedsReconnect,
    ServerClosed,
    ServerCommand,
    ServerDied,
    ServerStartFailed,
    Timeouts,
    WorkerCrashed,
    WorkerExited,
)
from repl_pool import LeanEnvironment, PoolBusy, PoolClosed, PoolConfig, Slot, SlotBroken, WarmPool
from repl_pool.slot import PoolKey, slot_fate

from .conftest import process_gone
from .lean_snippets import ARITH, GOOD, PRELUDE, slow_theorem

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_lsp_peer.py")
SLOW = PRELUDE + ARITH + slow_theorem()
KEEP, DISCARD = False, True
RETRY, NO_RETRY = True, False

CASES: list[tuple[BaseException, bool, bool]] = [
    (WorkerCrashed("m", -32902, "crashed"), KEEP, RETRY),
    (WorkerExited("m", -32901, "exited"), KEEP, RETRY),
    (ElaborationFailed("processing stopped"), KEEP, RETRY),
    (ContentModified("m", -32801, "changed"), KEEP, RETRY),
    (RequestCancelled("m", -32800, "cancelled"), KEEP, RETRY),
    (RpcNeedsReconnect("m", -32900, "reconnect"), KEEP, RETRY),
    (ResponseError("m", -32601, "no such method"), KEEP, NO_RETRY),
    (RequestTimeout("m", 1.0), DISCARD, NO_RETRY),
    (ServerDied("exited"), DISCARD, RETRY),
    (ServerClosed("closed"), DISCARD, RETRY),
    (ServerStartFailed("no start"), DISCARD, RETRY),
    (ProtocolError("garbage"), DISCARD, RETRY),
    (SlotBroken("broken"), DISCARD, RETRY),
    (PoolBusy("k", 1.0, 3), KEEP, NO_RETRY),
    (PoolClosed("closed"), KEEP, NO_RETRY),
    (DocumentError("not open"), KEEP, NO_RETRY),
    (ValueError("a bug in the operation"), KEEP, NO_RETRY),
]


@pytest.mark.parametrize(("error", "discard", "retry"), CASES, ids=lambda c: type(c).__name__)
def test_every_error_class_has_one_fate(error: BaseException, discard: bool, retry: bool) -> None:
    fate = slot_fate(error)
    assert (fate.discard, fate.retry) == (discard, retry), fate.why


# -- WarmPool.execute against the real Lean -------------------------------------------------------


@dataclass
class Attempts:
    """What each run of an operation saw: the slot it ran on, and its (first) process."""

    pids: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)

    def start(self, slot: Slot) -> int:
        # 0: a slot of direct workers whose every worker is down until the next change
        self.pids.append(slot.pid or 0)
        self.slots.append(slot.number)
        return len(self.pids)


async def _pool(
    lean_install: LeanInstall, project: Path, *, direct: bool
) -> AsyncIterator[WarmPool]:
    config = PoolConfig(
        max_processes=1,
        default_header="prelude",
        request_deadline=30,
        timeouts=Timeouts(spawn=30, barrier=30, acquire=60),
        direct_workers=direct,
    )
    async with WarmPool.open(LeanEnvironment(lean_install, project), config) as p:
        yield p


@pytest.fixture
async def pool(lean_install: LeanInstall, project: Path) -> AsyncIterator[WarmPool]:
    """Through Lean's watchdog: a server process and its file workers."""
    async for p in _pool(lean_install, project, direct=False):
        yield p


@pytest.fixture(params=["watchdog", "direct"])
async def any_pool(
    request: pytest.FixtureRequest, lean_install: LeanInstall, project: Path
) -> AsyncIterator[WarmPool]:
    """Both ways to Lean: through the watchdog, and one direct `lean --worker` per document."""
    async for p in _pool(lean_install, project, direct=request.param == "direct"):
        yield p


def key_of(pool: WarmPool) -> PoolKey:
    return pool.key_for(PRELUDE + GOOD)


async def next_pid(pool: WarmPool) -> int | None:
    async with pool.acquire(key_of(pool)) as slot:
        return slot.pid


async def next_slot(pool: WarmPool) -> int:
    async with pool.acquire(key_of(pool)) as slot:
        return slot.number


async def kill_worker(slot: Slot) -> None:
    """SIGKILL the slot's file worker once it elaborates (killed while it starts up, the watchdog
    reports nothing until the next change), and wait until it is gone."""
    assert slot.pid is not None
    client = slot.client
    assert client is not None
    with anyio.fail_after(10):
        while True:
            if client.direct:
                workers = [psutil.Process(pid) for pid in client.pids]
                workers = [w for w in workers if slot.uri in " ".join(_open_uris(client, w.pid))]
            else:
                workers = [
                    c for c in psutil.Process(slot.pid).children() if "--worker" in c.cmdline()
                ]
            if workers and client.progress(slot.uri) is not None:
                break
            await anyio.sleep(0.02)  # the worker starts on the first change
    workers[0].kill()
    _, alive = await anyio.to_thread.run_sync(lambda: psutil.wait_procs(workers, timeout=10))
    assert alive == []


def _open_uris(client: LeanClient, pid: int) -> list[str]:
    workers = client._workers
    assert workers is not None
    return [uri for uri in client._docs if getattr(workers.connection_of(uri), "pid", None) == pid]


async def wait_gone(pid: int) -> None:
    with anyio.fail_after(10):
        while not process_gone(pid):
            await anyio.sleep(0.02)


async def good_report(slot: Slot) -> DocumentReport:
    report = await slot.elaborate(PRELUDE + GOOD, timeout=30)
    assert report.status == "done" and report.errors == ()
    return report


async def run(pool: WarmPool, op: Callable[[Slot], Awaitable[DocumentReport]]) -> DocumentReport:
    with anyio.fail_after(90):
        return await pool.execute(key_of(pool), op)


async def test_a_crashed_worker_keeps_the_server_and_the_step_is_retried_on_it(
    any_pool: WarmPool,
) -> None:
    pool = any_pool
    attempts = Attempts()

    async def op(slot: Slot) -> DocumentReport:
        if attempts.start(slot) == 1:
            await slot.send(SLOW)
            await kill_worker(slot)
            await slot.wait(timeout=30)  # raises: the worker crashed under it
        return await good_report(slot)

    await run(pool, op)
    first, second = attempts.slots
    assert first == second  # its next change restarted the worker
    assert await next_slot(pool) == first and pool.stats().killed == 0


async def test_processing_stopped_keeps_the_server_and_the_step_is_retried_on_it(
    any_pool: WarmPool,
) -> None:
    pool = any_pool
    attempts = Attempts()
    seen: list[type[BaseException]] = []

    async def op(slot: Slot) -> DocumentReport:
        if attempts.start(slot) == 1:
            await slot.send(SLOW)
            await kill_worker(slot)
            with pytest.raises((WorkerCrashed, WorkerExited)):
                await slot.wait(timeout=30)
            try:  # a query on the stopped document fails at once, typed
                await slot.plain_goal(LspPos(0, 0), timeout=30)
            except ElaborationFailed as exc:
                seen.append(type(exc))
                raise
        return await good_report(slot)

    await run(pool, op)
    assert seen == [ElaborationFailed]
    first, second = attempts.slots
    assert first == second and await next_slot(pool) == first
    assert pool.stats().killed == 0


async def test_a_dead_server_is_replaced_and_the_step_is_retried_on_a_fresh_one(
    pool: WarmPool,
) -> None:
    attempts = Attempts()

    async def op(slot: Slot) -> DocumentReport:
        if attempts.start(slot) == 1:
            await slot.send(SLOW)
            assert slot.pid is not None
            os.kill(slot.pid, signal.SIGKILL)
            await slot.wait(timeout=30)  # raises ServerDied
        return await good_report(slot)

    await run(pool, op)
    first, second = attempts.pids
    assert first != second
    assert process_gone(first)


async def test_a_missed_deadline_discards_the_server_and_is_not_retried(
    any_pool: WarmPool,
) -> None:
    pool = any_pool
    attempts = Attempts()

    async def op(slot: Slot) -> DocumentReport:
        attempts.start(slot)
        return await slot.elaborate(SLOW, timeout=0.5)

    with pytest.raises(RequestTimeout):
        await run(pool, op)
    assert len(attempts.pids) == 1
    assert await next_slot(pool) != attempts.slots[0]
    assert pool.stats().killed == 1
    await wait_gone(attempts.pids[0])


async def test_an_error_answer_keeps_the_server_and_is_not_retried(any_pool: WarmPool) -> None:
    pool = any_pool
    attempts = Attempts()

    async def op(slot: Slot) -> DocumentReport:
        attempts.start(slot)
        assert slot.client is not None
        await slot.client._conn(slot.uri).request("$/lean/noSuchMethod", {}, timeout=30)
        raise AssertionError("the real Lean answers an unknown method with an error")

    with pytest.raises(ResponseError) as info:
        await run(pool, op)
    # method not found (a direct worker says "unknown")
    assert info.value.code in (-32601, -32603)
    assert len(attempts.pids) == 1
    assert await next_slot(pool) == attempts.slots[0] and pool.stats().killed == 0


@pytest.mark.parametrize(
    "error",
    [ContentModified("m", -32801, "changed"), RequestCancelled("m", -32800, "cancelled")],
    ids=lambda e: type(e).__name__,
)
async def test_a_transient_answer_keeps_the_server_and_the_step_is_retried_on_it(
    pool: WarmPool, error: ResponseError
) -> None:
    attempts = Attempts()

    async def op(slot: Slot) -> DocumentReport:
        if attempts.start(slot) == 1:
            await good_report(slot)
            raise error  # as the slot's query would raise it (the fake-peer test below)
        return await good_report(slot)

    await run(pool, op)
    first, second = attempts.pids
    assert first == second and pool.stats().killed == 0


async def test_a_broken_slot_is_replaced_and_the_step_is_retried(pool: WarmPool) -> None:
    attempts = Attempts()

    async def op(slot: Slot) -> DocumentReport:
        if attempts.start(slot) == 1:
            slot.kill("test")
            slot.text()
        return await good_report(slot)

    await run(pool, op)
    first, second = attempts.pids
    assert first != second


async def test_a_bug_in_the_operation_keeps_the_server_and_is_not_retried(
    pool: WarmPool,
) -> None:
    attempts = Attempts()

    async def op(slot: Slot) -> DocumentReport:
        attempts.start(slot)
        raise ValueError("bug")

    with pytest.raises(ValueError, match="bug"):
        await run(pool, op)
    assert len(attempts.pids) == 1 and await next_pid(pool) == attempts.pids[0]


# -- the slot's own guard, with a FAKE peer for error answers Lean gives only in races ---------


@pytest.mark.parametrize(
    ("code", "error"),
    [(-32801, ContentModified), (-32800, RequestCancelled), (-32900, RpcNeedsReconnect)],
)
async def test_the_slot_keeps_itself_on_a_transient_error_answer(
    tmp_path: Path, code: int, error: type[ResponseError]
) -> None:
    command = ServerCommand(argv=(sys.executable, str(FAKE), f"error:{code}"), cwd=tmp_path)
    slot = Slot(1, PoolKey("fake", "prelude"), command, "prelude\n")
    async with LeanClient.start(command) as client:
        slot.client = client
        await slot.send("prelude\n")
        with anyio.fail_after(10), pytest.raises(error):
            await slot.document_symbols(timeout=5)
        assert slot.broken is None and slot.alive
