"""matplotlib PNG figures of benchmark runs, with the metrics' intervals where they have them."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from .ledger_report import ReportError
from .metrics import (
    CI_LABEL,
    Comparison,
    Interval,
    RunMetrics,
    compare,
    per_point_text,
    task_status,
)
from .prices import fmt_usd

COLORS = {"baseline": "#4477aa", "lad": "#ee6677", "human": "#228833"}


@dataclass(frozen=True, slots=True)
class PlotRun:
    name: str
    condition: str
    metrics: RunMetrics


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ReportError("matplotlib is not installed", hint="run `make setup`") from exc
    return plt


PALETTE = [
    "#4477aa",
    "#ee6677",
    "#228833",
    "#ccbb44",
    "#66ccee",
    "#aa3377",
    "#bbbbbb",
    "#ee7733",
    "#332288",
    "#999933",
    "#882255",
    "#44aa99",
]


def _colors(runs: Sequence[PlotRun]) -> list[str]:
    """One colour per condition when the conditions tell the runs apart, else one per run."""
    conditions = [r.condition for r in runs]
    if len(set(conditions)) == len(conditions):
        return [COLORS.get(c, PALETTE[i % len(PALETTE)]) for i, c in enumerate(conditions)]
    return [PALETTE[i % len(PALETTE)] for i in range(len(runs))]


def _n(runs: Sequence[PlotRun]) -> str:
    """How many tasks and attempts the figure rests on, for its title."""

    def span(values: set[int]) -> str:
        return str(min(values)) if len(values) == 1 else f"{min(values)}–{max(values)}"

    tasks = {r.metrics.tasks for r in runs}
    attempts = {r.metrics.attempts for r in runs}
    each = " per run" if len(tasks) > 1 or len(attempts) > 1 else ""
    return f"n = {span(tasks)} tasks, {span(attempts)} attempts{each}"


def _save(fig: Any, plt: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return path


CI_NOTE = f"whiskers: {CI_LABEL}, bootstrap over tasks"


def _yerr(values: Sequence[float | None], cis: Sequence[Interval | None], top: float) -> Any:
    """Asymmetric error bars for ``values``; none where unknown, an unbounded one up to ``top``."""
    lower, upper = [], []
    for v, ci in zip(values, cis, strict=True):
        if v is None or ci is None:
            lower.append(0.0)
            upper.append(0.0)
            continue
        lower.append(v - ci.low)
        upper.append(min(ci.high, top) - v)
    return [lower, upper]


def score_completion(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(runs) + 5), 4.4))
    width = 0.8 / len(runs)
    colors = _colors(runs)
    for i, run in enumerate(runs):
        m = run.metrics
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(2)]
        values, cis = [m.score, m.completion], [m.score_ci, m.completion_ci]
        ax.bar(
            xs,
            values,
            width,
            label=run.name,
            color=colors[i],
            yerr=_yerr(values, cis, 100),
            capsize=3,
            ecolor="#333333",
        )
        for x, v, ci in zip(xs, values, cis, strict=True):
            text = f"{v:.1f}" if ci is None else f"{v:.1f}\n[{ci.low:.0f}–{ci.high:.0f}]"
            top = v if ci is None else ci.high
            ax.annotate(
                text,
                (x, top),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.set_xticks([0, 1], ["score", "completion %"])
    ax.set_ylim(0, 118)  # room above 100 for the labels
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel("points (0–100)")
    ax.set_title(f"score and completion ({CI_NOTE})\n{_n(runs)}", fontsize=10)
    # Beside the axes: inside, it can cover a bar.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig, plt, path)


def empty_panel_note(unit: str, values: Sequence[float | None]) -> str | None:
    """What a per-point panel says instead of all-empty or zero bars; None: it has bars to draw."""
    if any(values):
        return None
    if unit == "seconds":
        return "N/A: no run scored a point"
    if all(v is None for v in values):
        return "N/A: no run has a known cost"
    return "$0 per point in every run: no priced model calls"


def cost_per_point(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(max(8.5, 1.6 * len(runs) + 4), 4.4))
    for ax, key, title, unit in (
        (axes[0], "usd_per_point", "USD per score point", "USD"),
        (axes[1], "seconds_per_point", "seconds per score point", "seconds"),
    ):
        names = ["\n".join(textwrap.wrap(r.name, 22)) for r in runs]
        values = [getattr(r.metrics, key) for r in runs]
        cis: list[Interval | None] = [getattr(r.metrics, f"{key}_ci") for r in runs]
        ax.set_title(f"{title}\n{_n(runs)}", fontsize=10)
        why = empty_panel_note(unit, values)
        if why is not None:
            ax.text(
                0.5, 0.5, why.replace("$", r"\$"), ha="center", va="center", transform=ax.transAxes
            )
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        finite = [v for v in values if v is not None]
        finite += [ci.high for ci in cis if ci is not None and math.isfinite(ci.high)]
        top = 1.15 * max(finite) or 1.0
        heights = [v if v is not None else 0.0 for v in values]
        ax.bar(
            names,
            heights,
            color=_colors(runs),
            yerr=_yerr(values, cis, top),
            capsize=3,
            ecolor="#333333",
        )
        text = fmt_usd if unit == "USD" else per_point_text
        for x, v, ci in zip(range(len(runs)), values, cis, strict=True):
            label = text(v)
            if v is not None and ci is not None:
                high = "∞" if math.isinf(ci.high) else text(ci.high)
                label += f"\n[{text(ci.low)}–{high}]"
            label = label.replace("$", r"\$")  # two would start mathtext
            y = 0.0 if v is None else v if ci is None else min(ci.high, top)
            ax.annotate(
                label,
                (x, y),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
        ax.set_ylim(0, top * 1.15)
        ax.set_ylabel(f"{unit} per point ({CI_NOTE.removeprefix('whiskers: ')})", fontsize=8)
        plt.setp(ax.get_xticklabels(), rotation=20, ha="right", fontsize=8)
    return _save(fig, plt, path)


def field_label(field: str, runs: Sequence[PlotRun]) -> str:
    """A field's name with its points available (Σ difficulty), each run's where they differ."""
    dens = dict.fromkeys(
        str(r.metrics.field_denominators[field])
        for r in runs
        if field in r.metrics.field_denominators
    )
    return f"{field or '—'} (Σd = {' / '.join(dens) or '?'})"


def fields_radar(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    fields = list(dict.fromkeys(f for r in runs for f in r.metrics.fields))
    names: list[str | None] = [*fields]
    if len(names) < 3:  # a radar needs three axes; pad with blanks
        names += [None] * (3 - len(names))
    angles = [2 * math.pi * i / len(names) for i in range(len(names))]
    fig, ax = plt.subplots(figsize=(7.2, 6.6), subplot_kw={"polar": True})
    colors = _colors(runs)
    for i, run in enumerate(runs):
        m = run.metrics
        values = [m.fields.get(f, 0.0) if f is not None else 0.0 for f in names]
        closed_a, closed_v = [*angles, angles[0]], [*values, values[0]]
        color = colors[i]
        if run.condition == "baseline":
            ax.plot(closed_a, closed_v, color=color, linewidth=1.5, label=run.name)
            ax.fill(closed_a, closed_v, color=color, alpha=0.25)
        else:
            style = "--" if run.condition == "lad" else ":"
            ax.plot(closed_a, closed_v, style, color=color, linewidth=2, label=run.name)
        # Off the spoke so runs do not hide each other; capped so it reads as an error bar.
        shift = (i - (len(runs) - 1) / 2) * 0.06
        for a, f, v in zip(angles, names, values, strict=True):
            ci = m.field_cis.get(f) if f is not None else None
            if ci is not None:
                ax.errorbar(
                    [a + shift],
                    [v],
                    yerr=[[v - ci.low], [ci.high - v]],
                    fmt="o",
                    markersize=3,
                    color=color,
                    elinewidth=1.4,
                    capsize=3,
                )
    labels = ["" if f is None else field_label(f, runs).replace(" (", "\n(", 1) for f in names]
    ax.set_xticks(angles, labels, fontsize=8)
    ax.tick_params(axis="x", pad=10)
    ax.set_ylim(0, 100)
    ax.set_yticks(range(20, 101, 20))
    ax.tick_params(axis="y", labelsize=7, labelcolor="#555555")
    ax.set_rlabel_position(90 - 180 / len(names))  # between the first two spokes
    # The scale goes in the title: a polar y label sits on the left spoke's label.
    ax.set_title(
        f"field scores, 0–100 (bars: {CI_LABEL}, bootstrap over the field's tasks)\n{_n(runs)}",
        fontsize=10,
        pad=16,
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, frameon=False)
    return _save(fig, plt, path)


def leaderboard(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    ordered = sorted(runs, key=lambda r: r.metrics.score)
    fig, ax = plt.subplots(figsize=(10.5, 0.5 * len(runs) + 1.7))
    colors = [COLORS.get(r.condition, "#999999") for r in ordered]
    scores = [r.metrics.score for r in ordered]
    cis = [r.metrics.score_ci for r in ordered]
    xerr = _yerr(scores, cis, 100)
    ax.barh([r.name for r in ordered], scores, color=colors, xerr=xerr, capsize=3, ecolor="#333333")

    def label(m: RunMetrics) -> str:
        usd = "cost N/A" if m.usd_per_point is None else f"{fmt_usd(m.usd_per_point)}/pt"
        sec = "N/A" if m.seconds_per_point is None else f"{per_point_text(m.seconds_per_point)}"
        ci = "" if m.score_ci is None else f" [{m.score_ci.low:.0f}–{m.score_ci.high:.0f}]"
        return f"{m.score:.1f}{ci}  ({m.completion:.1f}% done, {usd}, {sec} s/pt)"

    for y, r in enumerate(ordered):
        end = r.metrics.score if r.metrics.score_ci is None else r.metrics.score_ci.high
        ax.annotate(
            label(r.metrics),
            (end, y),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_xlim(0, 200)
    ax.set_xticks(range(0, 101, 20))
    ax.spines[["top", "right"]].set_visible(False)
    ax.spines["bottom"].set_bounds(0, 100)
    ax.set_xlabel(f"score (0–100; {CI_NOTE})")
    ax.set_ylabel("run")
    ax.set_title(f"leaderboard ({_n(runs)})", fontsize=10)
    return _save(fig, plt, path)


class _Group(NamedTuple):
    """One cluster of bars in the comparison: baseline and LAD, their intervals, the Δ's."""

    label: str
    values: tuple[float | None, float | None]
    cis: tuple[Interval | None, Interval | None]
    delta_ci: Interval | None


