"""`leanrig doctor`: which Lean, what it can do, and a smoke test through `serve`'s own code."""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio

from lsp_bridge import (
    PRELUDE_HEADER,
    PRELUDE_SORRY,
    LeanInstall,
    LeanrigError,
    LspPos,
    find_lean,
    find_program,
)
from repl_pool import Slot, sandbox_tools

from ..runs import HARNESSES, HarnessError, find_harness
from ..servers import ServeOptions, open_service

SMOKE_PREAMBLE = PRELUDE_HEADER + PRELUDE_SORRY
SMOKE_TASK = SMOKE_PREAMBLE + "theorem smoke : @Eq N N.z N.z :=\n  sorryAx (@Eq N N.z N.z) N.z\n"
SMOKE_TEXT = SMOKE_PREAMBLE + "theorem smoke : @Eq N N.z N.z :=\n  @Eq.refl N N.z\n"
SMOKE_GOAL_AT = LspPos(SMOKE_PREAMBLE.count("\n") + 1, 2)  # on the proof term
SMOKE_SUITE = """\
name = "doctor"
version = "1"
lean = "prelude"

[[tasks]]
id = "smoke"
file = "Smoke.lean"
theorem = "smoke"
title = "doctor smoke test"
field = "equality"
difficulty = 1
"""
SMOKE_DEADLINE = 120.0  # the whole smoke test


@dataclass(frozen=True, slots=True)
class DoctorReport:
    lean_path: str | None
    lean_version: str | None
    githash: str | None
    mode: str | None  # "toolchain" | "bootstrap"
    source: str | None
    lake: str | None
    bwrap: str | None
    prlimit: str | None
    smoke_ok: bool
    smoke_ms: float | None
    detail: str
    programs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


async def _smoke(install: LeanInstall, deadline: float) -> tuple[bool, float, str]:
    with tempfile.TemporaryDirectory(prefix="leanrig-doctor-") as tmp:
        suite_dir = Path(tmp) / "suite"
        suite_dir.mkdir()
        (suite_dir / "suite.toml").write_text(SMOKE_SUITE, encoding="utf-8")
        (suite_dir / "Smoke.lean").write_text(SMOKE_TASK, encoding="utf-8")
        options = ServeOptions(
            suite=suite_dir, run_dir=Path(tmp) / "runs", max_processes=1, lean=str(install.lean)
        )
        started = time.perf_counter()
        with anyio.fail_after(deadline):
            async with open_service(options) as service:
                step = service.step_timeout

                async def elaborate(slot: Slot) -> tuple[list[str], str, str]:
                    report = await slot.elaborate(SMOKE_TEXT, timeout=step)
                    goal = await slot.plain_term_goal(SMOKE_GOAL_AT, timeout=step)
                    return [e.message for e in report.errors], goal.status, goal.goal

                key = service.pool.key_for(SMOKE_TEXT)
                errors, status, goal = await service.pool.execute(key, elaborate)
                if errors:
                    return False, _ms(started), f"smoke file has errors: {errors[0]}"
                if status != "goal" or "N" not in goal:
                    return False, _ms(started), f"unexpected term goal: {status} {goal!r}"
                verdict = await service.verifier.verify(service.suite.task("smoke"), SMOKE_TEXT)
                elapsed = _ms(started)
                service.pool.kill_all("doctor done")
                if not verdict.accepted:
                    return False, elapsed, f"verifier rejected: {'; '.join(verdict.reasons)}"
        return True, elapsed, "served a prelude file: pool slot and verifier, as `serve` does"


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


@dataclass(frozen=True, slots=True)
class SmokeResult:
    ok: bool
    ms: float | None  # None: it did not get as far as a verdict
    detail: str


def smoke_test(install: LeanInstall, deadline: float = SMOKE_DEADLINE) -> SmokeResult:
    """The smoke test on ``install``, from synchronous code (it runs its own event loop)."""
    try:
        ok, ms, detail = anyio.run(_smoke, install, deadline)
    except LeanrigError as exc:
        return SmokeResult(False, None, f"smoke test failed: {exc}")
    except TimeoutError:
        return SmokeResult(False, None, f"smoke test did not finish within {deadline:g} s")
    return SmokeResult(ok, round(ms, 1), detail)


def sandbox_note(bwrap: str | None) -> str:
    """Why Lean runs with rlimits only ("" when ``bwrap`` works)."""
    if bwrap is not None:
        return ""
    if find_program("bwrap"):
        return "bwrap is installed but cannot create namespaces here: Lean runs with rlimits only"
    return "bwrap not found: Lean processes run with rlimits only (no namespaces)"


def programs(install: LeanInstall | None, tools: dict[str, str | None]) -> dict[str, str]:
    """Each program a run or a check would start, by name: its absolute path, or "not found"."""
    found: dict[str, str | None] = {"lean": None, "lake": None, "leanchecker": None}
    found.update(install.programs() if install is not None else {})
    found.update(tools)
    cc = find_program("cc")
    found["cc"] = str(cc) if cc is not None else None
    for name in HARNESSES:
        try:
            found[name] = str(find_harness(name))
        except HarnessError:
            found[name] = None
    return {name: path or "not found" for name, path in found.items()}


def run_doctor() -> DoctorReport:
    tools = sandbox_tools()
    bwrap, prlimit = tools["bwrap"], tools["prlimit"]
    note = sandbox_note(bwrap)
    try:
        install = find_lean()
    except LeanrigError as exc:
        return DoctorReport(
            None,
            None,
            None,
            None,
            None,
            None,
            bwrap,
            prlimit,
            False,
            None,
            str(exc),
            programs=programs(None, tools),
        )
    smoke = smoke_test(install)
    return DoctorReport(
        lean_path=str(install.lean),
        lean_version=install.version,
        githash=install.githash,
        mode=install.mode,
        source=install.source,
        lake=str(install.lake)
        if install.lake
        else ("not found (bootstrap Lean)" if install.mode == "bootstrap" else "not found"),
        bwrap=bwrap,
        prlimit=prlimit,
        smoke_ok=smoke.ok,
        smoke_ms=smoke.ms,
        detail=smoke.detail + (f"; {note}" if note else ""),
        programs=programs(install, tools),
    )
