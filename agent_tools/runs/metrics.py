"""A run's metrics: pure functions of its results lines (docs/runs.md); percentages 0–100."""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, Literal

from .prices import PriceSchedule, attempt_cost
from .results import AttemptResult, TaskRef

TOKEN_KINDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens")

CI_LEVEL: Final = 0.95
BOOTSTRAP_RESAMPLES: Final = 2000
BOOTSTRAP_SEED: Final = 0
CI_LABEL: Final = f"{100 * CI_LEVEL:g} % CI"
CI_METHOD: Final = (
    f"{100 * CI_LEVEL:g} % percentile bootstrap over tasks, {BOOTSTRAP_RESAMPLES} resamples, "
    f"seed {BOOTSTRAP_SEED}"
)

AttemptStatus = Literal["verified", "not verified", "timed out", "error"]
TaskStatus = Literal[
    "verified", "partly verified", "not verified", "timed out", "error", "no result"
]


def weighted_score(difficulties: Sequence[int], verdicts: Sequence[float]) -> float:
    """100 · Σ d_i v_i / Σ d_i, with v_i in [0, 1]; 0 for an empty set of tasks."""
    total = sum(difficulties)
    if total == 0:
        return 0.0
    return 100 * sum(d * v for d, v in zip(difficulties, verdicts, strict=True)) / total


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with c verified out of n attempts (Chen et al. 2021), 0..1."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def per_point(mean_value: float | None, score: float) -> float | None:
    """A mean cost divided by a score; None (N/A) when either is unavailable or the score is 0."""
    if mean_value is None or score == 0:
        return None
    return mean_value / score


def per_point_text(value: float | None) -> str:
    """A per-point figure as printed: three significant digits, no exponent; N/A when unknown."""
    if value is None:
        return "N/A"
    if value == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:.{digits}f}"


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence interval; ``high`` is ``inf`` when resamples scored 0 (per-point figures)."""

    low: float
    high: float


@functools.lru_cache(maxsize=8)
def _resamples(n: int, resamples: int, seed: int) -> tuple[tuple[int, ...], ...]:
    """Index draws of n out of n with replacement; cached so a run's intervals share them."""
    rng = random.Random(seed)
    return tuple(tuple(rng.choices(range(n), k=n)) for _ in range(resamples))


def _quantile(ordered: Sequence[float], p: float) -> float:
    """The ``p`` quantile of sorted values, interpolated linearly (numpy's default)."""
    h = (len(ordered) - 1) * p
    i = math.floor(h)
    lo, hi = ordered[i], ordered[min(i + 1, len(ordered) - 1)]
    if lo == hi or h == i:  # also keeps inf − inf out
        return lo
    return lo + (hi - lo) * (h - i)


def _interval(drawn: Iterable[float], estimate: float, level: float) -> Interval | None:
    """The percentile interval of the resamples' figures (nan ones left out), widened to hold
    the estimate; None when no figure or a nan estimate."""
    values = sorted(v for v in drawn if not math.isnan(v))
    if not values or math.isnan(estimate):
        return None
    alpha = (1 - level) / 2
    low, high = _quantile(values, alpha), _quantile(values, 1 - alpha)
    return Interval(min(low, estimate), max(high, estimate))


def score_of(rows: Sequence[tuple[int, float]]) -> float:
    return weighted_score([d for d, _ in rows], [v for _, v in rows])


def _scores_drawn(rows: Sequence[tuple[int, float]], draws: Iterable[Sequence[int]]) -> list[float]:
    """`score_of` of each drawn resample of ``rows``: the same sums in the same order as
    `weighted_score`'s, of products computed once (a report computes 2,000 per interval)."""
    weights = [d for d, _ in rows]
    products = [d * v for d, v in rows]
    scores = []
    for idx in draws:
        total = sum(map(weights.__getitem__, idx))
        scores.append(100 * sum(map(products.__getitem__, idx)) / total if total else 0.0)
    return scores