def comparison(base: PlotRun, lad: PlotRun, path: Path, delta: Comparison | None = None) -> Path:
    """Baseline → LAD: score, completion and fields with Δ points, and the one-side tasks."""
    plt = _pyplot()
    c = delta or compare(base.metrics, lad.metrics)
    b_m, l_m = base.metrics, lad.metrics
    fields = list(dict.fromkeys([*b_m.fields, *l_m.fields]))
    groups = [
        _Group("score", (b_m.score, l_m.score), (b_m.score_ci, l_m.score_ci), c.score_delta_ci),
        _Group(
            "completion %",
            (b_m.completion, l_m.completion),
            (b_m.completion_ci, l_m.completion_ci),
            c.completion_delta_ci,
        ),
        *(
            _Group(
                field_label(f, [base, lad]).replace(" (", "\n(", 1),
                (b_m.fields.get(f), l_m.fields.get(f)),
                (b_m.field_cis.get(f), l_m.field_cis.get(f)),
                c.field_delta_cis.get(f),
            )
            for f in fields
        ),
    ]
    fig, (ax, side) = plt.subplots(
        1, 2, figsize=(max(8.0, 1.1 * len(groups) + 5), 5), width_ratios=[3, 1]
    )
    xs = list(range(len(groups)))
    for offset, run, i in ((-0.2, base, 0), (0.2, lad, 1)):
        values = [g.values[i] for g in groups]
        ax.bar(
            [x + offset for x in xs],
            [v or 0.0 for v in values],
            0.4,
            label=run.name,
            color=COLORS.get(run.condition, "#999999"),
            yerr=_yerr(values, [g.cis[i] for g in groups], 100),
            capsize=2,
            ecolor="#333333",
        )
    for x, g in zip(xs, groups, strict=True):
        (b, n), tops = g.values, [ci.high for ci in g.cis if ci is not None]
        if b is not None and n is not None:
            text = f"{n - b:+.1f}"
            if g.delta_ci is not None:
                text += f"\n[{g.delta_ci.low:+.0f}, {g.delta_ci.high:+.0f}]"
            ax.annotate(
                text,
                (x, max(b, n, *tops)),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
                fontweight="bold",
            )
    ax.set_xticks(xs, [g[0] for g in groups], fontsize=8)
    ax.set_ylim(0, 125)
    ax.set_yticks(range(0, 101, 20))
    ax.set_ylabel(f"points (0–100); bold: Δ LAD − baseline [paired {CI_LABEL}]", fontsize=8)
    ax.set_title(f"baseline → LAD ({CI_NOTE})\n{_n([base, lad])}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.2), ncol=2)
    only = only_one_side(base, lad)
    side.axis("off")
    side.set_title("tasks verified by one side only", fontsize=10)
    lines = [
        f"LAD only ({len(only['lad'])}):",
        *_listed(only["lad"]),
        "",
        f"baseline only ({len(only['baseline'])}):",
        *_listed(only["baseline"]),
    ]
    side.text(
        0, 1, "\n".join(lines), va="top", fontsize=8, family="monospace", transform=side.transAxes
    )
    return _save(fig, plt, path)


def _listed(tasks: list[str], most: int = 12) -> list[str]:
    return tasks[:most] + ([f"… and {len(tasks) - most} more"] if len(tasks) > most else [])


def only_one_side(base: PlotRun, lad: PlotRun) -> dict[str, list[str]]:
    """The tasks with an accepted attempt in one run and none in the other."""
    solved = {
        side: {o.task for o in run.metrics.per_task if o.accepted_attempts}
        for side, run in (("baseline", base), ("lad", lad))
    }
    return {
        "baseline": sorted(solved["baseline"] - solved["lad"]),
        "lad": sorted(solved["lad"] - solved["baseline"]),
    }


def pass_at_k_curve(runs: Sequence[PlotRun], path: Path) -> Path:
    """pass@1..K of each run with more than one attempt per task, with its interval band."""
    plt = _pyplot()
    shown = [r for r in runs if len(r.metrics.pass_at_k) > 1]
    k_max = max((len(r.metrics.pass_at_k) for r in shown), default=1)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.6 * k_max + 4), 4.2))
    colors = dict(zip((r.name for r in runs), _colors(runs), strict=True))
    for run in shown:
        ks = list(run.metrics.pass_at_k)
        values = [run.metrics.pass_at_k[k] for k in ks]
        color = colors[run.name]
        ax.plot(ks, values, marker="o", color=color, label=run.name)
        cis = [run.metrics.pass_at_k_ci.get(k) for k in ks]
        if all(ci is not None for ci in cis):
            ax.fill_between(
                ks,
                [ci.low for ci in cis if ci],
                [ci.high for ci in cis if ci],
                color=color,
                alpha=0.18,
                linewidth=0,
            )
        if len(shown) <= 3:
            for k, v in zip(ks, values, strict=True):
                ax.annotate(
                    f"{v:.1f}",
                    (k, v),
                    xytext=(0, 6),
                    textcoords="offset points",
                    ha="center",
                    fontsize=7,
                )
    ax.set_xticks(range(1, k_max + 1))
    ax.set_xlim(0.7, k_max + 0.3)
    ax.set_ylim(0, 105)
    ax.set_xlabel("k (attempts drawn per task)")
    ax.set_ylabel("pass@k (% of tasks, unbiased estimator)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(f"pass@k (band: {CI_LABEL}, bootstrap over tasks)\n{_n(shown)}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, plt, path)


