"""A recorded attempt as a replay-model plan (`leanrig model plan-from ATTEMPT_DIR`).

Tool calls come from ``model_io.jsonl``, else only their names from the ledger. Must not serve
or run anything, or write outside ``--out``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from lsp_bridge import LeanrigError

from .model_io import MODEL_IO_FILE, MODEL_IO_SCHEMA
from .replay_plan import DEFAULT_FINAL, ReplayPlan

__all__ = ["PlanFromError", "RecordedPlan", "plan_from_attempt"]

LEDGER_FILE: Final = "ledger.jsonl"
SERVER_PREFIX: Final = "leanrig"
# Filled from the submission record in a ledger-only plan.
_SUBMITTING: Final = {"set_proof": "body", "set_statement": "statement"}


class PlanFromError(LeanrigError):
    """The directory holds no attempt a plan can be made from."""

    hint = (
        "give an attempt directory, RUN_DIR/attempts/TASK/K, holding model_io.jsonl "
        "(`leanrig run --record-model-io`) or ledger.jsonl"
    )


@dataclass(frozen=True, slots=True)
class RecordedPlan:
    """The plan (`to_json` for `leanrig model serve --plan`) and where it came from."""

    task: str
    steps: list[dict[str, Any]]
    source: str  # MODEL_IO_FILE or LEDGER_FILE
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"tasks": {self.task: self.steps}}


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError:
        return
    for line in data.splitlines():
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            yield value


def _args(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = orjson.loads(value) if value.strip() else {}
        except orjson.JSONDecodeError:
            return {}
    return value if isinstance(value, dict) else {}


def _answer_calls(api: str, response: Any) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    calls: list[tuple[str, dict[str, Any]]] = []
    texts: list[str] = []
    if not isinstance(response, dict):
        return calls, ""
    if api == "anthropic-messages":
        for block in response.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls.append((str(block.get("name", "")), _args(block.get("input"))))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
    elif api == "openai-responses":
        for item in response.get("output") or []:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                calls.append((str(item.get("name", "")), _args(item.get("arguments"))))
            elif item.get("type") == "message":
                texts += [
                    str(c.get("text", ""))
                    for c in item.get("content") or []
                    if isinstance(c, dict) and c.get("type") == "output_text"
                ]
    else:
        for choice in response.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict):
                continue
            for call in message.get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict):
                    calls.append((str(fn.get("name", "")), _args(fn.get("arguments"))))
            if isinstance(message.get("content"), str):
                texts.append(message["content"])
    return calls, "\n".join(t for t in texts if t)


def _leanrig_tool(name: str, seen: set[str]) -> str | None:
    """``mcp__leanrig__set_proof`` -> ``set_proof``; None for a tool that is not leanrig's."""
    prefix, sep, bare = name.rpartition("__")
    if sep and not prefix.endswith(SERVER_PREFIX):
        return None
    if seen and bare not in seen:
        return None
    return bare or None


def _placeholders(args: dict[str, Any], task: str) -> dict[str, Any]:
    out = dict(args)
    if isinstance(out.get("session_id"), str):
        out["session_id"] = "{session}"
    if out.get("task_id") == task:
        out["task_id"] = "{task}"
    return out


def _final_submission(root: Path, task: str) -> dict[str, Any]:
    best: tuple[int, dict[str, Any]] | None = None
    for path in (root / "serve").glob("submission-*.json"):
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        ts = record.get("ts_ns") if isinstance(record, dict) else None
        if isinstance(ts, int) and record.get("task") == task and (best is None or ts > best[0]):
            best = (ts, record)
    return best[1] if best else {}


def _task_of(root: Path, ledger: list[dict[str, Any]]) -> str:
    for entry in ledger:
        if isinstance(entry.get("task"), str) and entry["task"]:
            return str(entry["task"])
    # RUN_DIR/attempts/TASK/K[-retry]
    if root.parent.parent.name == "attempts":
        return root.parent.name
    raise PlanFromError(f"{root}: cannot tell the attempt's task (no ledger line names one)")


def plan_from_attempt(root: Path) -> RecordedPlan:
    """The replay plan of the attempt in ``root``; raises `PlanFromError` if it has no record."""
    if not root.is_dir():
        raise PlanFromError(f"{root} is not a directory")
    ledger = [e for e in _lines(root / LEDGER_FILE) if e.get("closed_by") != "server"]
    exchanges = [x for x in _lines(root / MODEL_IO_FILE) if x.get("v") == MODEL_IO_SCHEMA]
    if not exchanges and not ledger:
        raise PlanFromError(f"{root}: neither {MODEL_IO_FILE} nor {LEDGER_FILE}")
    task = _task_of(root, ledger)
    seen = {str(e.get("tool")) for e in ledger if e.get("tool")}
    steps: list[dict[str, Any]] = []
    notes: list[str] = []
    if exchanges:
        final, skipped = DEFAULT_FINAL, 0
        for x in exchanges:
            calls, text = _answer_calls(str(x.get("api", "")), x.get("response"))
            kept = [(t, a) for n, a in calls if (t := _leanrig_tool(n, seen)) is not None]
            skipped += len(calls) - len(kept)
            steps += [{"tool": t, "args": _placeholders(a, task)} for t, a in kept]
            if not calls and text:
                final = text
        if skipped:
            notes.append(f"{skipped} call(s) of the harness's own tools left out")
        steps.append({"say": final})
        ReplayPlan.from_json({"tasks": {task: steps}}, source=str(root))  # validates
        return RecordedPlan(task, steps, MODEL_IO_FILE, notes)
    submitted = _final_submission(root, task)
    last = {t: i for i, e in enumerate(ledger) if (t := str(e.get("tool"))) in _SUBMITTING}
    for i, entry in enumerate(ledger):
        tool = str(entry.get("tool", ""))
        args: dict[str, Any] = (
            {"task_id": "{task}"} if tool == "open_task" else {"session_id": "{session}"}
        )
        key = _SUBMITTING.get(tool)
        if key is not None and last.get(tool) == i and isinstance(submitted.get(key), str):
            args[key] = submitted[key]
        steps.append({"tool": tool, "args": args})
    steps.append({"say": DEFAULT_FINAL})
    notes.append(
        f"no {MODEL_IO_FILE}: tool names from the ledger; arguments other than the "
        "task, the session and the final submission are not known"
    )
    return RecordedPlan(task, steps, LEDGER_FILE, notes)
