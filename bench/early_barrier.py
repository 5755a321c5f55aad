"""The early barrier against Lean's own, in the same run: `LeanClient.update` on direct workers
(the step's change, symbols and goals, as a proof step asks them), a proof and a wrong body
alternating, in interleaved rounds — a light file, and one with large terms before the target
(Lean's `ileanInfoFinal`, computed after the last diagnostics and before the barrier's answer,
grows with the info trees).

    python -m bench.early_barrier [--rounds N]

Not in `make bench` (a diagnostic of one lever): prints a table, writes
bench/results/early_barrier.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from lsp_bridge import PRELUDE_HEADER, DocQuery, LeanClient, LspPos, Timeouts, find_lean

from .common import print_table, summarize, write_result

HEAD = (
    PRELUDE_HEADER
    + """universe v

namespace Demo

theorem congr_φ {α : Sort u} {β : Sort v} (φ : α → β) {a₁ a₂ : α} (h : @Eq α a₁ a₂) :
    @Eq β (φ a₁) (φ a₂) :=
  """
)
TAIL = "\n\nend Demo\n"
RIGHT = "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h"
WRONG = "@Eq.refl β (φ a₁)"


def _numeral(depth: int) -> str:
    return "(N.s " * depth + "N.z" + ")" * depth


def _large(name: str, depth: int) -> str:
    n = _numeral(depth)
    return f"theorem {name} : @Eq N {n} {n} := @Eq.refl N {n}\n"


FILES: dict[str, Callable[[str], str]] = {
    "light": lambda body: HEAD + body + TAIL,
    "large terms before": lambda body: (
        HEAD.replace("namespace", _large("big₁", 300) + _large("big₂", 300) + "namespace")
        + body
        + TAIL
    ),
}
MODES = {"early barrier": True, "Lean's barrier": False}


async def measure(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="leanrig-early-") as work:
        return await _measured(rounds, Path(work))


async def _measured(rounds: int, work: Path) -> dict[str, Any]:
    base = replace(find_lean().server_command(work), direct_workers=True)
    timeouts = Timeouts(barrier=120, request=120)
    samples: dict[str, list[float]] = {}
    async with (
        LeanClient.start(replace(base, early_barrier=True), timeouts=timeouts) as early,
        LeanClient.start(replace(base, early_barrier=False), timeouts=timeouts) as own,
    ):
        clients = {"early barrier": early, "Lean's barrier": own}
        for name, make in FILES.items():
            for mode, client in clients.items():
                await client.update((work / f"{name}-{mode}.lean").as_uri(), make(RIGHT))
            for _ in range(rounds):
                for mode, client in clients.items():
                    uri = (work / f"{name}-{mode}.lean").as_uri()
                    for body in (RIGHT, WRONG, RIGHT, WRONG):
                        text = make(body)
                        line = text[: text.index(":=\n  ") + 5].count("\n")
                        at = LspPos(line, 2)
                        queries = [
                            DocQuery.symbols(0),
                            DocQuery.plain_goal(at).made_optional().made_unless_clean(),
                            DocQuery.plain_term_goal(at).made_optional().made_unless_clean(),
                        ]
                        started = time.perf_counter()
                        await client.update(uri, text, queries)
                        kind = "proof" if body == RIGHT else "wrong body"
                        samples.setdefault(f"{name}, {kind}: {mode}", []).append(
                            (time.perf_counter() - started) * 1000
                        )
        ends, faults = early.early_barrier_ends, early.early_barrier_faults
    rows = {k: summarize(v) for k, v in samples.items()}
    for name in FILES:
        for kind in ("proof", "wrong body"):
            group = {k: v for k, v in rows.items() if k.startswith(f"{name}, {kind}:")}
            print_table(f"{name}, {kind}", group, reference=f"{name}, {kind}: Lean's barrier")
    print(f"\nsteps the early barrier ended: {ends}; faults: {faults}")
    return {"rows": rows, "early_barrier_ends": ends, "early_barrier_faults": faults}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    result = anyio.run(measure, args.rounds)
    print(f"wrote {write_result('early_barrier', result)}")


if __name__ == "__main__":
    main()