def score_interval(
    rows: Sequence[tuple[int, float]],
    *,
    level: float = CI_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """The seeded percentile bootstrap interval of the score over ``rows`` of (difficulty,
    verdict), one per task; None with fewer than two rows."""
    if len(rows) < 2:
        return None
    draws = _resamples(len(rows), resamples, seed)
    return _interval(_scores_drawn(rows, draws), score_of(rows), level)


def paired_delta_interval(
    rows: Sequence[tuple[int, float, int, float]],
    *,
    level: float = CI_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """The paired interval of Δ score over rows of (base d, base v, new d, new v), one per task."""
    if len(rows) < 2:
        return None
    draws = _resamples(len(rows), resamples, seed)
    base, new = [(r[0], r[1]) for r in rows], [(r[2], r[3]) for r in rows]
    drawn = map(operator.sub, _scores_drawn(new, draws), _scores_drawn(base, draws))
    return _interval(drawn, score_of(new) - score_of(base), level)


def per_point_interval(
    rows: Sequence[tuple[int, float, float | None]],
    *,
    level: float = CI_LEVEL,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """The interval of a cost per point over rows of (difficulty, verdict, cost or None): each
    resample's mean known cost (seconds, USD) over its score; inf where a resample scores 0."""
    if len(rows) < 2:
        return None
    draws = _resamples(len(rows), resamples, seed)
    costs = [c for _, _, c in rows]
    scored = [(d, v) for d, v, _ in rows]
    drawn = [
        _per_point_of([c for c in map(costs.__getitem__, idx) if c is not None], score)
        for idx, score in zip(draws, _scores_drawn(scored, draws), strict=True)
    ]
    estimate = _per_point_of([c for c in costs if c is not None], score_of(scored))
    return _interval(drawn, estimate, level)


def _per_point_of(costs: Sequence[float], score: float) -> float:
    if not costs:
        return math.nan
    return math.inf if score == 0 else sum(costs) / len(costs) / score


def attempt_status(r: AttemptResult) -> AttemptStatus:
    """Verified, else timed out, else error (infrastructure), else not verified; exit code aside."""
    if r.accepted:
        return "verified"
    if r.timed_out:
        return "timed out"
    if any(x.startswith("infrastructure:") for x in r.reasons):
        return "error"
    return "not verified"


def task_status(statuses: Sequence[str]) -> TaskStatus:
    """A task's attempts in one word: all or some verified, else the gravest failure."""
    if not statuses:
        return "no result"
    verified = sum(s == "verified" for s in statuses)
    if verified == len(statuses):
        return "verified"
    if verified:
        return "partly verified"
    for worst in ("error", "timed out"):
        if worst in statuses:
            return worst
    return "not verified"


def relative_change(base: float | None, new: float | None) -> float | None:
    """(new − base) / base in percent; None when either is N/A or the base is 0."""
    if base is None or new is None or base == 0:
        return None
    return 100 * (new - base) / base


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    task: str
    field: str
    difficulty: int
    attempts: int
    accepted_attempts: int
    first_attempt_accepted: bool
    verdict: float  # v_i: the fraction of attempts verified
    invocation_s: float | None  # mean over attempts
    cost_usd: float | None  # mean over attempts; None unless every attempt's cost is known
    cost_source: str | None  # observed | list_price | mixed
    input_tokens: int | None  # sums over attempts; None unless every attempt reported them
    cached_input_tokens: int | None
    output_tokens: int | None
    reasoning_tokens: int | None = None
    # Means per attempt of the time split; model is None without a gateway.
    model_s: float | None = None
    lean_s: float | None = None
    other_s: float | None = None
    usage_mismatches: list[str] = dataclasses.field(default_factory=list)
    statuses: dict[int, AttemptStatus] = dataclasses.field(default_factory=dict)  # by attempt


@dataclass(frozen=True, slots=True)
class ScoredTask:
    """A task as the score counts it: one of the suite's without results has verdict 0."""

    task: str
    field: str
    difficulty: int
    verdict: float


def time_split(r: AttemptResult) -> tuple[float | None, float, float | None]:
    """(model s, Lean s, rest) of one attempt; rest is None without model time, never < 0."""
    if r.model_s is None:
        return None, r.lean_s, None
    return r.model_s, r.lean_s, max(0.0, r.invocation_s - r.model_s - r.lean_s)


@dataclass(frozen=True, slots=True)
class RunMetrics:
    score: float
    completion: float
    fields: dict[str, float]
    field_denominators: dict[str, int]
    seconds_per_point: float | None
    usd_per_point: float | None
    tasks: int
    accepted: int
    attempts: int
    accepted_attempts: int
    accepted_after_timeout: int
    timed_out: int
    infra_retries: int
    pass_at_k: dict[int, float]
    first_attempt_acceptance: float | None
    coverage: float
    mean_invocation_s: float | None
    mean_usd: float | None
    cost_tasks: int
    cost_score: float | None
    cost_sources: dict[str, int]
    tokens: dict[str, dict[str, int | None]]
    missing_tasks: list[str]
    per_task: list[TaskOutcome] = field(default_factory=list)
    unlisted_tasks: list[str] = field(default_factory=list)  # results of tasks not in run.json
    # Means per task of the time split (TaskOutcome); model and rest over the tasks that know.
    mean_model_s: float | None = None
    mean_lean_s: float | None = None
    mean_other_s: float | None = None
    scored: list[ScoredTask] = field(default_factory=list)  # every task of the suite
    # 95 % intervals (CI_METHOD); None where fewer than two tasks count.
    score_ci: Interval | None = None
    completion_ci: Interval | None = None
    field_cis: dict[str, Interval | None] = field(default_factory=dict)
    pass_at_k_ci: dict[int, Interval | None] = field(default_factory=dict)
    seconds_per_point_ci: Interval | None = None
    usd_per_point_ci: Interval | None = None

    @property
    def max_attempts(self) -> int:
        """The most attempts any task had (the per-attempt columns of an outcome view)."""
        return max((k for o in self.per_task for k in o.statuses), default=0)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["scored"]  # per_task and missing_tasks say it
        out["pass_at_k"] = {str(k): v for k, v in self.pass_at_k.items()}
        out["pass_at_k_ci"] = {str(k): out["pass_at_k_ci"][k] for k in self.pass_at_k_ci}
        out["interval_method"] = CI_METHOD
        return out


def _sum_known(values: Iterable[int | None]) -> int | None:
    vs = list(values)
    if not vs or any(v is None for v in vs):
        return None
    return sum(v for v in vs if v is not None)


def task_outcomes(
    results: Iterable[AttemptResult],
    *,
    prices: PriceSchedule | None = None,
    model: str | None = None,
) -> list[TaskOutcome]:
    """Per task, in first-seen order. ``model`` prices lines that do not name their model."""
    grouped: dict[str, list[AttemptResult]] = defaultdict(list)
    for r in results:
        grouped[r.task].append(r)
    outcomes = []
    for task, rs in grouped.items():
        rs.sort(key=lambda r: r.attempt)
        costs = [
            attempt_cost(
                cost_usd=r.cost_usd,
                model=r.model or model,
                input_tokens=r.input_tokens,
                cached_input_tokens=r.cached_input_tokens,
                output_tokens=r.output_tokens,
                prices=prices,
            )
            for r in rs
        ]
        known = all(c.usd is not None for c in costs)
        sources = {c.source for c in costs}
        accepted = sum(r.accepted for r in rs)
        outcomes.append(
            TaskOutcome(
                task=task,
                field=rs[-1].field,
                difficulty=rs[-1].difficulty,
                attempts=len(rs),
                accepted_attempts=accepted,
                first_attempt_accepted=rs[0].attempt == 1 and rs[0].accepted,
                verdict=accepted / len(rs),
                invocation_s=sum(r.invocation_s for r in rs) / len(rs),
                cost_usd=sum(c.usd or 0.0 for c in costs) / len(rs) if known else None,
                cost_source=(
                    None if not known else sources.pop() if len(sources) == 1 else "mixed"
                ),
                input_tokens=_sum_known(r.input_tokens for r in rs),
                cached_input_tokens=_sum_known(r.cached_input_tokens for r in rs),
                output_tokens=_sum_known(r.output_tokens for r in rs),
                reasoning_tokens=_sum_known(r.reasoning_tokens for r in rs),
                model_s=_mean_known(time_split(r)[0] for r in rs),
                lean_s=sum(r.lean_s for r in rs) / len(rs),
                other_s=_mean_known(time_split(r)[2] for r in rs),
                usage_mismatches=[
                    f"attempt {r.attempt}: {m}" for r in rs for m in r.usage_mismatch
                ],
                statuses={r.attempt: attempt_status(r) for r in rs},
            )
        )
    return outcomes


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _mean_known(values: Iterable[float | None]) -> float | None:
    """The mean, or None unless every value is known."""
    vs = list(values)
    if not vs or any(v is None for v in vs):
        return None
    return sum(v for v in vs if v is not None) / len(vs)


def compute_metrics(
    results: Sequence[AttemptResult],
    *,
    inventory: Sequence[TaskRef] = (),
    prices: PriceSchedule | None = None,
    model: str | None = None,
) -> RunMetrics:
    """All metrics of one run. ``inventory`` (run.json's tasks), when given, is the suite: its
    tasks without results score 0, and results of tasks it does not list count for nothing."""
    unlisted: list[str] = []
    if inventory:
        listed = {t.id: t for t in inventory}
        unlisted = sorted({r.task for r in results if r.task not in listed})
        results = [
            r.model_copy(
                update={"field": listed[r.task].field, "difficulty": listed[r.task].difficulty}
            )
            for r in results
            if r.task in listed
        ]
    outcomes = task_outcomes(results, prices=prices, model=model)
    seen = {o.task for o in outcomes}
    missing = [t for t in inventory if t.id not in seen]
    rows: list[tuple[str, int, float]] = [(o.field, o.difficulty, o.verdict) for o in outcomes]
    rows += [(t.field, t.difficulty, 0.0) for t in missing]
    n_tasks = len(rows)

    score = weighted_score([d for _, d, _ in rows], [v for _, _, v in rows])
    by_field: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for f, d, v in rows:
        by_field[f].append((d, v))
    fields = {
        f: weighted_score([d for d, _ in dv], [v for _, v in dv])
        for f, dv in sorted(by_field.items())
    }
    denominators = {f: sum(d for d, _ in dv) for f, dv in sorted(by_field.items())}
    completion = 100 * sum(v for _, _, v in rows) / n_tasks if n_tasks else 0.0

    timed = [o.invocation_s for o in outcomes if o.invocation_s is not None]
    mean_s = sum(timed) / len(timed) if timed else None

    costed = [o for o in outcomes if o.cost_usd is not None]
    mean_usd = sum(o.cost_usd or 0.0 for o in costed) / len(costed) if costed else None
    cost_score = (
        weighted_score([o.difficulty for o in costed], [o.verdict for o in costed])
        if costed
        else None
    )
    usd_pp = per_point(mean_usd, cost_score) if cost_score is not None else None

    cost_sources: dict[str, int] = defaultdict(int)
    for o in costed:
        cost_sources[o.cost_source or "unknown"] += 1

    k_max = min((o.attempts for o in outcomes), default=0)
    pak = {
        k: 100 * sum(pass_at_k(o.attempts, o.accepted_attempts, k) for o in outcomes) / n_tasks
        for k in range(1, k_max + 1)
    }  # tasks without results count as 0 (they are in n_tasks)
    firsts = sum(o.first_attempt_accepted for o in outcomes)
    first_rate = 100 * firsts / n_tasks if n_tasks else None
    accepted_tasks = sum(o.accepted_attempts > 0 for o in outcomes)

    tokens: dict[str, dict[str, int | None]] = {}
    for kind in TOKEN_KINDS:
        vals = [getattr(o, kind) for o in outcomes if getattr(o, kind) is not None]
        tokens[kind] = {
            "total": sum(vals) if vals else None,
            "tasks_reporting": len(vals),
            "per_task_mean": round(sum(vals) / len(vals)) if vals else None,
        }

    scored = [ScoredTask(o.task, o.field, o.difficulty, o.verdict) for o in outcomes]
    scored += [ScoredTask(t.id, t.field, t.difficulty, 0.0) for t in missing]
    weighted = [(t.difficulty, t.verdict) for t in scored]
    seconds = {o.task: o.invocation_s for o in outcomes}
    timed_rows = [(t.difficulty, t.verdict, seconds.get(t.task)) for t in scored]
    cost_rows = [(o.difficulty, o.verdict, o.cost_usd or 0.0) for o in costed]
    pass_rows = [[pass_at_k(o.attempts, o.accepted_attempts, k) for k in pak] for o in outcomes]
    pass_rows += [[0.0] * len(pak) for _ in missing]

    return RunMetrics(
        score=score,
        completion=completion,
        fields=fields,
        field_denominators=denominators,
        seconds_per_point=per_point(mean_s, score),
        usd_per_point=usd_pp,
        tasks=n_tasks,
        accepted=accepted_tasks,
        attempts=len(results),
        accepted_attempts=sum(r.accepted for r in results),
        accepted_after_timeout=sum(r.accepted and r.timed_out for r in results),
        timed_out=sum(r.timed_out for r in results),
        infra_retries=sum(r.infra_retry for r in results),
        pass_at_k=pak,
        first_attempt_acceptance=first_rate,
        coverage=100 * accepted_tasks / n_tasks if n_tasks else 0.0,
        mean_invocation_s=mean_s,
        mean_usd=mean_usd,
        cost_tasks=len(costed),
        cost_score=cost_score,
        cost_sources=dict(cost_sources),
        tokens=tokens,
        missing_tasks=[t.id for t in missing],
        mean_model_s=_mean([o.model_s for o in outcomes if o.model_s is not None]),
        mean_lean_s=_mean([o.lean_s for o in outcomes if o.lean_s is not None]),
        mean_other_s=_mean([o.other_s for o in outcomes if o.other_s is not None]),
        per_task=outcomes,
        unlisted_tasks=unlisted,
        scored=scored,
        score_ci=score_interval(weighted),
        # A mean in percent is the score with every difficulty 1, figure for figure.
        completion_ci=score_interval([(1, v) for _, v in weighted]),
        field_cis={f: score_interval(by_field[f]) for f in fields},
        pass_at_k_ci={k: score_interval([(1, r[i]) for r in pass_rows]) for i, k in enumerate(pak)},
        seconds_per_point_ci=(
            per_point_interval(timed_rows) if per_point(mean_s, score) is not None else None
        ),
        usd_per_point_ci=per_point_interval(cost_rows) if usd_pp is not None else None,
    )


@dataclass(frozen=True, slots=True)
class Change:
    base: float | None
    new: float | None
    change_percent: float | None  # (new − base) / base · 100


@dataclass(frozen=True, slots=True)
class FieldDiff:
    base: float | None
    new: float | None
    diff_points: float | None  # new − base, in score points


@dataclass(frozen=True, slots=True)
class Comparison:
    score: Change
    completion: Change
    usd_per_point: Change
    seconds_per_point: Change
    fields: dict[str, FieldDiff]
    notes: list[str]
    # Paired bootstrap intervals (CI_METHOD) of the Δ points, over the tasks both runs have.
    shared_tasks: int = 0
    score_delta_ci: Interval | None = None
    completion_delta_ci: Interval | None = None
    field_delta_cis: dict[str, Interval | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _change(base: float | None, new: float | None) -> Change:
    return Change(base, new, relative_change(base, new))


def compare(base: RunMetrics, lad: RunMetrics) -> Comparison:
    """Baseline → LAD: relative changes, per-field differences and paired Δ intervals, in points."""
    names = list(dict.fromkeys([*base.fields, *lad.fields]))
    fields = {}
    for f in names:
        b, n = base.fields.get(f), lad.fields.get(f)
        fields[f] = FieldDiff(b, n, None if b is None or n is None else n - b)
    notes = []
    if base.field_denominators != lad.field_denominators:
        notes.append(
            "the runs' field denominators differ (different suites or inventories): "
            f"{base.field_denominators} vs {lad.field_denominators}"
        )
    if not base.score:
        notes.append(
            "the baseline scored 0: relative changes from it are N/A (no change from zero "
            "is a percentage); the points are in the table"
        )
    theirs = {t.task: t for t in lad.scored}
    pairs = [(t, theirs[t.task]) for t in base.scored if t.task in theirs]
    if len(pairs) < max(len(base.scored), len(lad.scored)):
        notes.append(
            f"the Δ intervals are over the {len(pairs)} task(s) both runs have "
            f"({len(base.scored)} and {len(lad.scored)} in the runs)"
        )
    rows = [(b.difficulty, b.verdict, n.difficulty, n.verdict) for b, n in pairs]
    return Comparison(
        shared_tasks=len(pairs),
        score_delta_ci=paired_delta_interval(rows),
        completion_delta_ci=paired_delta_interval([(1, bv, 1, nv) for _, bv, _, nv in rows]),
        field_delta_cis={
            f: paired_delta_interval(
                [r for r, (b, n) in zip(rows, pairs, strict=True) if b.field == n.field == f]
            )
            for f in names
        },
        score=_change(base.score, lad.score),
        completion=_change(base.completion, lad.completion),
        usd_per_point=_change(base.usd_per_point, lad.usd_per_point),
        seconds_per_point=_change(base.seconds_per_point, lad.seconds_per_point),
        fields=fields,
        notes=notes,
    )
