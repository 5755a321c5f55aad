"""The tools' results: one closed pydantic model per tool, published as its ``outputSchema``.

Models only: output_builders.py builds them; no service, Lean or wire here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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

    code: str = Field(
        description="rejected, unknown_task, unknown_session, invalid_argument, "
        "timeout, busy, lean_error, lean_failure or unavailable"
    )
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
    kind: Literal["proof", "statement", "statement_and_proof"] = Field(
        description="what an attempt writes: the proof body (set_proof), the statement of "
        "`claim` (set_statement), or both"
    )
    claim: str = Field(description="the natural-language claim to state (statement kinds)")


class ListTasksResult(ToolOutput):
    suite: str
    tasks: list[TaskSummary]


StepStatus = Literal["complete", "incomplete", "error", "not_checked"]
STATUS_DESCRIPTION = (
    "the step's outcome: complete (no error, no sorry, no unsolved goal: check_proof gives the "
    "verdict), incomplete (no error, but sorry, unsolved goals or a rule not met), error (Lean "
    "reported an error), not_checked (refused before Lean, or Lean did not answer in time)"
)


class StepState(ToolOutput):
    version: int = Field(description="1 after open_task, +1 per accepted edit")
    status: StepStatus = Field(description=STATUS_DESCRIPTION)
    status_reason: str | None = Field(description="why not complete, in one line")
    diagnostics: list[Diagnostic]
    goals: list[str] = Field(description="goals at the end of the body (or the expected type)")
    complete: bool = Field(
        description="no error in the file, no sorry or unsolved goal in the "
        "target theorem; check_proof gives the verdict"
    )


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
    kind: Literal["proof", "statement", "statement_and_proof"] = Field(
        description="what this task's attempt writes: the proof body (set_proof), the "
        "statement of `claim` (set_statement), or both"
    )
    claim: str = Field(description="the natural-language claim to state (statement kinds)")
    statement: str = Field(
        description="the target's statement: its binders and type, between its name and `:=`"
    )


class EditResult(StepState):
    elapsed_ms: float


class StatementResult(ToolOutput):
    version: int = Field(description="1 after open_task, +1 per accepted edit")
    status: Literal["elaborated", "error", "not_checked"] = Field(
        description="elaborated (Lean accepts the statement: check_statement gives the final "
        "check), error (Lean reported an error), not_checked (Lean did not answer in time)"
    )
    status_reason: str | None = Field(description="why not elaborated, in one line")
    diagnostics: list[Diagnostic]
    statement: str | None = Field(
        description="the statement as Lean elaborated and printed it (null: it has errors)"
    )
    elapsed_ms: float


class StatementCheckResult(ToolOutput):
    valid: bool = Field(
        description="the statement elaborates in a fresh sandboxed Lean, only it changed, and "
        "it uses no sorry and no axiom off the suite's list; says nothing of the claim"
    )
    reasons: list[str]
    statement: str | None = Field(description="the statement as Lean printed it")
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
    status: StepStatus = Field(description=STATUS_DESCRIPTION)
    status_reason: str | None = Field(description="why not complete, in one line")
    rejected: str | None = Field(description="why the edit would leave the proof body")
    error: ToolFailure | None = Field(description="the candidate could not be elaborated")
    diagnostics: list[Diagnostic]
    goals: list[str]
    complete: bool
    elapsed_ms: float


class TryProofsResult(ToolOutput):
    results: list[Candidate]
    elapsed_ms: float = Field(description="wall-clock time of the whole call")


class HoverResult(ToolOutput):
    line: int
    column: int
    name: str | None = Field(description="the constant's full name, when the position is on one")
    signature: str | None = Field(description="Lean's signature or `term : type` there")
    docstring: str | None
    module: str | None = Field(description="the module it is imported from (null: this file)")
    found: bool = Field(description="false: Lean has nothing to show at this position")


class CheckTermResult(ToolOutput):
    term: str
    type: str | None = Field(description="the elaborated type (null when the term has errors)")
    shown: str | None = Field(description="Lean's `#check` line, `term : type`")
    in_context: bool
    errors: list[Diagnostic] = Field(
        description="Lean's errors about the term, positions "
        "counted in the term (line 1 is its first)"
    )


class DeclarationResult(ToolOutput):
    name: str = Field(description="the full name")
    kind: str = Field(description="theorem, def, axiom, inductive, structure, constructor, …")
    statement: str = Field(description="Lean's signature, universe parameters included")
    universe_params: list[str]
    docstring: str | None
    module: str | None = Field(description="the module declaring it (null: the task file)")
    file: str | None = Field(description="its file, relative to the suite, when readable here")
    line: int | None = Field(description="1-based line of the declaration in `file`")
    source: str | None = Field(description="its source text, when readable to this session")


class OutlineEntry(ToolOutput):
    name: str
    kind: str
    signature: str
    line: int


class OutlineResult(ToolOutput):
    declarations: list[OutlineEntry] = Field(
        description="the task file's declarations above the target, in file order"
    )
    truncated: bool = Field(description="only the last ones before the target are listed")


class Completion(ToolOutput):
    name: str = Field(description="the name to write")
    kind: str
    type: str | None


class CompletionsResult(ToolOutput):
    completions: list[Completion]
    truncated: bool = Field(description="more names matched; type more of the name")


class CodeAction(ToolOutput):
    title: str
    old: str = Field(description="replace_in_proof's `old`: occurs once in the body")
    new: str = Field(description="replace_in_proof's `new`")
    body: str = Field(description="the whole body after the edit (for set_proof)")


class CodeActionsResult(ToolOutput):
    actions: list[CodeAction]
    outside_body: int = Field(description="actions left out: they edit outside the proof body")


class ProfileEntry(ToolOutput):
    category: str = Field(description="Lean's trace class, e.g. Elab.step, Meta.isDefEq")
    ms: float
    line: int | None = Field(description="1-based task-file line when it is known")
    text: str = Field(description="what was elaborated (its first line)")


class ProfileResult(ToolOutput):
    total_ms: float = Field(description="Lean's elaboration of the target theorem, in all")
    entries: list[ProfileEntry] = Field(description="the costliest steps, costliest first")
    status: StepStatus = Field(description=STATUS_DESCRIPTION)


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


class NodeReport(ToolOutput):
    node_id: str = Field(description="the Ray node id")
    address: str
    alive: bool
    slots: int = Field(description="lean_slots: Lean server processes the node may run")
    sessions: int = Field(
        description="document holders that stick to this node: sessions, "
        "and each task's question document"
    )
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
    nodes: list[NodeReport] | None = Field(
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
