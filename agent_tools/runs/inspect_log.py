"""A run as an Inspect `EvalLog`, one sample per attempt, built with inspect_ai's models.

Needs the `leanrig[inspect]` extra. Must not compute a figure `compute_metrics` computes."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

import orjson
from inspect_ai.event import InfoEvent, ModelEvent, ScoreEvent, ToolEvent
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalPlanStep,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    HeadlineMetric,
    write_eval_log,
)
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    GenerateConfig,
    ModelCall,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score
from inspect_ai.tool import ToolCall, ToolCallError

from ..models import Api
from .inspect_attempt import AttemptRecord
from .inspect_messages import (
    anthropic_messages,
    request_messages,
    request_tools,
    response_output,
    responses_items,
    tool_name,
)
from .loaded_run import LoadedRun
from .metrics import attempt_status, time_split

SCORER: Final = "leanrig_verdict"
NO_MODEL_IO: Final = (
    "no model I/O was recorded for this attempt (`leanrig run --record-model-io`): its "
    "transcript is the ledger's tool calls (outcome and timings, no arguments) and the verdict"
)


def _ts(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            return _ts(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _id(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()[:22]


def usage_of(r: Any) -> ModelUsage | None:
    """A results line's tokens in Inspect's convention (cached input apart); None if unknown."""
    if r.input_tokens is None or r.output_tokens is None:
        return None
    cached = r.cached_input_tokens or 0
    return ModelUsage(
        input_tokens=r.input_tokens - cached,
        output_tokens=r.output_tokens,
        total_tokens=r.input_tokens + r.output_tokens,
        input_tokens_cache_read=r.cached_input_tokens,
        reasoning_tokens=r.reasoning_tokens,
        total_cost=r.cost_usd,
    )


def _api(x: dict[str, Any]) -> Api | None:
    match x.get("api"):
        case "anthropic-messages":
            return "anthropic-messages"
        case "openai-responses":
            return "openai-responses"
        case "openai-chat":
            return "openai-chat"
    return None


def _conversation(a: AttemptRecord, model: str) -> tuple[list[ChatMessage], str]:
    """The attempt's messages and where they came from."""
    for x in reversed(a.exchanges):
        api = _api(x)
        if api is None or not isinstance(x.get("request"), dict):
            continue
        messages = request_messages(api, x["request"])
        if x.get("response") is not None:
            messages.append(response_output(api, x["response"], model).message)
        return messages, "model_io.jsonl (the last model call's conversation and answer)"
    if a.session_log is not None:
        harness, lines = a.session_log
        if harness == "claude-code":
            turns = [x["message"] for x in lines if isinstance(x.get("message"), dict)]
            return anthropic_messages(turns, model=model), "Claude Code's session log"
        items = [
            x["payload"]
            for x in lines
            if x.get("type") == "response_item" and isinstance(x.get("payload"), dict)
        ]
        return responses_items(items, model), "Codex's rollout file"
    return _ledger_messages(a), "ledger.jsonl (no model I/O recorded)"


def _ledger_result(entry: dict[str, Any], result: Any = None) -> str:
    """A ledger line as a tool result, followed by the agent's own record of it if any."""
    shown = {k: v for k, v in entry.items() if k not in ("v", "ts", "session", "task", "tool")}
    text = orjson.dumps(shown).decode()
    if result is not None:
        text += "\n" + (result if isinstance(result, str) else orjson.dumps(result).decode())
    return text


def _ledger_messages(a: AttemptRecord) -> list[ChatMessage]:
    """Without model I/O: the prompt, then each ledger tool call and its result."""
    out: list[ChatMessage] = [ChatMessageUser(content=a.prompt or f"(task {a.result.task})")]
    own = list(a.transcript)
    for i, entry in enumerate(a.ledger):
        tool = str(entry.get("tool", "?"))
        mine = next((t for t in own if t.get("tool") == tool), None)
        if mine is not None:
            own.remove(mine)
        call = ToolCall(id=f"ledger-{i + 1}", function=tool, arguments={})
        out.append(ChatMessageAssistant(content="", tool_calls=[call]))
        failed = str(entry.get("outcome", "ok")) not in ("ok", "rejected")
        out.append(
            ChatMessageTool(
                content=_ledger_result(entry, mine.get("result") if mine else None),
                tool_call_id=call.id,
                function=tool,
                error=ToolCallError("unknown", str(entry.get("outcome"))) if failed else None,
            )
        )
    return out


def _calls_and_results(
    messages: Sequence[ChatMessage],
) -> tuple[list[ToolCall], dict[str, ChatMessageTool]]:
    calls = [c for m in messages if isinstance(m, ChatMessageAssistant) for c in m.tool_calls or []]
    results = {
        m.tool_call_id: m for m in messages if isinstance(m, ChatMessageTool) and m.tool_call_id
    }
    return calls, results


