"""Calls on one session run one at a time (``locked``): a second call waits, one that waited too
long is told `busy`, one on a session closed meanwhile is refused. No Lean."""

from __future__ import annotations

import anyio
import pytest

from agent_tools.sessions import ProofSession, ToolError
from agent_tools.sessions.tool_calls import locked
from agent_tools.tasks import load_suite

from .suites import DEMO

pytestmark = pytest.mark.anyio


@pytest.fixture
def session() -> ProofSession:
    task = load_suite(DEMO).task("and_swap")
    return ProofSession(id="s", task=task, client="c", text=task.text, body=task.body)


async def test_a_second_call_waits_for_the_first(session: ProofSession) -> None:
    order: list[str] = []

    async def call(name: str, hold: float) -> None:
        async with locked(session, 5.0):
            order.append(f"{name} in")
            await anyio.sleep(hold)
            order.append(f"{name} out")

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "first", 0.05)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(call, "second", 0)
    assert order == ["first in", "first out", "second in", "second out"]


async def test_a_call_that_waits_too_long_is_told_the_session_is_busy(
    session: ProofSession,
) -> None:
    held, done = anyio.Event(), anyio.Event()

    async def hold() -> None:
        async with locked(session, 5.0):
            held.set()
            await done.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold)
        await held.wait()
        with anyio.fail_after(5), pytest.raises(ToolError) as raised:
            async with locked(session, 0.05):
                pytest.fail("ran while another call held the session")
        done.set()
    assert raised.value.code == "busy"
    assert raised.value.hint and "retry" in raised.value.hint
    async with locked(session, 0.05):  # released by both
        pass


async def test_a_call_that_waited_for_a_session_closed_meanwhile_is_refused(
    session: ProofSession,
) -> None:
    async def close_after_holding() -> None:
        async with locked(session, 5.0):
            await anyio.sleep(0.05)
            session.closed = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(close_after_holding)
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(ToolError) as raised:
            async with locked(session, 5.0):
                pytest.fail("ran on a closed session")
    assert raised.value.code == "unknown_session"
    assert not session.lock.locked()
