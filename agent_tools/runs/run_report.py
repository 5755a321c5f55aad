"""Reports of runs (``leanrig report``, ``leanrig compare``): Markdown, JSON and PNGs in ``out``."""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from ..tasks import TaskKind
from .ledger_report import ReportError, write_ledger_report
from .loaded_run import RUN_HINT, LoadedRun, is_run_dir, load_run
from .metrics import (
    CI_LABEL,
    CI_METHOD,
    Comparison,
    Interval,
    RunMetrics,
    compare,
    per_point_text,
)
from .plots import (
    PlotRun,
    comparison,
    only_one_side,
    outcome_grid,
    pass_at_k_curve,
    run_plots,
    task_outcomes,
)
from .prices import PriceSchedule, fmt_usd
from .results import (
    RUN_FILE,
    RunInfo,
    time_limit_text,
)


def fmt(value: float | None, digits: int = 1, prefix: str = "") -> str:
    return "N/A" if value is None else f"{prefix}{value:.{digits}f}"


def agent_tool_of(info: RunInfo) -> str:
    """The agent tool a report names: as recorded, else the harness that ran, else a dash."""
    return info.agent_tool or (info.harness.name if info.harness is not None else "—")


def cell(text: str) -> str:
    """``text`` as one Markdown table cell: ``|`` escaped, line breaks joined."""
    return " ".join(text.split("\n")).replace("|", "\\|")


def fmt_change(value: float | None) -> str:
    return "N/A" if value is None else f"{value:+.1f}%"


def ci_text(ci: Interval | None, text: Callable[[float], str] = lambda v: f"{v:.1f}") -> str:
    """An interval as ``41.2–80.0`` (N/A: fewer than two tasks; ∞: no upper bound)."""
    if ci is None:
        return "N/A"
    high = "∞" if math.isinf(ci.high) else text(ci.high)
    return f"{text(ci.low)}–{high}"


def with_ci(value: float, ci: Interval | None) -> str:
    """A score and its interval as tables print them: ``62.5 (95 % CI 41.2–80.0)``."""
    return f"{value:.1f}" if ci is None else f"{value:.1f} ({CI_LABEL} {ci_text(ci)})"


def _bracketed(ci: Interval | None) -> str:
    return "" if ci is None else f" [{ci_text(ci)}]"


def delta_ci_text(ci: Interval | None) -> str:
    """A Δ's interval, signed: ``[−5.0, +55.0]``."""
    return "N/A" if ci is None else f"[{ci.low:+.1f}, {ci.high:+.1f}]"


def _n(value: int | None) -> str:
    return "N/A" if value is None else str(value)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def headline(m: RunMetrics) -> list[str]:
    """The headline table: the figures, and under each that has one, its interval."""

    def under(ci: Interval | None, text: Callable[[float], str] = lambda v: f"{v:.1f}") -> str:
        return "" if ci is None else f"{CI_LABEL} {ci_text(ci, text)}"

    table = [
        "| score | completion | tasks | tasks accepted | s / point | USD / point | "
        "attempts accepted after timeout |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {m.score:.1f} | {m.completion:.1f}% | {m.tasks} | {m.accepted} | "
        f"{per_point_text(m.seconds_per_point)} | {fmt_usd(m.usd_per_point)} | "
        f"{m.accepted_after_timeout} |",
    ]
    if m.score_ci is None:  # fewer than two tasks: no interval anywhere
        return [*table, "", "No intervals: they need at least two tasks."]
    per_point = [m.seconds_per_point_ci, m.usd_per_point_ci]
    unbounded = any(ci is not None and math.isinf(ci.high) for ci in per_point)
    return [
        *table,
        f"| {under(m.score_ci)} | {under(m.completion_ci)} | | | "
        f"{under(m.seconds_per_point_ci, per_point_text)} | "
        f"{under(m.usd_per_point_ci, fmt_usd)} | |",
        "",
        f"Intervals: {CI_METHOD}" + ("; ∞: some resampled suites score 0." if unbounded else "."),
    ]


