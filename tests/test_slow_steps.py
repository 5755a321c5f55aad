"""Slow steps on the bootstrap Lean: `try_proofs`' slow candidates are bounded (TRY_TIMEOUTS step
timeouts) and another session's step waits behind one round of them at most; step timeouts,
cancellations and the per-client session bound."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import orjson
import pytest

from agent_tools.servers import ServeOptions, open_service
from agent_tools.sessions.service import TRY_TIMEOUTS
from agent_tools.sessions.tool_outputs import TryProofsResult

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "lean_project" / "suites" / "demo"
STEP = 2.0

pytestmark = pytest.mark.anyio


def slow_body() -> str:
    """A term whose check makes Lean unfold 2^20-sized numerals, far past any step timeout."""
    mul = "(fun (m n : N) => @N.rec (fun _ => N) N.z (fun _ r => N.add r m) n)"
    two = "(N.s (N.s N.z))"
    power = f"(fun (m n : N) => @N.rec (fun _ => N) (N.s N.z) (fun _ r => {mul} r m) n)"
    ten = f"(N.add ({mul} {two} {two}) (N.add ({mul} {two} {two}) {two}))"
    big = f"({power} {two} (N.add {ten} {ten}))"
    return (
        "\n  set_option maxHeartbeats 0 in\n  set_option maxRecDepth 100000000 in\n"
        f"  (fun (_x : @Eq N {big} (N.s {big})) => sorryAx (And q p) Bool.false)"
        f" (@Eq.refl N {big})"
    )


RIGHT = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


async def test_slow_candidates_are_bounded_and_leave_the_pool_to_other_sessions(
    tmp_path: Path,
) -> None:
    options = ServeOptions(
        suite=DEMO, run_dir=tmp_path, max_processes=1, step_timeout=STEP, sandbox=False
    )
    async with open_service(options) as service:
        tried = (await service.open_task("and_swap")).session_id
        other = (await service.open_task("and_swap")).session_id
        outcome: list[tuple[float, TryProofsResult]] = []

        async def try_slow() -> None:
            started = time.perf_counter()
            result = await service.try_proofs(tried, [slow_body()] * 6)
            outcome.append((time.perf_counter() - started, result))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(try_slow)
                await anyio.sleep(0.5)  # the candidates hold the one process
                started = time.perf_counter()
                step = await service.set_proof(other, RIGHT)
                waited = time.perf_counter() - started
        ledger = service.ledger.path
    assert step.complete
    # Behind at most one candidate (STEP) and a restart of the process it ran on.
    assert waited < 2 * STEP, waited
    ((took, result),) = outcome
    assert took < TRY_TIMEOUTS * STEP + STEP, took
    codes = [c.error.code if c.error is not None else None for c in result.results]
    assert [c.index for c in result.results] == list(range(6))
    assert set(codes) <= {"timeout"} and codes.count("timeout") == 6, codes
    assert not any(c.complete for c in result.results)
    # Lean's time is the candidates' (one after another on the one process), the one the
    # budget cut short included.
    (line,) = [orjson.loads(x) for x in ledger.read_bytes().splitlines() if b'"try_proofs"' in x]
    assert line["lean_ms"] > 0.75 * took * 1000, (line["lean_ms"], took)


async def test_a_slow_step_times_out_at_its_limit_and_a_cancelled_one_is_recorded_so(
    tmp_path: Path,
) -> None:
    """A timeout names the step's limit, not the time left; a cancelled call's ledger outcome
    is `cancelled`."""
    from agent_tools.sessions import ToolError

    options = ServeOptions(
        suite=DEMO, run_dir=tmp_path, max_processes=1, step_timeout=STEP, sandbox=False
    )
    async with open_service(options) as service:
        sid = (await service.open_task("and_swap")).session_id
        with pytest.raises(ToolError) as timed_out:
            await service.set_proof(sid, slow_body())
        with anyio.move_on_after(0.5):
            await service.set_proof(sid, slow_body())
        ledger = service.ledger.path
    assert timed_out.value.code == "timeout"
    assert f"within {STEP:g} s" in timed_out.value.message, timed_out.value.message
    lines = [orjson.loads(x) for x in ledger.read_bytes().splitlines()]
    outcomes = [e["outcome"] for e in lines if e["tool"] == "set_proof"]
    assert outcomes == ["error:timeout", "cancelled"], outcomes


async def test_a_client_may_hold_a_bounded_number_of_open_sessions(tmp_path: Path) -> None:
    from agent_tools.sessions import MAX_SESSIONS_PER_CLIENT, ToolError

    options = ServeOptions(suite=DEMO, run_dir=tmp_path, max_processes=1, sandbox=False)
    async with open_service(options) as service:
        opened = [
            (await service.open_task("refl_z", "a")).session_id
            for _ in range(MAX_SESSIONS_PER_CLIENT)
        ]
        with pytest.raises(ToolError) as refused:
            await service.open_task("refl_z", "a")
        assert refused.value.code == "busy" and "close_session" in refused.value.hint
        await service.open_task("refl_z", "b")
        await service.close_session(opened[0], "a")
        await service.open_task("refl_z", "a")
