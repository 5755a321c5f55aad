"""The tool catalogue, once: one closed pydantic model per tool input, one per tool output, and
a `ToolDef` per tool (name, title, description, read-only hint, input and output models).

`ProofService` returns the output models; both servers publish the JSON Schemas derived here
(`input_schema`, `output_schema`) and validate arguments with `parse_input` (strict types, no
unknown keys, the limits as constraints), so MCP and JSON-RPC accept and reject exactly the same
calls with the same messages. Nothing here talks to Lean or to a wire.

Schema choices for strict clients (documented in docs/agent-tools.md): input schemas are inline
(no ``$ref``/``anyOf``/``title``), every object is closed (``additionalProperties: false``) with
all its properties required, and tools without arguments publish no ``properties`` key at all.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..library import MAX_LIMIT as MAX_LIBRARY_RESULTS
from ..tasks import MAX_BODY_BYTES
from .errors import InvalidArguments

MAX_CANDIDATES = 16
MAX_QUERY_CHARS = 1000  # search_library's query (checked by the service: no maxLength in schemas)
MAX_BODY_CHARS = MAX_BODY_BYTES  # a code point is at least one UTF-8 byte; bytes are checked too
POSITIONS = "Positions are 1-based lines and 1-based Unicode code point columns in the task file."


# -- inputs ---------------------------------------------------------------------------------------


class ToolInput(BaseModel):
    """Closed and strict: unknown keys and coercions ("8" for 8) are errors on every wire."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


SessionId = Annotated[str, Field(description="the session_id returned by open_task")]
Body = Annotated[
    str,
    Field(
        max_length=MAX_BODY_CHARS,
        description="the new proof body (the text after the theorem's `:=`), at most 1 MB",
    ),
]


class NoArguments(ToolInput):
    pass


class OpenTaskInput(ToolInput):
    task_id: Annotated[str, Field(description="a task id from list_tasks")]


class SessionInput(ToolInput):
    session_id: SessionId


class SetProofInput(ToolInput):
    session_id: SessionId
    body: Body


class ReplaceInProofInput(ToolInput):
    session_id: SessionId
    old: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_BODY_CHARS,
            description="text occurring exactly once in the proof body",
        ),
    ]
    new: Annotated[str, Field(max_length=MAX_BODY_CHARS, description="its replacement")]


class GetGoalsInput(ToolInput):
    session_id: SessionId
    line: Annotated[int, Field(ge=1, description="1-based line")]
    column: Annotated[int, Field(ge=1, description="1-based Unicode code point column")]


class TryProofsInput(ToolInput):
    session_id: SessionId
    bodies: Annotated[
        list[Annotated[str, Field(max_length=MAX_BODY_CHARS)]],
        Field(
            min_length=1,
            max_length=MAX_CANDIDATES,
            description=f"candidate proof bodies (1 to {MAX_CANDIDATES}), each at most 1 MB",
        ),
    ]


class SearchLibraryInput(ToolInput):
    query: Annotated[
        str,
        Field(
            description="words for what you need: a concept (`symmetry of equality`), part of "
            f"a name (`or_comm`), a type's constants; at most {MAX_QUERY_CHARS} characters"
        ),
    ]
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_LIBRARY_RESULTS,
            description=f"at most this many declarations (1 to {MAX_LIBRARY_RESULTS})",
        ),
    ]


class ReadLibraryInput(ToolInput):
    name: Annotated[
        str,
        Field(
            description="a declaration's name from search_library (the full name, or its "
            "last part when that is unique)"
        ),
    ]


# -- outputs --------------------------------------------------------------------------------------