def outcome_table(runs: Sequence[PlotRun]) -> list[str]:
    """The per-task outcome grid (``plots.outcome_grid``) as a Markdown table."""
    grid = outcome_grid(runs)
    out = [
        "| task | field | d | " + " | ".join(cell(c) for c in grid.columns) + " |",
        "|---|---|---:|" + "---|" * len(grid.columns),
    ]
    for row, statuses, counts in zip(grid.rows, grid.status, grid.counts, strict=True):
        cells = [
            "—" if st == "not in suite" else f"{st} ({k})" if k else st
            for st, k in zip(statuses, counts, strict=True)
        ]
        out.append(
            f"| {cell(row.task)} | {cell(row.field or '—')} | {row.difficulty} | "
            + " | ".join(cells)
            + " |"
        )
    return out


OUTCOME_NOTE = (
    "verified; timed out (not verified, the time limit hit); error (an infrastructure failure "
    "the retry did not clear, or the agent exited non-zero); not verified (the rest); no "
    "result (no results line)"
)


def render_run_markdown(run: LoadedRun) -> str:
    info, m = run.info, run.metrics
    out = [f"# leanrig run report: {run.name}", "", f"source: `{run.path}`", ""]
    out += [f"> note: {n}" for n in run.notes] + ([""] if run.notes else [])
    suite = " ".join(x for x in (info.suite_name, info.suite_version) if x)
    limit = time_limit_text(info.time_limit_s)
    machine = (
        f"{info.machine.cores} cores, {info.machine.memory_bytes / 2**30:.1f} GiB"
        if (info.machine)
        else "—"
    )
    out += [
        "| run | |",
        "|---|---|",
        f"| suite | {cell(suite)} (`{info.suite_hash[:12] or '—'}`), {info.task_count} tasks |",
        f"| model · agent tool · condition | {cell(info.model or '—')} · "
        f"{cell(agent_tool_of(info))} · {cell(info.condition)} |",
        f"| time limit · attempts · parallel | {limit} · {info.attempts} · {info.parallel} |",
        f"| retry policy | {info.retry_policy} |",
        f"| leanrig · Lean · sandbox | {info.leanrig_version or '—'} · "
        f"{info.lean_version or '—'} · {info.sandbox or '—'} |",
        f"| machine | {machine} |",
        f"| started · ended | {info.started_at.isoformat()} · "
        f"{info.ended_at.isoformat() if info.ended_at else '—'} |",
        f"| agent command | `{cell(info.agent_command)}` |",
        "",
    ]
    out += ["## Metrics", "", *headline(m), ""]
    if run.by_kind:
        out += by_kind_section(run.by_kind)
    out += [
        "## Fields",
        "",
        f"| field | score | denominator (Σ difficulty) | {CI_LABEL} |",
        "|---|---:|---:|---:|",
    ]
    out += [
        f"| {cell(f or '—')} | {s:.1f} | {m.field_denominators[f]} | "
        f"{ci_text(m.field_cis.get(f))} |"
        for f, s in m.fields.items()
    ]
    out += ["", "## Attempts", ""]
    pak = (
        ", ".join(f"pass@{k} {with_ci(v, m.pass_at_k_ci.get(k))}" for k, v in m.pass_at_k.items())
        or "—"
    )
    out += [
        f"- {m.attempts} attempt(s), {m.accepted_attempts} verified; {pak}",
        f"- first-attempt acceptance {fmt(m.first_attempt_acceptance)}%; "
        f"coverage {m.coverage:.1f}% (tasks verified in at least one of "
        f"{info.attempts} attempt(s))",
        f"- timed out {m.timed_out}, of which verified {m.accepted_after_timeout}; "
        f"infrastructure retries {m.infra_retries}",
        f"- mean invocation {fmt(m.mean_invocation_s, 1)} s per task",
    ]
    if m.mean_model_s is not None:
        out.append(
            f"- of which model {fmt(m.mean_model_s, 2)} s (the run's gateway), Lean "
            f"{fmt(m.mean_lean_s, 2)} s (the ledger), the rest "
            f"{fmt(m.mean_other_s, 2)} s (means per task)"
        )
    if info.harness is not None:
        h = info.harness
        out.append(
            f"- harness {cell(h.name)} {cell(h.version)}, model {cell(h.model)}"
            + (f", reasoning {cell(h.reasoning)}" if h.reasoning else "")
            + f"; agent network: {info.agent_network or '—'}"
            + (f"; model endpoint `{cell(info.model_endpoint)}`" if info.model_endpoint else "")
        )
    out += ["", "## Cost and tokens", ""]
    sched = f" (prices fixed {info.prices.fixed})" if info.prices else ""
    srcs = ", ".join(f"{k} {v}" for k, v in sorted(m.cost_sources.items())) or "none"
    out.append(
        f"- cost known for {m.cost_tasks} of {m.tasks} task(s) ({srcs}){sched}; "
        f"mean {fmt_usd(m.mean_usd)} per task; score over them {fmt(m.cost_score)}"
    )
    out += ["", "| tokens | total | tasks reporting | mean per task |", "|---|---:|---:|---:|"]
    for kind, t in m.tokens.items():
        name = kind.removesuffix("_tokens")
        out.append(
            f"| {name} | {_n(t['total'])} | {t['tasks_reporting']} | {_n(t['per_task_mean'])} |"
        )
    out += ["", "## Per task", ""]
    if m.attempts > m.tasks - len(m.missing_tasks):  # several attempts: say which are means
        out += [
            "Seconds and USD are means per attempt (as in the per-point metrics); tokens "
            "are summed over a task's attempts (as in the totals above).",
            "",
        ]
    out.append(
        "| task | field | d | attempts | verified | invocation s / attempt | model s | Lean s | "
        "rest s | USD / attempt | input tokens | cached | output |"
    )
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for o in m.per_task:
        out.append(
            f"| {cell(o.task)} | {cell(o.field or '—')} | {o.difficulty} | {o.attempts} | "
            f"{o.accepted_attempts} | {fmt(o.invocation_s, 1)} | {fmt(o.model_s, 2)} | "
            f"{fmt(o.lean_s, 2)} | {fmt(o.other_s, 2)} | {fmt_usd(o.cost_usd)} | "
            f"{_n(o.input_tokens)} | {_n(o.cached_input_tokens)} | {_n(o.output_tokens)} |"
        )
    out += [
        "",
        "## Outcome per task",
        "",
        f"Each attempt: {OUTCOME_NOTE}.",
        "",
        *outcome_table([run.plot_run()]),
    ]
    mismatched = [(o.task, x) for o in m.per_task for x in o.usage_mismatches]
    if mismatched:
        out += [
            "",
            "## Usage: the harness's count differs from the gateway's",
            "",
            "Tokens and USD above are the gateway's (off the wire, priced with --prices); "
            "the harness's own report differs here:",
            "",
        ]
        out += [f"- {cell(t)}, {cell(x)}" for t, x in mismatched]
    return "\n".join(out) + "\n"


