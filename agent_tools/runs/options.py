"""`leanrig run`'s settings, the checks before anything is written, and what `--resume` keeps."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal

from lsp_bridge import LeanrigError

from ..tasks import Suite, SuiteError
from .attempt_server import ServiceFactory
from .harness import HarnessName
from .prices import PriceSchedule, load_prices
from .results import Condition, RunInfo

DEFAULT_TIME_LIMIT: Final = 1800.0


# What the agent may reach: nothing, only its model through the run's gateway, or everything.
NetworkPolicy = Literal["none", "model", "all"]


class RunError(LeanrigError):
    hint = "see `leanrig run --help` and docs/runs.md"


@dataclass(frozen=True, slots=True)
class RunOptions:
    suite: Path
    agent: str  # the command line exactly as given to --agent
    out: Path | None = None  # default: runs/run-<timestamp>
    condition: Condition = "baseline"
    time_limit: float = DEFAULT_TIME_LIMIT
    attempts: int = 1
    parallel: int = 1
    label: str | None = None
    model: str | None = None
    agent_tool: str | None = None
    prices: Path | None = None
    resume: bool = False
    tasks: Sequence[str] | None = None  # a subset of the suite's tasks (default: all)
    agent_network: NetworkPolicy | None = None  # None: "model" with a model endpoint, else "none"
    harness: HarnessName | None = None  # a preset instead of `agent` (harness.py)
    harness_bin: Path | None = None
    reasoning: str | None = None
    model_endpoint: str | None = None  # default: the harness vendor's public API
    model_key_env: str | None = None  # the runner's variable holding the model's key
    quiet: bool = False
    lean: str | None = None
    service: ServiceFactory | None = None  # default: agent_tools.servers.open_service
    max_processes: int | None = None  # Lean processes per attempt's pool (default: by cores)
    given: frozenset[str] | None = None  # set explicitly (`resumed`); None: those not default
    prices_schedule: PriceSchedule | None = None  # a resumed run's (its file may be gone)
    ray: str | None = None  # the Ray cluster's address ("auto", host:port)
    attempt_memory_mb: int | None = None  # reserved per attempt there; default: suite's [limits]
    agent_home: Path | None = None  # copied into each attempt's fresh home
    equiv_budget: float | None = None  # seconds per equivalence direction; default: [limits]
    record_model_io: bool | None = None  # model_io.jsonl; None: only with the replay model


def records_model_io(options: RunOptions) -> bool:
    """Whether the run's gateways keep model I/O: as given, else with the replay model."""
    if options.record_model_io is not None:
        return options.record_model_io
    return options.model == "replay"


# What a resume must keep: left out, the recorded value; given differently, refused.
RESUME_SETTINGS: Final = (
    "agent",
    "condition",
    "label",
    "model",
    "agent_tool",
    "time_limit",
    "attempts",
    "prices",
    "tasks",
)


def _recorded(info: RunInfo, name: str) -> object:
    match name:
        case "agent":
            return info.agent_command
        case "time_limit":
            return info.time_limit_s
        case "tasks":
            return tuple(t.id for t in info.tasks) or None
        case _:
            return getattr(info, name)


def resumed(options: RunOptions, info: RunInfo) -> RunOptions:
    """``options`` for resuming the run ``info`` describes; `RunError` names each conflict."""
    defaults = RunOptions(suite=options.suite, agent=options.agent)
    update: dict[str, Any] = {}
    conflicts = []
    for name in RESUME_SETTINGS:
        value = getattr(options, name)
        recorded = _recorded(info, name)
        given = (
            name in options.given
            if options.given is not None
            else name == "agent" or value != getattr(defaults, name)
        )
        if name == "prices":
            mine = load_prices(value) if given and value is not None else None
            if given and mine != recorded:
                conflicts.append(f"--prices {value} differs from the recorded schedule")
            elif not given and recorded is not None:
                update["prices_schedule"] = recorded
            continue
        same = value == recorded
        if name == "tasks":
            same = set(value or ()) == set(recorded or ()) if isinstance(recorded, tuple) else same
        if given and not same:
            flag = "--" + name.replace("_", "-")
            conflicts.append(f"{flag} {value!r} (recorded: {recorded!r})")
        elif not given:
            update[name] = recorded
    if conflicts:
        raise RunError(
            "--resume: the run was started with other settings: " + "; ".join(conflicts),
            hint="leave these options out to keep the recorded ones, or start a new run "
            "with another --out",
        )
    return replace(options, **update)


def agent_words(agent: str) -> list[str]:
    """The agent command's words, its program made absolute (the agent starts elsewhere)."""
    try:
        words = shlex.split(agent)
    except ValueError as exc:
        raise RunError(f"--agent: {exc}") from None
    if not words:
        raise RunError("--agent is empty")
    program = words[0]
    if "{" in program:
        return words
    if "/" in program:
        # Absolute, links kept: a venv's `python` is a link, and resolved it loses the venv.
        path = Path(os.path.abspath(program))
        if not path.is_file():
            raise RunError(
                f"--agent: cannot find {program!r}", hint="give a command on PATH or a path"
            )
        if not os.access(path, os.X_OK):
            hint = f"chmod +x {program}, or start it through its interpreter"
            raise RunError(f"--agent: {program!r} is not executable", hint=hint)
        return [str(path), *words[1:]]
    if shutil.which(program) is None:
        raise RunError(f"--agent: cannot find {program!r}", hint="give a command on PATH or a path")
    return words


def check_suite(suite: Suite) -> None:
    """Refuses a suite with a task without a field (per-field scores need one)."""
    missing = sorted(t.id for t in suite.tasks.values() if not t.spec.field)
    if missing:
        raise SuiteError(
            f"suite {suite.name}: task(s) without a field: {', '.join(missing)}",
            hint="give every [[tasks]] entry a `field` (and a `difficulty`, 1..10) in suite.toml",
        )