def _events(
    a: AttemptRecord, messages: Sequence[ChatMessage], model: str, start: datetime
) -> list[Any]:
    """The attempt's timeline: model calls, ledger tool calls, the verdict; by time."""
    events: list[tuple[datetime, Any]] = []

    def since(t: datetime) -> float:
        return max(0.0, (t - start).total_seconds())

    for x in a.exchanges:
        api, t0 = _api(x), _ts(x.get("ts"))
        if api is None or t0 is None:
            continue
        latency = float(x.get("latency_s") or 0.0)
        output = response_output(api, x.get("response"), model)
        events.append(
            (
                t0,
                ModelEvent(
                    model=model,
                    input=request_messages(api, x.get("request")),
                    tools=request_tools(api, x.get("request")),
                    tool_choice="auto",
                    config=GenerateConfig(),
                    output=output,
                    timestamp=t0,
                    working_start=since(t0),
                    completed=t0 + timedelta(seconds=latency),
                    working_time=latency,
                    error=x.get("error")
                    or (f"status {x.get('status')}" if x.get("status") != 200 else None),
                    call=ModelCall.create(x.get("request"), x.get("response"), time=latency),
                    metadata={"api": api, "path": x.get("path"), "notes": x.get("notes") or []},
                ),
            )
        )
    calls, results = _calls_and_results(messages)
    for i, entry in enumerate(a.ledger):
        end = _ts(entry.get("ts"))
        if end is None:
            continue
        took = float(entry.get("total_ms") or 0.0) / 1000
        tool = str(entry.get("tool", "?"))
        call = next((c for c in calls if tool_name(c.function) == tool), None)
        if call is not None:
            calls.remove(call)
        answer = results.get(call.id) if call is not None else None
        failed = str(entry.get("outcome", "ok")) not in ("ok", "rejected")
        t0 = end - timedelta(seconds=took)
        events.append(
            (
                t0,
                ToolEvent(
                    id=call.id if call is not None else f"ledger-{i + 1}",
                    function=tool,
                    arguments=call.arguments if call is not None else {},
                    result=answer.text if answer is not None else _ledger_result(entry),
                    timestamp=t0,
                    working_start=since(t0),
                    completed=end,
                    working_time=took,
                    error=ToolCallError("unknown", str(entry.get("outcome"))) if failed else None,
                    metadata={"ledger": entry},
                ),
            )
        )
    events.sort(key=lambda e: e[0])
    return [e for _, e in events]


def verdict_score(a: AttemptRecord) -> Score:
    r = a.result
    explanation = "; ".join(r.reasons) or ("verified" if r.accepted else "not verified")
    return Score(
        value="C" if r.accepted else "I",
        answer=a.body,
        explanation=explanation,
        metadata={
            "outcome": attempt_status(r),
            "timed_out": r.timed_out,
            "verdict_s": r.verdict_s,
            "final_body_sha": r.final_body_sha,
        },
    )


def sample_of(run: LoadedRun, a: AttemptRecord) -> EvalSample:
    """One attempt as an Inspect sample."""
    r = a.result
    model = run.info.model or "unknown"
    start = r.started_at or run.info.started_at
    start = start if start.tzinfo else start.replace(tzinfo=UTC)
    messages, source = _conversation(a, model)
    events = _events(a, messages, model, start)
    notes = list(a.notes)
    if not a.exchanges:
        notes.insert(0, NO_MODEL_IO)
        events.insert(
            0, InfoEvent(source="leanrig", data=NO_MODEL_IO, timestamp=start, working_start=0.0)
        )
    score = verdict_score(a)
    end = start + timedelta(seconds=r.invocation_s)
    events.append(
        ScoreEvent(score=score, scorer=SCORER, timestamp=end, working_start=r.invocation_s)
    )
    model_s, lean_s, rest_s = time_split(r)
    usage = usage_of(r)
    last = next((m for m in reversed(messages) if isinstance(m, ChatMessageAssistant)), None)
    output = (
        ModelOutput.from_message(last)
        if last is not None and a.exchanges
        else ModelOutput.from_content(model, a.body or "")
    )
    return EvalSample(
        id=r.task,
        epoch=r.attempt,
        input=a.prompt or f"(task {r.task})",
        target="",
        messages=messages,
        output=output,
        scores={SCORER: score},
        events=events,
        model_usage={model: usage} if usage is not None else {},
        started_at=start.isoformat(),
        completed_at=end.isoformat(),
        total_time=r.invocation_s,
        working_time=r.invocation_s,
        uuid=_id(run.path.resolve(), r.task, r.attempt, r.started_at),
        metadata={
            "task": r.task,
            "field": r.field,
            "difficulty": r.difficulty,
            "condition": r.condition,
            "kind": r.kind,
            "attempt": r.attempt,
            "outcome": attempt_status(r),
            "accepted": r.accepted,
            "reasons": r.reasons,
            "time": {
                "invocation_s": r.invocation_s,
                "model_s": model_s,
                "lean_s": lean_s,
                "rest_s": rest_s,
                "verdict_s": r.verdict_s,
            },
            "tokens": {
                k: getattr(r, k)
                for k in (
                    "input_tokens",
                    "cached_input_tokens",
                    "output_tokens",
                    "reasoning_tokens",
                    "cost_usd",
                )
            },
            "usage_source": r.usage_source,
            "model_calls": r.model_calls,
            "tool_calls": r.tool_calls,
            "timed_out": r.timed_out,
            "exit_code": r.exit_code,
            "infra_retry": r.infra_retry,
            "transcript": source,
            "notes": notes + r.notes,
            "attempt_dir": str(a.root) if a.root is not None else None,
        },
    )


