"""`leanrig report LEDGER.jsonl`: where proof-step time goes (``report.md``, ``.json``, PNGs)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from lsp_bridge import LeanrigError

from ..sessions import LEDGER_SCHEMA
from .jsonl import LinesRead, records

PHASES = ("total_ms", "queue_ms", "lean_ms", "overhead_ms")


class ReportError(LeanrigError):
    hint = "pass a ledger written by `leanrig serve` (runs/<timestamp>/ledger.jsonl)"


@dataclass(slots=True)
class LedgerRead(LinesRead):
    entries: list[dict[str, Any]] = field(default_factory=list)

    def notes(self) -> list[str]:
        return self.skip_notes("ledger")


def read_ledger(path: Path) -> LedgerRead:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ReportError(f"no such ledger: {path}") from None
    read = LedgerRead()
    for entry in records(data, LEDGER_SCHEMA, read):
        if "tool" in entry:
            read.entries.append(entry)
        else:
            read.skipped_invalid += 1
    return read


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): the smallest value with at least q% at or below."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 2),
        "p95": round(percentile(values, 95), 2),
        "max": round(max(values), 2),
    }


def summarize(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    entries_list = list(entries)
    by_tool: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    sessions: dict[str, dict[str, Any]] = {}
    tasks: dict[str, list[float]] = defaultdict(list)
    steps: list[dict[str, Any]] = []
    refused: dict[str, int] = defaultdict(int)
    for e in entries_list:
        total = float(e.get("total_ms", 0.0))
        queue = float(e.get("queue_ms", 0.0))
        lean = float(e.get("lean_ms", 0.0))
        phases = {
            "total_ms": total,
            "queue_ms": queue,
            "lean_ms": lean,
            "overhead_ms": max(0.0, total - queue - lean),
        }
        if _refused(e):
            refused[e["tool"]] += 1
        else:
            for name, value in phases.items():
                by_tool[e["tool"]][name].append(value)
        sid = e.get("session")
        if sid:
            s = sessions.setdefault(sid, {"task": e.get("task"), "calls": 0, "busy_ms": 0.0})
            s["calls"] += 1
            s["busy_ms"] = round(s["busy_ms"] + total, 2)
            if "session_wall_ms" in e:
                s["wall_ms"] = e["session_wall_ms"]  # a resumed human attempt: its last
        steps.append(
            {
                "tool": e["tool"],
                "task": e.get("task"),
                "session": sid,
                "total_ms": total,
                "body_sha": e.get("body_sha"),
                "ts": e.get("ts"),
                "outcome": e.get("outcome"),
            }
        )
    for s in sessions.values():
        if "wall_ms" in s and s["task"] is not None:
            tasks[str(s["task"])].append(float(s["wall_ms"]))
    tools = {
        tool: {"count": len(ph["total_ms"]), **{name: _stats(ph[name]) for name in PHASES}}
        for tool, ph in sorted(by_tool.items())
    }
    return {
        "tools": tools,
        "refused": dict(sorted(refused.items())),
        "sessions": sessions,
        "tasks": {
            t: {"invocations": len(v), "wall_ms": _stats(v)} for t, v in sorted(tasks.items())
        },
        "slowest": sorted(steps, key=lambda s: -s["total_ms"])[:10],
        "benchmark": benchmark_metrics(entries_list),
    }


def _refused(entry: dict[str, Any]) -> bool:
    """A call refused before Lean ran: counted apart, so it does not skew the latency figures."""
    outcome = entry.get("outcome")
    if entry.get("lean_ms"):
        return False
    # `busy` after a wait queued for a Lean slot: its time is the caller's.
    return outcome in REFUSED or (outcome == "error:busy" and not entry.get("queue_ms"))


# Outcomes of calls refused before reaching Lean; timeouts and crashes cost the caller time.
REFUSED = frozenset(
    {"rejected", "error:invalid_argument", "error:unknown_session", "error:unknown_task"}
)


def _ts(entry: dict[str, Any]) -> float | None:
    try:
        return datetime.fromisoformat(str(entry["ts"])).timestamp()
    except (KeyError, ValueError):
        return None


def benchmark_metrics(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Time-cost figures of a ledger; not the score (a ledger knows no difficulties or suite)."""
    sessions: dict[str, dict[str, Any]] = {}
    for e in entries:
        sid = e.get("session")
        if not sid:
            continue
        s = sessions.setdefault(
            sid,
            {
                "task": e.get("task"),
                "first": None,
                "last": None,
                "wall_ms": None,
                "accepted_at": None,
            },
        )
        ts = _ts(e)
        if ts is not None:
            s["first"] = ts if s["first"] is None else min(s["first"], ts)
            s["last"] = ts if s["last"] is None else max(s["last"], ts)
        if "session_wall_ms" in e:
            s["wall_ms"] = float(e["session_wall_ms"])
        if (
            e.get("tool") == "check_proof"
            and e.get("accepted") is True
            and s["accepted_at"] is None
        ):
            s["accepted_at"] = ts
    tasks: dict[str, dict[str, Any]] = {}
    total_wall_s = 0.0
    for s in sessions.values():
        if s["task"] is None:  # calls outside a task's session
            continue
        wall_s = (
            (s["wall_ms"] or 0.0) / 1000
            if s["wall_ms"] is not None
            else (
                (s["last"] - s["first"])
                if s["first"] is not None and s["last"] is not None
                else 0.0
            )
        )
        total_wall_s += wall_s
        t = tasks.setdefault(
            str(s["task"]),
            {"sessions": 0, "wall_s": 0.0, "accepted": False, "time_to_accept_s": None},
        )
        t["sessions"] += 1
        t["wall_s"] = round(t["wall_s"] + wall_s, 3)
        if s["accepted_at"] is not None and s["first"] is not None:
            t["accepted"] = True
            tta = round(s["accepted_at"] - s["first"], 3)
            if t["time_to_accept_s"] is None or tta < t["time_to_accept_s"]:
                t["time_to_accept_s"] = tta
    accepted = sum(1 for t in tasks.values() if t["accepted"])
    return {
        "attempted": len(tasks),
        "accepted": accepted,
        "accepted_share": round(accepted / len(tasks), 4) if tasks else 0.0,
        "wall_s": round(total_wall_s, 3),
        "seconds_per_accepted_task": round(total_wall_s / accepted, 3) if accepted else None,
        "tasks": dict(sorted(tasks.items())),
    }