class ToolOutput(BaseModel):
    """Closed too: a result with a key its schema does not name is a bug, caught in tests."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Position(ToolOutput):
    line: int = Field(description="1-based line")
    column: int = Field(description="1-based Unicode code point column")


class BodyRange(ToolOutput):
    start: Position
    end: Position


class Diagnostic(ToolOutput):
    severity: Literal["error", "warning", "information", "hint"]
    line: int
    column: int
    end_line: int
    end_column: int
    message: str


class ToolFailure(ToolOutput):
    """The one error shape: a stable code, what happened, what to do next."""

    code: str = Field(description="rejected, unknown_task, unknown_session, invalid_argument, "
                      "timeout, busy, lean_error, lean_failure or unavailable")  # fmt: skip
    message: str
    hint: str = ""

    def render(self) -> str:
        return f"[{self.code}] {self.message}" + (f". Next: {self.hint}" if self.hint else "")


class TaskSummary(ToolOutput):
    id: str
    title: str
    field: str
    difficulty: int
    theorem: str


class ListTasksResult(ToolOutput):
    suite: str
    tasks: list[TaskSummary]


class StepState(ToolOutput):
    version: int = Field(description="1 after open_task, +1 per accepted edit")
    diagnostics: list[Diagnostic]
    goals: list[str] = Field(description="goals at the end of the body (or the expected type)")
    complete: bool = Field(description="no error in the file, no sorry or unsolved goal in the "
                           "target theorem; check_proof gives the verdict")  # fmt: skip


class OpenTaskResult(StepState):
    session_id: str
    text: str
    body: str
    body_range: BodyRange
    mode: Literal["file", "prefix"] = Field(
        description="what Lean elaborates for this session: the whole task file, or the part "
        "before the theorem compiled once and imported (faster steps; positions are the file's)"
    )
    mode_reason: str


class EditResult(StepState):
    elapsed_ms: float


class ProofStateResult(StepState):
    session_id: str
    task_id: str
    text: str
    body: str
    body_range: BodyRange


class Hypothesis(ToolOutput):
    names: list[str]
    type: str
    value: str | None


class StructuredGoal(ToolOutput):
    hypotheses: list[Hypothesis]
    target: str
    user_name: str | None


class GoalsResult(ToolOutput):
    line: int
    column: int
    goals: list[str]
    goal_status: Literal["goals", "complete", "no_goal"]
    term_goal: str | None
    structured: list[StructuredGoal]


class Candidate(ToolOutput):
    index: int
    rejected: str | None = Field(description="why the edit would leave the proof body")
    error: ToolFailure | None = Field(description="the candidate could not be elaborated")
    diagnostics: list[Diagnostic]
    goals: list[str]
    complete: bool
    elapsed_ms: float


class TryProofsResult(ToolOutput):
    results: list[Candidate]
    elapsed_ms: float = Field(description="wall-clock time of the whole call")


class VerdictResult(ToolOutput):
    accepted: bool
    reasons: list[str]
    axioms: list[str]
    elapsed_ms: float
    lean_version: str
    stages_ms: dict[str, float]


class CandidateTiming(ToolOutput):
    index: int
    queue_ms: float
    lean_ms: float
    total_ms: float


class LedgerEntry(ToolOutput):
    """One ledger line (schema ``v`` = 1); the optional fields belong to some tools only."""

    v: int
    ts: str
    session: str | None
    task: str | None
    tool: str
    queue_ms: float = Field(description="wall time waiting for a Lean process")
    lean_ms: float = Field(description="wall time waiting on Lean (parallel work counted once)")
    total_ms: float
    outcome: str = Field(description="ok, rejected or error:<code>")
    version: int | None = None
    complete: bool | None = None
    body_sha: str | None = None
    accepted: bool | None = None
    session_wall_ms: float | None = None
    candidates: list[CandidateTiming] | None = None
    header: str | None = Field(default=None, description="the step's header key")
    node: str | None = Field(default=None, description="the Ray node id the step ran on")
    mode: str | None = Field(default=None, description="open_task: file or prefix")


class TimingTotals(ToolOutput):
    calls: int
    total_ms: float
    queue_ms: float
    lean_ms: float
    overhead_ms: float = Field(description="total - queue - lean: leanrig's own time (>= 0)")


class TimingsResult(ToolOutput):
    session_id: str
    session_wall_ms: float
    totals: TimingTotals
    entries: list[LedgerEntry]


class CloseResult(ToolOutput):
    closed: bool
    session_wall_ms: float


class ProcessStatus(ToolOutput):
    pid: int | None
    slot: int
    key: str
    state: str
    uses: int
    rss_mb: float
    age_s: float


class AcquireStats(ToolOutput):
    count: int
    median_ms: float
    p95_ms: float
    histogram: dict[str, int]


class PoolStatus(ToolOutput):
    processes: list[ProcessStatus]
    queued: dict[str, int]
    started: int
    restarts: int
    killed: int
    start_failures: int
    acquire: AcquireStats


class NodeStatus(ToolOutput):
    node_id: str = Field(description="the Ray node id")
    address: str
    alive: bool
    slots: int = Field(description="lean_slots: Lean server processes the node may run")
    sessions: int = Field(description="sessions that stick to this node")
    inflight: int = Field(description="steps running on the node now")
    steps: int
    headers: list[str] = Field(description="header keys the router has sent to the node")
    queued: dict[str, int] = Field(description="waiting steps per header, in the node's pool")
    pool: PoolStatus | None = Field(description="the node's pool (null: not reported yet)")


class ServerStatusResult(ToolOutput):
    suite: str
    lean_version: str
    mode: str
    sessions: int
    pool: PoolStatus
    nodes: list[NodeStatus] | None = Field(
        default=None, description="Ray nodes (`serve --ray`); null with the local pool"
    )


class LibraryDeclaration(ToolOutput):
    name: str = Field(description="fully qualified name")
    kind: str = Field(description="theorem, def, inductive, structure, constructor, field, …")
    statement: str = Field(description="Lean's signature: name, universes, binders, type")
    file: str = Field(description="library file, relative to the suite")
    line: int = Field(description="1-based line of the declaration's name")
    docstring: str | None


class SearchLibraryResult(ToolOutput):
    results: list[LibraryDeclaration] = Field(description="best match first (BM25)")


class ReadLibraryResult(ToolOutput):
    name: str
    kind: str
    file: str
    line: int
    source: str = Field(description="the whole declaration: doc comment, signature and proof")


# -- the catalogue --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolDef:
    name: str
    title: str
    description: str
    input: type[ToolInput]
    output: type[ToolOutput]
    read_only: bool
    takes_client: bool  # the service method takes the caller's connection (`client`)
    library: bool = False  # LAD runs only: listed and callable when the service has a library

    @property
    def params(self) -> dict[str, tuple[type, str]]:
        """Argument name -> (Python type, description), as published."""
        out: dict[str, tuple[type, str]] = {}
        for name, f in self.input.model_fields.items():
            kind = f.annotation if isinstance(f.annotation, type) else list
            out[name] = (kind, f.description or "")
        return out


def _tool(
    name: str,
    title: str,
    description: str,
    input: type[ToolInput],
    output: type[ToolOutput],
    *,
    read_only: bool,
    takes_client: bool = True,
) -> ToolDef:
    return ToolDef(name, title, description, input, output, read_only, takes_client)


TOOLS: list[ToolDef] = [
    _tool(
        "list_tasks",
        "List tasks",
        "List the suite's tasks: id, title, field, difficulty.",
        NoArguments,
        ListTasksResult,
        read_only=True,
        takes_client=False,
    ),
    _tool(
        "open_task",
        "Open a task",
        "Open a proof session on a task. Returns session_id, the file text, the editable proof "
        "body and its range, and Lean's diagnostics and goals for the initial body. " + POSITIONS,
        OpenTaskInput,
        OpenTaskResult,
        read_only=False,
    ),
    _tool(
        "set_proof",
        "Set the proof body",
        "Replace the whole proof body (the text after the theorem's `:=`) and re-elaborate. "
        "Returns the new version's diagnostics, goals and `complete` (no errors, no sorry, no "
        "unsolved goals). Edits that would leave the theorem are rejected; the session then "
        "stays at its previous version.",
        SetProofInput,
        EditResult,
        read_only=False,
    ),
    _tool(
        "replace_in_proof",
        "Replace text in the proof",
        "Replace the single occurrence of `old` in the proof body with `new`, then re-elaborate "
        "(like set_proof).",
        ReplaceInProofInput,
        EditResult,
        read_only=False,
    ),
    _tool(
        "get_goals",
        "Goals at a position",
        "Goals at a position: tactic goals, the expected type of the term there, and structured "
        "goals (hypotheses and target). " + POSITIONS,
        GetGoalsInput,
        GoalsResult,
        read_only=True,
    ),
    _tool(
        "get_proof_state",
        "Current proof state",
        "The session's current text, body, diagnostics, goals and `complete`, without asking "
        "Lean again.",
        SessionInput,
        ProofStateResult,
        read_only=True,
    ),
    _tool(
        "try_proofs",
        "Try candidate proofs",
        "Elaborate several candidate bodies in parallel, one result per candidate; the session "
        "itself is unchanged.",
        TryProofsInput,
        TryProofsResult,
        read_only=True,
    ),
    _tool(
        "check_proof",
        "Final verdict",
        "The final, independent verdict on the session's current proof: fresh sandboxed Lean, "
        "no sorry, allowed axioms only, statement unchanged, nothing outside the body changed.",
        SessionInput,
        VerdictResult,
        read_only=True,
    ),
    _tool(
        "get_timings",
        "Session timings",
        "This session's ledger entries and totals (queue, Lean, overhead milliseconds).",
        SessionInput,
        TimingsResult,
        read_only=True,
    ),
    _tool(
        "close_session",
        "Close the session",
        "Close the session (records its wall-clock time).",
        SessionInput,
        CloseResult,
        read_only=False,
    ),
    _tool(
        "server_status",
        "Server status",
        "Pool stats: Lean processes with pids, states, queues, latency.",
        NoArguments,
        ServerStatusResult,
        read_only=True,
        takes_client=False,
    ),
]
TOOL_BY_NAME: dict[str, ToolDef] = {t.name: t for t in TOOLS}

# The LAD condition's tools: only a service with a library (`serve --condition lad`) lists
# and accepts them; elsewhere a call is an unknown tool / method.
LIBRARY_TOOLS: list[ToolDef] = [
    ToolDef(
        "search_library",
        "Search the library",
        "Search the verified library of this suite (consultation only: tasks do not import "
        "it) for declarations matching the words of `query`, best first: name, kind, statement, "
        "file, line, docstring. Read a hit's proof with read_library and adapt it.",
        SearchLibraryInput,
        SearchLibraryResult,
        read_only=True,
        takes_client=False,
        library=True,
    ),
    ToolDef(
        "read_library",
        "Read a library declaration",
        "The full source of a library declaration (doc comment, signature and proof), by name.",
        ReadLibraryInput,
        ReadLibraryResult,
        read_only=True,
        takes_client=False,
        library=True,
    ),
]
ALL_TOOLS: list[ToolDef] = [*TOOLS, *LIBRARY_TOOLS]


def tools_for(library: bool) -> list[ToolDef]:
    """The tools a service lists and accepts: ``TOOLS``, plus ``LIBRARY_TOOLS`` in LAD."""
    return ALL_TOOLS if library else TOOLS


# -- validation -----------------------------------------------------------------------------------

_JSON_TYPES = {"string_type": "a string", "int_type": "an integer", "list_type": "a list",
               "int_from_float": "an integer"}  # fmt: skip


def parse_input(tool: ToolDef, arguments: Any) -> ToolInput:
    """Validate JSON arguments (None: none given); raises `InvalidArguments` naming the field."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidArguments("the arguments must be a JSON object", field=None)
    try:
        return tool.input.model_validate(arguments)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        raise InvalidArguments(_explain(error), field=_field_of(error)) from None