# Tol's colour-blind-safe colours; the marks serve print and readers who cannot tell them apart.
OUTCOME_STYLE: dict[str, tuple[str, str]] = {
    "verified": ("#228833", "✓"),
    "partly verified": ("#99ddaa", ""),  # the cell shows "k/K"
    "not verified": ("#ee6677", "✗"),
    "timed out": ("#ccbb44", "T"),
    "error": ("#aa3377", "E"),
    "no result": ("#dddddd", "—"),
    "not in suite": ("#ffffff", ""),
}


@dataclass(frozen=True, slots=True)
class GridRow:
    task: str
    field: str
    difficulty: int


@dataclass(frozen=True, slots=True)
class OutcomeGrid:
    """Tasks × attempts or runs: each cell a status (OUTCOME_STYLE's keys) and ``k/K`` verified."""

    rows: list[GridRow]
    columns: list[str]
    status: list[list[str]]
    counts: list[list[str]]


def outcome_grid(runs: Sequence[PlotRun]) -> OutcomeGrid:
    """A column per attempt of one run, or per run; a row per task of any run's suite."""
    seen: dict[str, GridRow] = {}
    for r in runs:
        for t in r.metrics.scored:
            seen.setdefault(t.task, GridRow(t.task, t.field, t.difficulty))
    rows = sorted(seen.values(), key=lambda g: (g.field, g.difficulty, g.task))
    by_task = [{o.task: o for o in r.metrics.per_task} for r in runs]
    suites = [{t.task for t in r.metrics.scored} for r in runs]
    if len(runs) == 1:
        k_max = runs[0].metrics.max_attempts or 1
        columns = [f"attempt {k}" for k in range(1, k_max + 1)]
        status = []
        for g in rows:
            o = by_task[0].get(g.task)
            status.append(
                [
                    str(o.statuses.get(k, "no result")) if o else "no result"
                    for k in range(1, k_max + 1)
                ]
            )
        return OutcomeGrid(rows, columns, status, [[""] * k_max for _ in rows])
    status, counts = [], []
    for g in rows:
        row_s: list[str] = []
        row_c: list[str] = []
        for outcomes, suite in zip(by_task, suites, strict=True):
            o = outcomes.get(g.task)
            attempts = [] if o is None else list(o.statuses.values())
            row_s.append(task_status(attempts) if g.task in suite else "not in suite")
            several = o is not None and o.attempts > 1
            row_c.append(f"{o.accepted_attempts}/{o.attempts}" if o and several else "")
        status.append(row_s)
        counts.append(row_c)
    return OutcomeGrid(rows, [r.name for r in runs], status, counts)


