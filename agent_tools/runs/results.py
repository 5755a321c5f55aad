"""The files of a run directory, one definition for every writer and reader (docs/runs.md).

In ``results.jsonl`` the last line per (task, attempt) wins; readers skip other ``v``."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lsp_bridge import LeanrigError, replace_file

from ..tasks import TaskKind
from .jsonl import LinesRead, records
from .prices import PriceSchedule

RESULTS_SCHEMA: Final = 1
RUN_SCHEMA: Final = 1
RUN_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
USAGE_FILE = "usage.json"
ATTEMPT_STATE = "attempt-state"  # a human run's attempts in progress: <task>.json each

Condition = Literal["baseline", "lad", "human"]


class ResultsError(LeanrigError):
    hint = "pass a run directory written by `leanrig run` (with run.json and results.jsonl)"


MAX_TOKENS = 10**15  # tokens of one attempt, far beyond any real one
MAX_COST_USD = 1e9


class _TokensMixin(BaseModel):
    """Token counts: each ``None`` when unknown (never guessed as 0)."""

    # Bounded: the agent writes usage.json, and a huge count must not crash the runner.
    input_tokens: int | None = Field(
        default=None, ge=0, le=MAX_TOKENS, description="all input, cached included"
    )
    cached_input_tokens: int | None = Field(
        default=None, ge=0, le=MAX_TOKENS, description="cached part of input"
    )
    output_tokens: int | None = Field(
        default=None, ge=0, le=MAX_TOKENS, description="output, reasoning included"
    )
    reasoning_tokens: int | None = Field(
        default=None, ge=0, le=MAX_TOKENS, description="reasoning part of output"
    )
    cost_usd: float | None = Field(
        default=None, ge=0, le=MAX_COST_USD, allow_inf_nan=False, description="observed cost, USD"
    )

    @model_validator(mode="after")
    def _cached_within_input(self) -> Self:
        i, c = self.input_tokens, self.cached_input_tokens
        if i is not None and c is not None and c > i:
            raise ValueError(f"cached_input_tokens ({c}) exceed input_tokens ({i})")
        return self


class Usage(_TokensMixin):
    """``usage.json`` as an agent writes it: any subset of the keys."""

    model_config = ConfigDict(extra="ignore", frozen=True)


USAGE_MAX_BYTES = 1 << 20


def read_usage(path: Path) -> Usage:
    """An agent's ``usage.json``; a bad or missing file is unknown usage (all ``None``), not 0."""
    data = read_agent_file(path, USAGE_MAX_BYTES + 1)
    if data is None or len(data) > USAGE_MAX_BYTES:
        return Usage()
    try:
        return Usage.model_validate_json(data)
    except ValidationError:
        return Usage()


def read_agent_file(path: Path, limit: int) -> bytes | None:
    """At most ``limit`` bytes of a file the agent could have replaced; None unless regular."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return file.read(limit)


class TaskRef(BaseModel):
    """One task of the suite's inventory, as run.json records it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1)
    field: str = ""
    difficulty: int = Field(ge=1, le=10)
    kind: TaskKind = "proof"


class AttemptResult(_TokensMixin):
    """One line of ``results.jsonl``: one attempt at one task, with its final verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    v: Literal[1] = RESULTS_SCHEMA
    task: str = Field(min_length=1)
    field: str = ""
    difficulty: int = Field(ge=1, le=10)
    attempt: int = Field(default=1, ge=1, description="1..K")
    accepted: bool = Field(description="the independent verdict on the final submission")
    reasons: list[str] = Field(default_factory=list, description="the verdict's reasons")
    invocation_s: float = Field(ge=0, description="agent start until its process tree is gone")
    timed_out: bool = False
    exit_code: int | None = None
    infra_retry: bool = Field(default=False, description="this line replaces a failed attempt")
    infra_failures: list[str] = Field(
        default_factory=list, description="why the attempt this line replaces failed"
    )
    node: str | None = Field(
        default=None, description="the cluster node it ran on (`--ray`): host (node id)"
    )
    tool_calls: int = Field(default=0, ge=0)
    lean_s: float = Field(default=0.0, ge=0, description="Lean time, from the ledger")
    final_body_sha: str | None = None
    kind: TaskKind = Field(default="proof", description="what the attempt wrote (task kind)")
    statement: str | None = Field(
        default=None, description="the final statement (statement kinds): its binders and type"
    )
    equivalence: dict[str, Any] | None = Field(
        default=None,
        description="statement kinds: the equivalence with the reference (BEq+): outcome, "
        "each direction's result, strategy and proof, the portfolio's version",
    )
    condition: Condition = "baseline"
    model: str | None = None
    agent_tool: str | None = None
    verdict_s: float | None = Field(default=None, ge=0, description="not in invocation_s")
    started_at: datetime | None = None
    notes: list[str] = Field(
        default_factory=list, description="what the agent did that was ignored (files edited)"
    )
    # The model side (docs/runs.md): the token counts' source and the gateway's calls and time.
    usage_source: Literal["gateway", "agent"] | None = None
    model_calls: int | None = Field(default=None, ge=0, description="model calls, answered or not")
    other_calls: int | None = Field(
        default=None,
        ge=0,
        description="requests through the gateway that were not model calls: other routes "
        "(`/v1/models`) and refused ones; never part of the tokens",
    )
    model_s: float | None = Field(default=None, ge=0, description="model time, from the gateway")
    harness_usage: Usage | None = Field(
        default=None, description="what the harness itself reported (a harness run)"
    )
    usage_mismatch: list[str] = Field(
        default_factory=list, description="where the harness's count differs from the gateway's"
    )

    def with_usage(self, usage: Usage) -> AttemptResult:
        return self.model_copy(update=usage.model_dump())


class HarnessInfo(BaseModel):
    """A harness run's harness, its command and configuration as templates (no secrets)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    version: str
    program: str
    model: str
    reasoning: str | None = None
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)