def _field_of(error: Any) -> str | None:
    loc = [str(p) for p in error.get("loc", ())]
    return ".".join(loc) or None


def _explain(error: Any) -> str:
    kind, field, ctx = error["type"], _field_of(error), error.get("ctx") or {}
    name = f"`{field}`"
    if kind == "missing":
        return f"missing argument {name}"
    if kind == "extra_forbidden":
        return f"unknown argument {name}"
    if kind in _JSON_TYPES:
        return f"{name} must be {_JSON_TYPES[kind]}"
    if kind == "greater_than_equal":
        return f"{name} must be an integer >= {ctx.get('ge')}"
    if kind == "less_than_equal":
        return f"{name} must be an integer <= {ctx.get('le')}"
    if kind == "string_too_long":
        return f"{name} is over 1 MB ({ctx.get('max_length')} characters)"
    if kind == "string_too_short":
        return f"{name} must not be empty"
    if kind == "too_short" or kind == "too_long":
        return f"{name} needs 1 to {MAX_CANDIDATES} items ({ctx.get('actual_length')} given)"
    return f"{name}: {error.get('msg', 'invalid value')}"


# -- schemas --------------------------------------------------------------------------------------


def input_schema(tool: ToolDef) -> dict[str, Any]:
    """The published input schema: inline, closed, all properties required, no titles; a tool
    without arguments has no ``properties`` key (Gemini refuses an empty one)."""
    schema = plain_schema(tool.input.model_json_schema())
    if not schema.get("properties"):
        schema.pop("properties", None)
        schema.pop("required", None)
    return schema


