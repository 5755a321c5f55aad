"""`leanrig demo`: a short, real proof loop on the bootstrap Lean, printed step by step."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import anyio

from lsp_bridge import LeanClient, LineIndex, find_lean

from .doctor import SMOKE_TEXT

HEADER = SMOKE_TEXT.rsplit("theorem", 1)[0]
STEPS = [
    ("wrong witness", "theorem t : @Eq N (N.s N.z) (N.s N.z) := @Eq.refl N N.z\n"),
    (
        "tactic block (no tactics in prelude mode)",
        "theorem t : @Eq N (N.s N.z) (N.s N.z) := by\n  rfl\n",
    ),
    ("right proof", "theorem t : @Eq N (N.s N.z) (N.s N.z) := @Eq.refl N (N.s N.z)\n"),
]


async def _demo() -> int:
    install = find_lean()
    print(f"Lean {install.version} ({install.mode}) at {install.lean}")
    with tempfile.TemporaryDirectory(prefix="leanrig-demo-") as tmp:
        project = Path(tmp)
        t0 = time.perf_counter()
        async with LeanClient.start(install.server_command(project)) as client:
            uri = (project / "Demo.lean").as_uri()
            print(f"server started and initialized in {(time.perf_counter() - t0) * 1000:.0f} ms")
            first = True
            for label, body in STEPS:
                text = HEADER + body
                t = time.perf_counter()
                if first:
                    await client.open(uri, text)
                    first = False
                else:
                    await client.change(uri, text)
                report = await client.wait_for(uri)
                ms = (time.perf_counter() - t) * 1000
                print(f"\n[{label}] version {report.version}: {ms:.1f} ms edit → diagnostics")
                index = LineIndex(text)
                for d in report.diagnostics:
                    if d.is_silent and not d.lean_tags:
                        continue
                    pos = index.from_lsp(d.range.start)
                    first_line = d.message.splitlines()[0]
                    print(f"  {pos.line}:{pos.column} {d.severity.name.lower()}: {first_line}")
                by_line = next(
                    (i for i, ln in enumerate(text.splitlines()) if ln.endswith(":= by")), None
                )
                if by_line is not None:
                    from lsp_bridge import LspPos

                    goal = await client.plain_goal(
                        uri, LspPos(by_line, len(text.splitlines()[by_line]))
                    )
                    print(f"  goal at `by`: {' | '.join(goal.goals) or goal.status}")
                if not report.errors:
                    print("  no errors: the proof is accepted by Lean")
    return 0


def run_demo() -> int:
    return anyio.run(_demo)