class Machine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    cores: int = Field(ge=1)
    memory_bytes: int = Field(ge=0)


class ClusterInfo(BaseModel):
    """A run's attempts placed on a Ray cluster (`leanrig run --ray`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    address: str = Field(description="as given to --ray")
    attempt_memory_mb: int = Field(ge=0, description="the Ray memory each attempt reserves")
    nodes: list[str] = Field(
        default_factory=list, description="the nodes offering lean_slots at the start"
    )


class RunInfo(BaseModel):
    """``run.json``: the metadata of one run."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    v: Literal[1] = RUN_SCHEMA
    label: str | None = None
    suite_name: str
    suite_version: str = ""
    suite_hash: str = Field(
        default="", description="Suite.content_hash(): suite.toml, tasks, library and LAD files"
    )
    task_count: int = Field(ge=0)
    tasks: list[TaskRef] = Field(
        default_factory=list, description="the inventory; tasks without results score 0"
    )
    model: str | None = None
    agent_tool: str | None = None
    condition: Condition = "baseline"
    time_limit_s: float | None = Field(gt=0, description="None: no limit (a human attempt)")
    attempts: int = Field(default=1, ge=1)
    parallel: int = Field(default=1, ge=1)
    retry_policy: str = "an infrastructure failure is retried once"
    leanrig_version: str = ""
    lean_version: str = ""
    sandbox: str = Field(default="", description="bwrap | rlimits | none")
    machine: Machine | None = None
    started_at: datetime
    ended_at: datetime | None = Field(default=None, description="None while running")
    agent_command: str = Field(default="", description="exactly as given to --agent")
    prices: PriceSchedule | None = Field(default=None, description="the --prices schedule")
    harness: HarnessInfo | None = None
    agent_network: Literal["none", "model", "all"] | None = Field(
        default=None, description="what the agent could reach; None: recorded before it was"
    )
    model_endpoint: str | None = Field(
        default=None, description="where the gateway forwarded model calls"
    )
    cluster: ClusterInfo | None = Field(
        default=None, description="where attempts ran, when on a Ray cluster (--ray)"
    )
    programs: dict[str, str] = Field(
        default_factory=dict,
        description="each program the runner starts (Lean, bwrap, a harness, …): the absolute "
        "path resolved once when the run started",
    )
    agent_home: str | None = Field(
        default=None, description="--agent-home: copied into each attempt's fresh home"
    )

    def display_name(self) -> str:
        if self.label:
            return self.label
        return " · ".join(x for x in (self.model, self.agent_tool, self.condition) if x)


def time_limit_text(seconds: float | None) -> str:
    """A run's time limit as reports say it: ``1800 s``, or ``none`` (a human attempt)."""
    return f"{seconds:g} s" if seconds is not None else "none"


def write_run_info(run_dir: Path, info: RunInfo) -> Path:
    """Write ``run.json`` atomically (temp file + rename)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RUN_FILE
    replace_file(path, orjson.dumps(info.model_dump(mode="json"), option=orjson.OPT_INDENT_2))
    return path


def read_run_info(run_dir: Path) -> RunInfo:
    path = run_dir / RUN_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"no {RUN_FILE} in {run_dir}") from None
    try:
        return RunInfo.model_validate_json(data)
    except ValidationError as exc:
        raise ResultsError(f"{path} is not a valid run.json: {_first_error(exc)}") from None


def append_result(run_dir: Path, result: AttemptResult) -> None:
    """Append one line to ``results.jsonl`` in one ``O_APPEND`` write, so lines never interleave."""
    line = orjson.dumps(result.model_dump(mode="json")) + b"\n"
    fd = os.open(run_dir / RESULTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(slots=True)
class ResultsRead(LinesRead):
    results: list[AttemptResult] = field(default_factory=list)
    replaced: int = 0

    def notes(self) -> list[str]:
        notes = self.skip_notes("results")
        if self.replaced:
            notes.append(
                f"{self.replaced} attempt line(s) were replaced by later lines of the same "
                "attempt (a retry; in a human run, a resumed attempt)"
            )
        return notes


def parse_results(data: bytes) -> ResultsRead:
    read = ResultsRead()
    by_key: dict[tuple[str, int], AttemptResult] = {}
    for raw in records(data, RESULTS_SCHEMA, read):
        try:
            result = AttemptResult.model_validate(raw)
        except ValidationError:
            read.skipped_invalid += 1
            continue
        key = (result.task, result.attempt)
        if key in by_key:
            read.replaced += 1
            del by_key[key]  # re-inserted: the order is that of the last lines
        by_key[key] = result
    read.results = list(by_key.values())
    return read


def read_results(run_dir: Path) -> ResultsRead:
    try:
        data = (run_dir / RESULTS_FILE).read_bytes()
    except FileNotFoundError:
        data = b""
    return parse_results(data)


def finished_attempts(results: Iterable[AttemptResult]) -> set[tuple[str, int]]:
    """``(task, attempt)`` pairs that need no rerun when a run resumes."""
    return {(r.task, r.attempt) for r in results}


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "file"
    return f"{where}: {err['msg']}"
