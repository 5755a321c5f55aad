"""What grading a statement costs: the verdict on a statement task's attempt (its own check,
then BEq+ against the hidden reference, both directions) for each candidate of the claims
suite's replay plan, beside a proof verdict (the demo's `and_swap` with its reference proof)
in the same run, the two interleaved candidate by candidate. Medians and p95.

    python -m bench equiv      (in `make bench`; --quick: one round)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio

from agent_tools.tasks import library_dir, load_suite
from agent_tools.verdict import EquivalenceGrader, StatementGrader, Verifier
from lsp_bridge import find_lean

from .common import print_table, summarize, write_result

ROOT = Path(__file__).resolve().parent.parent
CLAIMS = ROOT / "lean_project" / "suites" / "claims"
DEMO = ROOT / "lean_project" / "suites" / "demo"
PROOF = "\n  " + json.loads((ROOT / "tests" / "demo_reference_proofs.json").read_text())["and_swap"]


def candidates() -> dict[str, str]:
    """Each claims task's candidate statement, as the replay plan writes it."""
    plan = json.loads((CLAIMS / "replay-plan.json").read_text(encoding="utf-8"))
    return {
        task: next(s["args"]["statement"] for s in steps if s.get("tool") == "set_statement")
        for task, steps in plan["tasks"].items()
    }


async def measure(rounds: int, limit: int | None = None) -> dict[str, Any]:
    """``rounds`` over the candidates (the first ``limit`` of them)."""
    install = find_lean()
    claims, demo = load_suite(CLAIMS), load_suite(DEMO)
    claims_lib, demo_lib = library_dir(claims, install), library_dir(demo, install)
    grader = StatementGrader(
        claims,
        Verifier(claims, install, library=claims_lib),
        EquivalenceGrader(claims, install, library=claims_lib),
    )
    verifier = Verifier(demo, install, library=demo_lib)
    and_swap = demo.task("and_swap")
    proof = and_swap.with_body(PROOF)
    samples: dict[str, list[float]] = {"proof verdict (and_swap)": [], "statement verdict": []}
    equivalent: dict[str, list[float]] = {"shown equivalent": [], "not shown": []}
    outcomes: dict[str, bool] = {}
    await verifier.verify(and_swap, proof)  # (warm: the reference statement, once per task)
    for _ in range(rounds):
        for task_id, statement in list(candidates().items())[:limit]:
            t = time.perf_counter()
            verdict = await verifier.verify(and_swap, proof)
            samples["proof verdict (and_swap)"].append((time.perf_counter() - t) * 1000)
            assert verdict.accepted, verdict.reasons
            t = time.perf_counter()
            graded = await grader.grade(claims.task(task_id), statement, 20.0)
            ms = (time.perf_counter() - t) * 1000
            samples["statement verdict"].append(ms)
            equivalent["shown equivalent" if graded.accepted else "not shown"].append(ms)
            outcomes[task_id] = graded.accepted
    rows = {name: summarize(v) for name, v in samples.items()}
    rows |= {f"statement verdict, {name}": summarize(v) for name, v in equivalent.items() if v}
    print_table("a statement's verdict (its check + BEq+ both ways) vs a proof verdict", rows,
                "proof verdict (and_swap)")  # fmt: skip
    ratio = rows["statement verdict"]["median_ms"] / rows["proof verdict (and_swap)"]["median_ms"]
    print(f"statement verdict / proof verdict (median): {ratio:.2f} (target: at most 2)")
    return {
        "rounds": rounds,
        "results": rows,
        "ratios": {"statement_vs_proof_verdict": round(ratio, 2)},
        "outcomes": outcomes,
    }


def run(quick: bool = False) -> dict[str, Any]:
    result = anyio.run(measure, 1 if quick else 5)
    write_result("equiv", result)
    return result
