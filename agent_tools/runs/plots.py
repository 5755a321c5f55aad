"""matplotlib figures of benchmark runs (Agg backend, PNG): score and completion bars,
cost-per-point bars, a radar of field scores (baseline filled, LAD dashed), a leaderboard."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ledger_report import ReportError
from .metrics import RunMetrics, per_point_text
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


PALETTE = ["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb",
           "#ee7733", "#332288", "#999933", "#882255", "#44aa99"]  # fmt: skip


def _colors(runs: Sequence[PlotRun]) -> list[str]:
    """One colour per condition when the conditions tell the runs apart, else one per run."""
    conditions = [r.condition for r in runs]
    if len(set(conditions)) == len(conditions):
        return [COLORS.get(c, PALETTE[i % len(PALETTE)]) for i, c in enumerate(conditions)]
    return [PALETTE[i % len(PALETTE)] for i in range(len(runs))]


def _n(runs: Sequence[PlotRun]) -> str:
    """How many tasks and attempts the figure rests on, for its title."""
    sizes = sorted({(r.metrics.tasks, r.metrics.attempts) for r in runs})
    return "; ".join(f"n = {t} tasks, {a} attempts" for t, a in sizes)


def _save(fig: Any, plt: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def score_completion(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7.0, 1.2 * len(runs) + 5), 4))
    width = 0.8 / len(runs)
    colors = _colors(runs)
    for i, run in enumerate(runs):
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(2)]
        values = [run.metrics.score, run.metrics.completion]
        bars = ax.bar(xs, values, width, label=run.name, color=colors[i])
        ax.bar_label(bars, labels=[f"{v:.1f}" for v in values], fontsize=8)
    ax.set_xticks([0, 1], ["score", "completion %"])
    ax.set_ylim(0, 105)
    ax.set_ylabel("points (0–100)")
    ax.set_title(f"score and completion\n{_n(runs)}", fontsize=10)
    # Beside the axes: inside, the legend covered a bar.
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig, plt, path)


def cost_per_point(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(max(7.0, 1.4 * len(runs) + 4), 4))
    for ax, key, title, unit in (
        (axes[0], "usd_per_point", "USD per score point", "USD"),
        (axes[1], "seconds_per_point", "seconds per score point", "seconds"),
    ):
        names = [r.name for r in runs]
        values = [getattr(r.metrics, key) for r in runs]
        ax.set_title(f"{title}\n{_n(runs)}", fontsize=10)
        if all(v is None for v in values):  # an empty panel says why instead
            why = "no run has a known cost" if unit == "USD" else "no run scored a point"
            ax.text(0.5, 0.5, f"N/A: {why}", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        heights = [v if v is not None else 0.0 for v in values]
        bars = ax.bar(names, heights, color=_colors(runs))
        text = fmt_usd if unit == "USD" else per_point_text
        ax.bar_label(bars, labels=[text(v) for v in values], fontsize=8)
        ax.set_ylabel(f"{unit} per point")
        plt.setp(ax.get_xticklabels(), rotation=20, ha="right", fontsize=8)
    return _save(fig, plt, path)


def fields_radar(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    names = list(dict.fromkeys(f for r in runs for f in r.metrics.fields))
    if len(names) < 3:  # a radar needs three axes; pad with blanks
        names += [""] * (3 - len(names))
    angles = [2 * math.pi * i / len(names) for i in range(len(names))]
    fig, ax = plt.subplots(figsize=(5.5, 5.5), subplot_kw={"polar": True})
    colors = _colors(runs)
    for i, run in enumerate(runs):
        values = [run.metrics.fields.get(f, 0.0) if f else 0.0 for f in names]
        closed_a, closed_v = [*angles, angles[0]], [*values, values[0]]
        color = colors[i]
        if run.condition == "baseline":
            ax.plot(closed_a, closed_v, color=color, linewidth=1.5, label=run.name)
            ax.fill(closed_a, closed_v, color=color, alpha=0.25)
        else:
            style = "--" if run.condition == "lad" else ":"
            ax.plot(closed_a, closed_v, style, color=color, linewidth=2, label=run.name)
    ax.set_xticks(angles, names)
    ax.set_ylim(0, 100)
    ax.set_title("field scores")
    ax.legend(loc="lower right", bbox_to_anchor=(1.25, -0.1), fontsize=8)
    return _save(fig, plt, path)


def leaderboard(runs: Sequence[PlotRun], path: Path) -> Path:
    plt = _pyplot()
    ordered = sorted(runs, key=lambda r: r.metrics.score)
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(runs) + 1.5))
    colors = [COLORS.get(r.condition, "#999999") for r in ordered]
    bars = ax.barh([r.name for r in ordered], [r.metrics.score for r in ordered], color=colors)

    def label(m: RunMetrics) -> str:
        usd = "cost N/A" if m.usd_per_point is None else f"{fmt_usd(m.usd_per_point)}/pt"
        sec = "N/A" if m.seconds_per_point is None else f"{per_point_text(m.seconds_per_point)}"
        return f"{m.score:.1f}  ({m.completion:.1f}% done, {usd}, {sec} s/pt)"

    ax.bar_label(bars, labels=[label(r.metrics) for r in ordered], fontsize=8, padding=3)
    # The score runs 0-100; the room to the right is for the labels only.
    ax.set_xlim(0, 185)
    ax.set_xticks(range(0, 101, 20))
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_xlabel("score (0–100)")
    ax.set_title(f"leaderboard ({_n(runs)})", fontsize=10)
    return _save(fig, plt, path)


def comparison(base: PlotRun, lad: PlotRun, path: Path) -> Path:
    """What changed from the baseline to LAD: each field's score side by side with its Δ
    points and denominator, the score and completion likewise, and the tasks that only one
    condition verified."""
    plt = _pyplot()
    fields = list(dict.fromkeys([*base.metrics.fields, *lad.metrics.fields]))
    dens = {**lad.metrics.field_denominators, **base.metrics.field_denominators}
    groups = [("score", base.metrics.score, lad.metrics.score),
              ("completion %", base.metrics.completion, lad.metrics.completion),
              *((f"{f or '—'}\n(Σd = {dens.get(f, '?')})", base.metrics.fields.get(f),
                 lad.metrics.fields.get(f)) for f in fields)]  # fmt: skip
    fig, (ax, side) = plt.subplots(
        1, 2, figsize=(max(8.0, 1.1 * len(groups) + 5), 4.5), width_ratios=[3, 1]
    )
    xs = list(range(len(groups)))
    for offset, run, values in ((-0.2, base, [g[1] for g in groups]),
                                (0.2, lad, [g[2] for g in groups])):  # fmt: skip
        ax.bar([x + offset for x in xs], [v or 0.0 for v in values], 0.4, label=run.name,
               color=COLORS.get(run.condition, "#999999"))  # fmt: skip
    for x, (_, b, n) in zip(xs, groups, strict=True):
        if b is not None and n is not None:
            ax.annotate(f"{n - b:+.1f}", (x, max(b, n) + 2), ha="center", fontsize=8,
                        fontweight="bold")  # fmt: skip
    ax.set_xticks(xs, [g[0] for g in groups], fontsize=8)
    ax.set_ylim(0, 112)
    ax.set_ylabel("points (0–100); bold: Δ LAD − baseline")
    ax.set_title(f"baseline → LAD\n{_n([base, lad])}", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.18), ncol=2)
    only = only_one_side(base, lad)
    side.axis("off")
    side.set_title("tasks verified by one side only", fontsize=10)
    lines = [f"LAD only ({len(only['lad'])}):", *only["lad"][:12], "",
             f"baseline only ({len(only['baseline'])}):", *only["baseline"][:12]]  # fmt: skip
    side.text(0, 1, "\n".join(lines), va="top", fontsize=8, family="monospace",
              transform=side.transAxes)  # fmt: skip
    return _save(fig, plt, path)


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


def run_plots(runs: Sequence[PlotRun], out: Path, *, board: bool = False) -> list[Path]:
    paths = [
        score_completion(runs, out / "score_completion.png"),
        cost_per_point(runs, out / "cost_per_point.png"),
        fields_radar(runs, out / "fields_radar.png"),
    ]
    if board:
        paths.append(leaderboard(runs, out / "leaderboard.png"))
    return paths
