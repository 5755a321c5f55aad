"""`leanrig doctor`: which Lean, what it can do, and a real smoke test through `lean --server`."""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio

from lsp_bridge import LeanClient, LeanInstall, LeanrigError, LspPos, Timeouts, find_lean
from lsp_bridge.bootstrap import PRELUDE_HEADER
from repl_pool.sandbox import SandboxPolicy, available, wrapper

SMOKE_TEXT = PRELUDE_HEADER + "theorem smoke : @Eq N N.z N.z := @Eq.refl N N.z\n"


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

    def to_json(self) -> dict[str, object]:
        return asdict(self)


async def _smoke(install: LeanInstall) -> tuple[bool, float, str]:
    with tempfile.TemporaryDirectory(prefix="leanrig-doctor-") as tmp:
        project = Path(tmp)
        started = time.perf_counter()
        command = install.server_command(
            project, use_lake=False, wrapper=wrapper(SandboxPolicy(writable=(project,)))
        )
        async with LeanClient.start(command, timeouts=Timeouts(spawn=30, barrier=60)) as client:
            uri = (project / "Smoke.lean").as_uri()
            await client.open(uri, SMOKE_TEXT)
            report = await client.wait_for(uri)
            goal = await client.plain_term_goal(uri, LspPos(7, 36))
        elapsed = (time.perf_counter() - started) * 1000
        if report.errors:
            return False, elapsed, f"smoke file has errors: {report.errors[0].message}"
        if goal.status != "goal" or "N" not in goal.goal:
            return False, elapsed, f"unexpected term goal: {goal}"
        return True, elapsed, "elaborated a prelude file through lean --server"


def run_doctor() -> DoctorReport:
    tools = available()
    bwrap, prlimit = tools["bwrap"], tools["prlimit"]
    sandbox_note = ""
    if bwrap is None:
        sandbox_note = (
            "; bwrap is installed but cannot create namespaces here: Lean runs with rlimits only"
            if shutil.which("bwrap")
            else "; bwrap not found: Lean processes run with rlimits only (no namespaces)"
        )
    try:
        install = find_lean()
    except LeanrigError as exc:
        return DoctorReport(
            None, None, None, None, None, None, bwrap, prlimit, False, None, str(exc)
        )
    try:
        ok, ms, detail = anyio.run(_smoke, install)
    except LeanrigError as exc:
        ok, ms, detail = False, None, f"smoke test failed: {exc}"
    detail += sandbox_note
    return DoctorReport(
        lean_path=str(install.lean),
        lean_version=install.version,
        githash=install.githash,
        mode=install.mode,
        source=install.source,
        lake=str(install.lake) if install.lake else None,
        bwrap=bwrap,
        prlimit=prlimit,
        smoke_ok=ok,
        smoke_ms=round(ms, 1) if ms is not None else None,
        detail=detail,
    )