KIND_TITLES = {
    "proof": "Proofs (theorem proving): verified = the proof is accepted",
    "statement": "Statements (autoformalization): verified = the statement is shown equivalent "
    "to the hidden reference in both directions (BEq+, docs/equivalence.md)",
    "statement_and_proof": "Statements with proofs: verified = the proof of the attempt's own "
    "statement is accepted and the statement is equivalent to the reference",
}


def by_kind_section(by_kind: Mapping[TaskKind, RunMetrics]) -> list[str]:
    """The metrics of each task kind apart, so a run mixing kinds ranks none by the others."""
    out = [
        "## By task kind",
        "",
        "Each kind's tasks scored on their own (for a statement task, the score and "
        "completion are its equivalence rate: difficulty-weighted, and over tasks; pass@k: "
        "some candidate among k shown equivalent).",
        "",
    ]
    for kind, m in by_kind.items():
        out += [f"### {KIND_TITLES.get(kind, kind)}", "", *headline(m), ""]
        pak = (
            ", ".join(
                f"pass@{k} {with_ci(v, m.pass_at_k_ci.get(k))}" for k, v in m.pass_at_k.items()
            )
            or "—"
        )
        out += [
            f"- {m.tasks} task(s), {m.attempts} attempt(s), {m.accepted_attempts} verified "
            f"(equivalence rate over attempts {_rate(m)}); {pak}",
            "",
        ]
        out += [
            f"| field | score | denominator (Σ difficulty) | {CI_LABEL} |",
            "|---|---:|---:|---:|",
        ]
        out += [
            f"| {cell(f or '—')} | {v:.1f} | {m.field_denominators[f]} | "
            f"{ci_text(m.field_cis.get(f))} |"
            for f, v in m.fields.items()
        ]
        out.append("")
    return out


