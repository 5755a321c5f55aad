"""The replay model's plan: the scripted agent's format plus `{"say": TEXT}`; loading and checking.

Must not decide a turn or serve anything."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from lsp_bridge import LeanrigError

DEFAULT_FINAL: Final = "done"


PLAN_HINT: Final = (
    'a JSON plan: {"calls": [{"tool": NAME, "args": {…}}, {"sleep": SECONDS}, {"say": TEXT}], '
    '"tasks": {"TASK_ID": [ … ]}} (a bare list is "calls")'
)


class ReplayPlanInvalid(LeanrigError):
    """The plan file cannot be read or is not a plan."""

    hint = PLAN_HINT


@dataclass(frozen=True, slots=True)
class ToolStep:
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SleepStep:
    seconds: float


@dataclass(frozen=True, slots=True)
class SayStep:
    text: str


Step = ToolStep | SleepStep | SayStep


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    calls: tuple[Step, ...] = ()
    tasks: Mapping[str, tuple[Step, ...]] = field(default_factory=dict)

    def steps_for(self, task: str | None) -> tuple[Step, ...]:
        if task is not None and task in self.tasks:
            return self.tasks[task]
        return self.calls

    @classmethod
    def from_json(cls, value: Any, *, source: str = "the plan") -> ReplayPlan:
        """A plan from its parsed JSON; raises `ReplayPlanInvalid`."""
        if isinstance(value, list):
            value = {"calls": value}
        if not isinstance(value, dict):
            raise ReplayPlanInvalid(f"{source}: a plan is a list of steps or an object")
        # `usage` and `expect` are the scripted agent's: accepted, not used.
        unknown = set(value) - {"calls", "tasks", "usage"}
        if unknown:
            raise ReplayPlanInvalid(f"{source}: unknown keys {sorted(unknown)}")
        tasks = value.get("tasks", {})
        if not isinstance(tasks, dict):
            raise ReplayPlanInvalid(f"{source}: `tasks` maps a task id to its list of steps")
        return cls(
            calls=_steps(value.get("calls", []), f"{source}: calls"),
            tasks={str(k): _steps(v, f"{source}: tasks.{k}") for k, v in tasks.items()},
        )


def _steps(value: Any, where: str) -> tuple[Step, ...]:
    if not isinstance(value, list):
        raise ReplayPlanInvalid(f"{where} must be a list of steps")
    steps: list[Step] = []
    for i, raw in enumerate(value):
        at = f"{where}[{i}]"
        if steps and isinstance(steps[-1], SayStep):
            raise ReplayPlanInvalid(f"{at}: `say` is the final answer; nothing can follow it")
        steps.append(_step(raw, at))
    return tuple(steps)


def _step(raw: Any, at: str) -> Step:
    if not isinstance(raw, dict):
        raise ReplayPlanInvalid(f"{at}: a step is an object, not {raw!r}")
    kinds = [k for k in ("tool", "sleep", "say") if k in raw]
    if len(kinds) != 1:
        raise ReplayPlanInvalid(f"{at}: a step has one of `tool`, `sleep` or `say`: {raw!r}")
    allowed = {"tool": {"tool", "args", "expect"}, "sleep": {"sleep"}, "say": {"say"}}[kinds[0]]
    if set(raw) - allowed:
        raise ReplayPlanInvalid(f"{at}: unknown keys {sorted(set(raw) - allowed)}")
    if "tool" in raw:
        tool, args = raw["tool"], raw.get("args", {})
        if not isinstance(tool, str) or not tool:
            raise ReplayPlanInvalid(f"{at}: `tool` is a tool name")
        if not isinstance(args, dict):
            raise ReplayPlanInvalid(f"{at}: `args` is an object of arguments")
        return ToolStep(tool, args)
    if "sleep" in raw:
        seconds = raw["sleep"]
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or seconds < 0
        ):
            raise ReplayPlanInvalid(f"{at}: `sleep` is a number of seconds ≥ 0")
        return SleepStep(float(seconds))
    if not isinstance(raw["say"], str):
        raise ReplayPlanInvalid(f"{at}: `say` is the final answer's text")
    return SayStep(raw["say"])


def load_plan(path: Path) -> ReplayPlan:
    """The plan in a JSON file; raises `ReplayPlanInvalid` when it is not one."""
    try:
        value = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ReplayPlanInvalid(f"cannot read the plan {path}: {exc.strerror or exc}") from None
    except orjson.JSONDecodeError as exc:
        raise ReplayPlanInvalid(f"the plan {path} is not JSON: {exc}") from None
    return ReplayPlan.from_json(value, source=str(path))


def fill_placeholders(value: Any, names: Mapping[str, str]) -> Any:
    """A step's arguments with ``{name}`` replaced in every string, nested ones included."""
    if isinstance(value, str):
        for key, text in names.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, list):
        return [fill_placeholders(v, names) for v in value]
    if isinstance(value, dict):
        return {k: fill_placeholders(v, names) for k, v in value.items()}
    return value