def _results(run: LoadedRun, samples: int) -> EvalResults:
    m = run.metrics
    report = orjson.loads(orjson.dumps(m.to_json(), option=orjson.OPT_NON_STR_KEYS))
    metrics = {
        "score": EvalMetric(name="score", value=m.score),
        "completion": EvalMetric(name="completion", value=m.completion),
        "accuracy": EvalMetric(name="accuracy", value=m.accepted_attempts / max(1, m.attempts)),
        **{
            f"pass_at_{k}": EvalMetric(name=f"pass_at_{k}", value=v)
            for k, v in sorted(m.pass_at_k.items())
        },
    }
    fields = {f: EvalMetric(name=f, value=v, group="field") for f, v in sorted(m.fields.items())}
    return EvalResults(
        total_samples=samples,
        completed_samples=samples,
        scores=[
            EvalScore(name=SCORER, scorer=SCORER, scored_samples=samples, metrics=metrics),
            EvalScore(
                name="fields",
                scorer=SCORER,
                metrics=fields,
                metadata={"denominators": m.field_denominators},
            ),
        ],
        headline=HeadlineMetric(scorer=SCORER, score=SCORER, metric="score"),
        metadata={"leanrig_report": report, "notes": run.notes},
    )


def eval_log(run: LoadedRun, attempts: Sequence[AttemptRecord]) -> EvalLog:
    """The run as an Inspect log: its attempts' samples and `leanrig report`'s figures."""
    info = run.info
    samples = [sample_of(run, a) for a in attempts]
    recorded = sum(1 for a in attempts if a.exchanges)
    usage: dict[str, ModelUsage] = {}
    for s in samples:
        for name, u in s.model_usage.items():
            usage[name] = usage[name] + u if name in usage else u
    started = info.started_at if info.started_at.tzinfo else info.started_at.replace(tzinfo=UTC)
    ended = info.ended_at.replace(tzinfo=info.ended_at.tzinfo or UTC) if info.ended_at else None
    solver = info.harness.name if info.harness else (info.agent_tool or "agent")
    transcripts = (
        f"{recorded} of {len(attempts)} attempts with recorded model I/O"
        if recorded
        else NO_MODEL_IO.replace("this attempt", "this run")
    )
    spec = EvalSpec(
        eval_id=_id(run.path.resolve(), info.started_at, "eval"),
        run_id=_id(run.path.resolve(), info.started_at),
        created=started.isoformat(),
        task="leanrig/suite",
        task_id=info.suite_hash or info.suite_name,
        task_version=info.suite_version or 0,
        task_display_name=f"{info.suite_name}: {run.name}",
        task_args={"suite": info.suite_name, "condition": info.condition},
        solver=solver,
        solver_args={"agent": info.agent_command},
        dataset=EvalDataset(
            name=info.suite_name,
            samples=len(info.tasks) or info.task_count,
            sample_ids=[t.id for t in info.tasks] or None,
        ),
        model=info.model or "unknown",
        config=EvalConfig(
            epochs=info.attempts, time_limit=int(info.time_limit_s) if info.time_limit_s else None
        ),
        packages={
            "leanrig": info.leanrig_version or version("leanrig"),
            "inspect_ai": version("inspect_ai"),
        },
        metadata={
            "source": "leanrig export inspect",
            "run_dir": str(run.path.resolve()),
            "transcripts": transcripts,
            "run": info.model_dump(mode="json"),
        },
    )
    plan = EvalPlan(
        name="leanrig run",
        steps=[
            EvalPlanStep(
                solver=solver,
                params={
                    "agent": info.agent_command,
                    "condition": info.condition,
                    "time_limit_s": info.time_limit_s,
                },
            )
        ],
    )
    return EvalLog(
        version=2,
        status="success" if ended is not None else "cancelled",
        eval=spec,
        plan=plan,
        results=_results(run, len(samples)),
        stats=EvalStats(
            started_at=started.isoformat(),
            completed_at=ended.isoformat() if ended else "",
            model_usage=usage,
        ),
        samples=samples,
    )


def write_log(log: EvalLog, path: Path) -> Path:
    """Write ``log`` to ``path`` (``.eval``: Inspect's zipped format; ``.json``: its JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(path), format="json" if path.suffix == ".json" else "eval")
    return path


__all__ = [
    "NO_MODEL_IO",
    "SCORER",
    "eval_log",
    "sample_of",
    "usage_of",
    "verdict_score",
    "write_log",
]