def output_schema(tool: ToolDef) -> dict[str, Any]:
    return plain_schema(tool.output.model_json_schema())


def plain_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$ref``s, turn ``anyOf [X, null]`` into a nullable X, drop ``title``s."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
            merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
            return walk(merged)
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "title", "default"):
                continue
            if key == "properties":
                out[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                out[key] = walk(value)
        variants = out.get("anyOf")
        if isinstance(variants, list) and len(variants) == 2 and {"type": "null"} in variants:
            (other,) = [v for v in variants if v != {"type": "null"}]
            if isinstance(other.get("type"), str):
                out.pop("anyOf")
                out = {**other, **out, "type": [other["type"], "null"]}
        if out.get("type") == "object" and "properties" in out:
            out.setdefault("additionalProperties", False)
        return out

    result: dict[str, Any] = walk(schema)
    return result


__all__ = [
    "ALL_TOOLS",
    "LIBRARY_TOOLS",
    "MAX_BODY_CHARS",
    "MAX_CANDIDATES",
    "MAX_LIBRARY_RESULTS",
    "MAX_QUERY_CHARS",
    "TOOLS",
    "TOOL_BY_NAME",
    "BodyRange",
    "Candidate",
    "CandidateTiming",
    "CloseResult",
    "Diagnostic",
    "EditResult",
    "GoalsResult",
    "LedgerEntry",
    "LibraryDeclaration",
    "ListTasksResult",
    "OpenTaskResult",
    "PoolStatus",
    "ProofStateResult",
    "ReadLibraryResult",
    "SearchLibraryResult",
    "ServerStatusResult",
    "TimingsResult",
    "ToolDef",
    "ToolFailure",
    "ToolInput",
    "ToolOutput",
    "TryProofsResult",
    "VerdictResult",
    "input_schema",
    "output_schema",
    "parse_input",
    "tools_for",
]