def _rate(m: RunMetrics) -> str:
    return f"{100 * m.accepted_attempts / m.attempts:.1f}%" if m.attempts else "—"


def run_json(run: LoadedRun) -> dict[str, Any]:
    return {
        "kind": "run",
        "name": run.name,
        "path": str(run.path),
        **run.metrics.to_json(),
        "by_kind": {k: m.to_json() for k, m in run.by_kind.items()},
        "run": run.info.model_dump(mode="json"),
        "notes": run.notes,
    }


def _write_json(path: Path, data: Any) -> None:
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))


def write_run_report(
    run_dir: Path, out: Path, *, plots: bool = True, prices: PriceSchedule | None = None
) -> dict[str, Any]:
    run = load_run(run_dir, prices=prices)
    out.mkdir(parents=True, exist_ok=True)
    summary = run_json(run)
    (out / "report.md").write_text(render_run_markdown(run))
    _write_json(out / "report.json", summary)
    if plots:
        summary["plots"] = [str(p) for p in run_plots([run.plot_run()], out)]
    return summary


def write_report(
    path: Path, out: Path, *, plots: bool = True, prices: PriceSchedule | None = None
) -> dict[str, Any]:
    """A run directory's or a ledger file's report; the summary has ``notes`` and ``plots``."""
    if path.is_dir():
        return write_run_report(path, out, plots=plots, prices=prices)
    if not path.exists():
        raise ReportError(
            f"no such run directory or ledger: {path}",
            hint=f"{RUN_HINT}, or a ledger file written by `leanrig serve` "
            "(runs/<timestamp>/ledger.jsonl)",
        )
    return write_ledger_report(path, out, plots=plots)


def suite_mismatch(runs: Sequence[LoadedRun]) -> str | None:
    """The warning for runs over different tasks, whose scores are not comparable; None if same."""

    def tasks_of(r: LoadedRun) -> object:
        i = r.info
        if i.tasks:
            return tuple(sorted((t.id, t.field, t.difficulty) for t in i.tasks))
        return (i.suite_name, i.suite_version)

    if len({tasks_of(r) for r in runs}) < 2:
        return None
    which = "; ".join(
        f"{r.name}: {r.info.suite_name} {r.info.suite_version}, {len(r.info.tasks)} task(s)"
        for r in runs
    )
    return (
        f"these runs are over different tasks ({which}): their scores, completion and field "
        "scores are not comparable"
    )