def render_markdown(summary: dict[str, Any], notes: list[str], source: Path) -> str:
    out = ["# leanrig ledger report", "", f"source: `{source}`", ""]
    out += [f"> note: {n}" for n in notes] + ([""] if notes else [])
    b = summary["benchmark"]
    spa = b["seconds_per_accepted_task"]
    out += [
        "## Tasks",
        "",
        f"accepted {b['accepted']} of {b['attempted']} tasks attempted "
        f"({b['accepted_share']:.1%}); invocation wall-clock {b['wall_s']:.1f} s; "
        f"seconds per accepted task: {spa if spa is not None else '—'}. The benchmark's "
        "score (difficulty-weighted over the suite) and seconds per score point are in "
        "`leanrig report RUN_DIR` of a `leanrig run`.",
        "",
        "| task | sessions | accepted | time to accept s | wall s |",
        "|---|---:|---|---:|---:|",
    ]
    for task, t in b["tasks"].items():
        tta = t["time_to_accept_s"] if t["time_to_accept_s"] is not None else "—"
        accepted = "yes" if t["accepted"] else "no"
        out.append(f"| {task} | {t['sessions']} | {accepted} | {tta} | {t['wall_s']} |")
    out.append("")
    out += [
        "## Per tool (ms)",
        "",
        "| tool | n | total med | total p95 | total max | queue med | lean med "
        "| overhead med | overhead p95 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for tool, s in summary["tools"].items():
        out.append(
            f"| {tool} | {s['count']} | {s['total_ms']['median']} | {s['total_ms']['p95']} | "
            f"{s['total_ms']['max']} | {s['queue_ms']['median']} | {s['lean_ms']['median']} | "
            f"{s['overhead_ms']['median']} | {s['overhead_ms']['p95']} |"
        )
    if summary["refused"]:
        refused = ", ".join(f"{tool} {n}" for tool, n in summary["refused"].items())
        out += [
            "",
            "Refused before Lean ran (rejected edits, invalid arguments, unknown "
            f"sessions; not in the times above): {refused}.",
        ]
    out += [
        "",
        "## Per task: invocation wall-clock (open → close, ms)",
        "",
        "| task | invocations | median | p95 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for task, t in summary["tasks"].items():
        w = t["wall_ms"]
        out.append(f"| {task} | {t['invocations']} | {w['median']} | {w['p95']} | {w['max']} |")
    out += [
        "",
        "## Per session",
        "",
        "| session | task | calls | busy ms | wall ms |",
        "|---|---|---:|---:|---:|",
    ]
    for sid, s in summary["sessions"].items():
        out.append(
            f"| {sid} | {s['task'] or '—'} | {s['calls']} | {s['busy_ms']} | "
            f"{s.get('wall_ms', '—')} |"
        )
    out += [
        "",
        "## Slowest steps",
        "",
        "| total ms | tool | task | body sha | outcome |",
        "|---:|---|---|---|---|",
    ]
    for st in summary["slowest"]:
        out.append(
            f"| {st['total_ms']:.1f} | {st['tool']} | {st['task'] or '—'} | "
            f"{st['body_sha'] or '—'} | {st['outcome']} |"
        )
    return "\n".join(out) + "\n"


def render_plots(summary: dict[str, Any], entries: list[dict[str, Any]], out: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ReportError("matplotlib is not installed", hint="run `make setup`") from exc
    paths = []
    tools = list(summary["tools"])
    fig, ax = plt.subplots(figsize=(8, 4))
    data = [
        [float(e.get("total_ms", 0.0)) for e in entries if e["tool"] == t and not _refused(e)]
        for t in tools
    ]
    ax.boxplot(data, tick_labels=tools, showfliers=True)
    ax.set_yscale("log")
    ax.set_ylabel("total ms (log)")
    ax.set_title("latency distribution per tool")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    path = out / "latency_per_tool.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)

    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = [0.0] * len(tools)
    for phase, color in (("queue_ms", "#c44"), ("lean_ms", "#48c"), ("overhead_ms", "#aaa")):
        values = [summary["tools"][t][phase]["median"] for t in tools]
        ax.bar(tools, values, bottom=bottom, label=phase.removesuffix("_ms"), color=color)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_ylabel("median ms")
    ax.set_title("where the time goes (median per tool)")
    ax.legend()
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    path = out / "time_breakdown.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    return paths


def write_ledger_report(ledger: Path, out: Path, *, plots: bool = True) -> dict[str, Any]:
    read = read_ledger(ledger)
    if not read.entries:
        why = "; ".join(read.notes()) or "the file is empty"
        raise ReportError(f"{ledger} has no usable ledger entries ({why})")
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(read.entries)
    summary["notes"] = read.notes()
    (out / "report.md").write_text(render_markdown(summary, read.notes(), ledger))
    (out / "report.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    if plots:
        summary["plots"] = [str(p) for p in render_plots(summary, read.entries, out)]
    return summary