def task_outcomes(runs: Sequence[PlotRun], path: Path) -> Path:
    """The outcome grid as a heat map, fields set apart with their Σ difficulty."""
    plt = _pyplot()
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    grid = outcome_grid(runs)
    kinds = list(OUTCOME_STYLE)
    n_rows, n_cols = len(grid.rows), len(grid.columns)
    label_size = 8 if n_rows <= 40 else 7
    names = ["\n".join(textwrap.wrap(c, 16)[:3]) for c in grid.columns]
    header = 0.16 * max(c.count("\n") + 1 for c in names)
    column = 0.75 if len(runs) == 1 else 1.15
    fig, ax = plt.subplots(figsize=(column * n_cols + 3.2, 0.24 * n_rows + 2.4 + header))
    codes = [[kinds.index(s) for s in row] for row in grid.status]
    ax.imshow(
        codes,
        cmap=ListedColormap([OUTCOME_STYLE[k][0] for k in kinds]),
        vmin=-0.5,
        vmax=len(kinds) - 0.5,
        aspect="auto",
        interpolation="nearest",
    )
    for i, (row_s, row_c) in enumerate(zip(grid.status, grid.counts, strict=True)):
        for j, (st, count) in enumerate(zip(row_s, row_c, strict=True)):
            mark = count or OUTCOME_STYLE[st][1]
            dark = st in ("verified", "error")
            ax.text(
                j,
                i,
                mark,
                ha="center",
                va="center",
                fontsize=label_size,
                color="white" if dark else "#222222",
            )
    ax.set_xticks([x - 0.5 for x in range(1, n_cols)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, n_rows)], minor=True)
    ax.grid(which="minor", color="white", linewidth=1)
    ax.tick_params(which="minor", length=0)
    ax.xaxis.tick_top()
    ax.set_xticks(range(n_cols), names, fontsize=8)
    ax.set_yticks(
        range(n_rows), [f"{g.task} (d {g.difficulty})" for g in grid.rows], fontsize=label_size
    )
    plot_runs = list(runs)
    start = 0
    for i in range(1, n_rows + 1):
        if i < n_rows and grid.rows[i].field == grid.rows[start].field:
            continue
        if i < n_rows:
            ax.axhline(i - 0.5, color="#222222", linewidth=1.2)
        ax.text(
            n_cols - 0.5 + 0.08,
            (start + i - 1) / 2,
            field_label(grid.rows[start].field, plot_runs),
            va="center",
            ha="left",
            fontsize=8,
            clip_on=False,
        )
        start = i
    ax.set_ylabel("task (d = difficulty)")
    if len(runs) > 1:  # the attempts' columns say "attempt k" themselves
        ax.set_xlabel("run")
        ax.xaxis.set_label_position("top")
    present = {s for row in grid.status for s in row}
    tally = {k: sum(row.count(k) for row in grid.status) for k in kinds}
    handles = [
        Patch(
            facecolor=OUTCOME_STYLE[k][0],
            edgecolor="#999999",
            label=f"{OUTCOME_STYLE[k][1] or 'k/K'} {k} ({tally[k]})",
        )
        for k in kinds
        if k in present
    ]
    several = any(c for row in grid.counts for c in row)
    caption = (
        "a cell: one run's attempts at the task, k/K verified; colour: all verified,\n"
        "some, or none (then the gravest failure: error, timed out, not verified)"
    )
    ax.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(0, -0.02 * 30 / max(n_rows, 8)),
        ncol=min(3, len(handles)),
        fontsize=8,
        frameon=False,
        title=caption if several else None,
        title_fontsize=8,
        alignment="left",
    )
    ax.set_title(f"outcome per task ({_n(runs)})", fontsize=10)
    return _save(fig, plt, path)


def run_plots(runs: Sequence[PlotRun], out: Path, *, board: bool = False) -> list[Path]:
    paths = [
        score_completion(runs, out / "score_completion.png"),
        cost_per_point(runs, out / "cost_per_point.png"),
        fields_radar(runs, out / "fields_radar.png"),
        task_outcomes(runs, out / "task_outcomes.png"),
    ]
    if any(len(r.metrics.pass_at_k) > 1 for r in runs):
        paths.append(pass_at_k_curve(runs, out / "pass_at_k.png"))
    if board:
        paths.append(leaderboard(runs, out / "leaderboard.png"))
    return paths