def render_leaderboard(runs: Sequence[LoadedRun], links: Mapping[Path, str] | None = None) -> str:
    """The leaderboard page; ``links``: each run's own report, relative to the page."""
    links = links or {}
    mismatch = suite_mismatch(runs)
    out = [
        "# leanrig leaderboard",
        "",
        *([f"> **warning:** {mismatch}", ""] if mismatch else []),
        f"| # | run | model | agent tool | condition | score | score {CI_LABEL} | "
        "completion | s / point | USD / point | tasks | tasks accepted |",
        "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ordered = sorted(runs, key=lambda r: -r.metrics.score)
    for i, r in enumerate(ordered, 1):
        m = r.metrics
        name = f"[{cell(r.name)}]({links[r.path]})" if r.path in links else cell(r.name)
        out.append(
            f"| {i} | {name} | {cell(r.info.model or '—')} | "
            f"{cell(agent_tool_of(r.info))} | {cell(r.info.condition)} | "
            f"{m.score:.1f} | {ci_text(m.score_ci)} | {m.completion:.1f}% | "
            f"{per_point_text(m.seconds_per_point)} | {fmt_usd(m.usd_per_point)} | "
            f"{m.tasks} | "
            f"{m.accepted} |"
        )
    fields = list(dict.fromkeys(f for r in runs for f in r.metrics.fields))
    if fields:
        # One denominator per field in the header when the runs share it, else each run's.
        shared = {f: {r.metrics.field_denominators.get(f) for r in runs} for f in fields}
        out += [
            "",
            "## Field scores",
            "",
            "| run | "
            + " | ".join(
                f"{cell(f or '—')}"
                + (f" (/{next(iter(shared[f]))})" if len(shared[f]) == 1 else "")
                for f in fields
            )
            + " |",
            "|---|" + "---:|" * len(fields),
        ]
        for r in ordered:
            scores = [
                fmt(r.metrics.fields.get(f))
                + ("" if len(shared[f]) == 1 else f" (/{r.metrics.field_denominators.get(f, '?')})")
                + _bracketed(r.metrics.field_cis.get(f))
                for f in fields
            ]
            out.append(f"| {cell(r.name)} | " + " | ".join(scores) + " |")
        out += ["", f"(/Σd): the field's points available; [a–b]: the {CI_LABEL} ({CI_METHOD})."]
    out += [
        "",
        "## Outcome per task",
        "",
        f"Each run's attempts at a task: {OUTCOME_NOTE}; with several attempts, partly "
        "verified where some were, else the gravest failure, and (k/K) attempts verified.",
        "",
        *outcome_table([r.plot_run() for r in ordered]),
    ]
    notes = [f"> note ({r.name}): {n}" for r in runs for n in r.notes]
    out += ["", *notes] if notes else []
    return "\n".join(out) + "\n"


def report_runs(
    paths: Sequence[Path],
    out: Path,
    *,
    plots: bool = True,
    prices: PriceSchedule | None = None,
) -> dict[str, Any]:
    """`leanrig report PATH...`: one report, or one per ``out/<name>/`` and a leaderboard."""
    if not paths:
        raise ReportError("no run directory or ledger given")
    if len(paths) == 1:
        return write_report(paths[0], out, plots=plots, prices=prices)
    not_runs = [str(p) for p in paths if not is_run_dir(p)]
    if not_runs:
        raise ReportError(
            f"a report over several runs takes run directories (with {RUN_FILE}); "
            f"not run directories: {', '.join(not_runs)}",
            hint="report a ledger on its own (`leanrig report LEDGER`), or give only run "
            "directories for a leaderboard",
        )
    runs = distinguishable([load_run(p, prices=prices) for p in paths])
    out.mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    per_run = []
    links: dict[Path, str] = {}
    for r in runs:
        slug = _slug(r.path.name)
        while slug in used:
            slug += "_"
        used.add(slug)
        sub = out / slug
        sub.mkdir(exist_ok=True)
        (sub / "report.md").write_text(render_run_markdown(r))
        links[r.path] = f"{slug}/report.md"
        _write_json(sub / "report.json", run_json(r))
        per_run.append(run_json(r))
    mismatch = suite_mismatch(runs)
    summary: dict[str, Any] = {
        "kind": "leaderboard",
        "runs": sorted(per_run, key=lambda s: -float(s["score"])),
        "notes": [
            *([mismatch] if mismatch else []),
            *(f"{r.name}: {n}" for r in runs for n in r.notes),
        ],
    }
    (out / "report.md").write_text(render_leaderboard(runs, links))
    _write_json(out / "report.json", summary)
    if plots:
        summary["plots"] = [
            str(p) for p in run_plots([r.plot_run() for r in runs], out, board=True)
        ]
    return summary


def render_comparison(base: LoadedRun, lad: LoadedRun, c: Comparison) -> str:
    out = ["# leanrig compare: baseline → LAD", ""]
    out += [f"baseline: {base.name} (`{base.path}`); LAD: {lad.name} (`{lad.path}`)", ""]
    out += [f"> note: {n}" for n in c.notes] + ([""] if c.notes else [])
    rows = [
        ("score", fmt(c.score.base), fmt(c.score.new), c.score),
        ("completion %", fmt(c.completion.base), fmt(c.completion.new), c.completion),
        (
            "USD / point",
            fmt_usd(c.usd_per_point.base),
            fmt_usd(c.usd_per_point.new),
            c.usd_per_point,
        ),
        (
            "s / point",
            per_point_text(c.seconds_per_point.base),
            per_point_text(c.seconds_per_point.new),
            c.seconds_per_point,
        ),
    ]
    cis = {"score": c.score_delta_ci, "completion %": c.completion_delta_ci}
    out += [
        f"| metric | baseline | LAD | Δ (L − B) | change (L − B) / B | Δ {CI_LABEL} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for a, b, n, ch in rows:
        delta = "N/A" if ch.base is None or ch.new is None else f"{ch.new - ch.base:+.3g}"
        interval = delta_ci_text(cis[a]) if a in cis else "—"
        out.append(f"| {a} | {b} | {n} | {delta} | {fmt_change(ch.change_percent)} | {interval} |")
    out += [
        "",
        f"| field | denominator | baseline | LAD | Δ points | Δ {CI_LABEL} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    dens = {**lad.metrics.field_denominators, **base.metrics.field_denominators}
    for f, d in c.fields.items():
        diff = "N/A" if d.diff_points is None else f"{d.diff_points:+.1f}"
        out.append(
            f"| {cell(f or '—')} | {dens.get(f, '?')} | {fmt(d.base)} | {fmt(d.new)} | {diff} | "
            f"{delta_ci_text(c.field_delta_cis.get(f))} |"
        )
    out += [
        "",
        f"Δ intervals: paired — the {c.shared_tasks} task(s) both runs have resampled "
        f"together, each side scored on the same resample ({CI_METHOD}); N/A with fewer "
        "than two tasks. An interval that excludes 0 is a change the task sample "
        "supports.",
    ]
    out += by_kind_comparison(base, lad)
    only = only_one_side(base.plot_run(), lad.plot_run())
    out += ["", "## Tasks verified by one condition only", ""]
    out += [
        f"- LAD only ({len(only['lad'])}): {', '.join(only['lad']) or '—'}",
        f"- baseline only ({len(only['baseline'])}): {', '.join(only['baseline']) or '—'}",
    ]
    out += [
        "",
        "## Outcome per task",
        "",
        f"Each run's attempts at a task: {OUTCOME_NOTE}.",
        "",
        *outcome_table([base.plot_run(), lad.plot_run()]),
    ]
    notes = [f"baseline: {n}" for n in base.notes] + [f"LAD: {n}" for n in lad.notes]
    out += [""] + [f"> note: {n}" for n in notes] if notes else []
    return "\n".join(out) + "\n"


def by_kind_comparison(base: LoadedRun, lad: LoadedRun) -> list[str]:
    """Each task kind's score and completion on both sides, compared kind by kind."""
    kinds = [k for k in base.by_kind if k in lad.by_kind]
    if not kinds:
        return []
    out = [
        "",
        "## By task kind",
        "",
        "| kind | baseline score | LAD score | Δ points | Δ " + CI_LABEL + " | baseline "
        "completion | LAD completion |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in kinds:
        c = compare(base.by_kind[kind], lad.by_kind[kind])
        delta = (
            "N/A"
            if c.score.base is None or c.score.new is None
            else f"{c.score.new - c.score.base:+.1f}"
        )
        out.append(
            f"| {kind} | {fmt(c.score.base)} | {fmt(c.score.new)} | {delta} | "
            f"{delta_ci_text(c.score_delta_ci)} | {fmt(c.completion.base)}% | "
            f"{fmt(c.completion.new)}% |"
        )
    return out


def mismatches(base: RunInfo, new: RunInfo) -> list[str]:
    """What makes two runs not comparable as they stand (notes, not refusals)."""
    notes = []
    if base.suite_hash and new.suite_hash and base.suite_hash != new.suite_hash:
        notes.append(
            f"the runs used different suites or task files (suite hash {base.suite_hash[:12]} "
            f"vs {new.suite_hash[:12]}): the comparison mixes them"
        )
    if base.condition == "lad" and new.condition == "baseline":
        notes.append("the baseline given is a LAD run and the LAD one a baseline run: swapped?")
    elif base.condition == new.condition:
        notes.append(
            f"both runs are {base.condition} runs: the comparison is of two {base.condition} "
            "runs, not of baseline and library access"
        )
    if base.time_limit_s != new.time_limit_s:
        notes.append(
            f"the runs differ in time limit: {time_limit_text(base.time_limit_s)} vs "
            f"{time_limit_text(new.time_limit_s)}"
        )
    if base.model != new.model:
        notes.append(f"the runs differ in model: {base.model} vs {new.model}")
    return notes


def distinguishable(runs: list[LoadedRun]) -> list[LoadedRun]:
    """``runs``, those sharing a display name qualified by their directory's name."""
    names = Counter(r.name for r in runs)
    return [dataclasses.replace(r, qualified=True) if names[r.name] > 1 else r for r in runs]


def compare_runs(
    base: Path,
    lad: Path,
    out: Path,
    *,
    plots: bool = True,
    prices: PriceSchedule | None = None,
) -> dict[str, Any]:
    """`leanrig compare BASE_DIR LAD_DIR`: ``compare.md``, ``compare.json`` and PNGs in ``out``."""
    b, n = distinguishable([load_run(base, prices=prices), load_run(lad, prices=prices)])
    c = compare(b.metrics, n.metrics)
    c.notes.extend(mismatches(b.info, n.info))
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "kind": "compare",
        "comparison": c.to_json(),
        "by_kind": {
            k: compare(b.by_kind[k], n.by_kind[k]).to_json() for k in b.by_kind if k in n.by_kind
        },
        "base": run_json(b),
        "lad": run_json(n),
        "notes": c.notes + [f"baseline: {x}" for x in b.notes] + [f"LAD: {x}" for x in n.notes],
    }
    (out / "compare.md").write_text(render_comparison(b, n, c))
    _write_json(out / "compare.json", summary)
    if plots:
        pair = (PlotRun(b.name, "baseline", b.metrics), PlotRun(n.name, "lad", n.metrics))
        paths = [
            comparison(*pair, out / "comparison.png", delta=c),
            task_outcomes(pair, out / "task_outcomes.png"),
        ]
        if any(len(r.metrics.pass_at_k) > 1 for r in pair):
            paths.append(pass_at_k_curve(pair, out / "pass_at_k.png"))
        summary["plots"] = [str(p) for p in paths]
    return summary
