"""The tool catalogue: a `ToolDef` per tool, argument validation and the published schemas.

MCP and JSON-RPC both use it, so they accept and reject the same calls with the same messages."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .errors import InvalidArguments
from .tool_inputs import (
    MAX_CANDIDATES,
    CheckTermInput,
    CompletionsInput,
    DeclarationInput,
    GetGoalsInput,
    NoArguments,
    OpenTaskInput,
    PositionInput,
    ReadLibraryInput,
    ReplaceInProofInput,
    SearchLibraryInput,
    SessionInput,
    SetProofInput,
    SetStatementInput,
    ToolInput,
    TryProofsInput,
)
from .tool_outputs import (
    CheckTermResult,
    CloseResult,
    CodeActionsResult,
    CompletionsResult,
    DeclarationResult,
    EditResult,
    GoalsResult,
    HoverResult,
    ListTasksResult,
    OpenTaskResult,
    OutlineResult,
    ProfileResult,
    ProofStateResult,
    ReadLibraryResult,
    SearchLibraryResult,
    ServerStatusResult,
    StatementCheckResult,
    StatementResult,
    TimingsResult,
    ToolOutput,
    TryProofsResult,
    VerdictResult,
)

POSITIONS = "Positions are 1-based lines and 1-based Unicode code point columns in the task file."


@dataclass(frozen=True, slots=True)
class ToolDef:
    name: str
    title: str
    description: str
    input: type[ToolInput]
    output: type[ToolOutput]
    read_only: bool
    takes_client: bool  # the service method takes the caller's connection (`client`)
    library: bool = False  # listed and callable only when the service has a library (LAD)

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
        "get_hover",
        "Hover at a position",
        "What Lean shows on hovering a position of the task file: the constant's full name, "
        "its signature (or `term : type` for a local), its docstring and the module it comes "
        "from. Use it to learn what a name in the statement or the proof means, instead of "
        'writing a question into the proof. Example: {"session_id": "…", "line": 7, '
        '"column": 12}. ' + POSITIONS,
        PositionInput,
        HoverResult,
        read_only=True,
    ),
    _tool(
        "check_term",
        "Check a term",
        "The type Lean gives a term, as `#check` would just before the target theorem; with "
        "`in_context: true` the target's hypotheses and variables are in scope (the term is "
        "elaborated where the proof begins). Nothing is edited: not the proof, not the "
        "session's history. Use it to try a lemma application before putting it in the proof. "
        'Errors come back positioned in the term. Example: {"session_id": "…", '
        '"term": "@And.intro q p", "in_context": true}.',
        CheckTermInput,
        CheckTermResult,
        read_only=True,
    ),
    _tool(
        "get_declaration",
        "Look up a declaration",
        "A declaration by name, as known at the target theorem: its kind, full statement "
        "(universe parameters included), docstring, module, and — when its file is readable "
        "here (the task file, the suite's own library) — file, line and source text. Use it "
        'to read what a lemma states before using it. Example: {"session_id": "…", '
        '"name": "And.intro"}.',
        DeclarationInput,
        DeclarationResult,
        read_only=True,
    ),
    _tool(
        "get_outline",
        "Outline of the task file",
        "The task file's declarations above the target theorem, in order: name, kind, "
        "signature, line — the definitions and lemmas the proof may use. Example: "
        '{"session_id": "…"}.',
        SessionInput,
        OutlineResult,
        read_only=True,
    ),
    _tool(
        "get_completions",
        "Complete a name",
        "Names Lean offers, with their kinds and types: at a position of the task file "
        "(`line` and `column`, `prefix` null), or for the start of a name as at the target "
        "theorem (`prefix`, `line` and `column` null). Use it to find a lemma's exact name. "
        'Example: {"session_id": "…", "line": null, "column": null, '
        '"prefix": "And."}. ' + POSITIONS,
        CompletionsInput,
        CompletionsResult,
        read_only=True,
    ),
    _tool(
        "get_code_actions",
        "Lean's suggestions",
        'Lean\'s code actions and "Try this" suggestions at a position in the proof body, '
        "each as an edit replace_in_proof applies as it is (`old`, `new`) and as the whole new "
        "body (for set_proof). Suggestions that would edit outside the body are left out and "
        'counted. Example: {"session_id": "…", "line": 9, "column": 5}. ' + POSITIONS,
        PositionInput,
        CodeActionsResult,
        read_only=True,
    ),
    _tool(
        "profile_proof",
        "Profile the proof",
        "Where Lean's elaboration time goes for the current proof body: the total, and the "
        "costliest steps (Lean's profiler trace: category, milliseconds, the body line when it "
        "is known, what was elaborated). Use it when a step is slow, before check_proof's "
        'time limit is at risk. Example: {"session_id": "…"}.',
        SessionInput,
        ProfileResult,
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
        "set_statement",
        "Set the statement",
        "Statement tasks (open_task's `kind`: statement, statement_and_proof): replace the "
        "target theorem's statement, its binders and type (the text between its name and "
        "`:=`), with one that states the task's `claim`, and re-elaborate. Returns Lean's "
        "diagnostics and the statement as Lean elaborated it. Only the statement may change: "
        "no new declarations. Example: "
        '{"session_id": "…", "statement": " (a b : Nat) : a + b = b + a"}.',
        SetStatementInput,
        StatementResult,
        read_only=False,
    ),
    _tool(
        "check_statement",
        "Check the statement",
        "Statement tasks: the final check of the session's statement in fresh sandboxed Lean: "
        "it elaborates, only the statement changed, no sorry, allowed axioms only. It does not "
        "say whether the statement matches the claim: that is graded after the attempt.",
        SessionInput,
        StatementCheckResult,
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


_JSON_TYPES = {
    "string_type": "a string",
    "int_type": "an integer",
    "list_type": "a list",
    "int_from_float": "an integer",
}


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


def input_schema(tool: ToolDef) -> dict[str, Any]:
    """The published input schema: inline, closed, every property required, no titles; no
    ``properties`` key for a tool without arguments (Gemini refuses an empty one)."""
    schema = plain_schema(tool.input.model_json_schema())
    if not schema.get("properties"):
        schema.pop("properties", None)
        schema.pop("required", None)
    else:  # strict clients send every key; a nullable one left out still reads as null
        schema["required"] = list(schema["properties"])
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
    "POSITIONS",
    "TOOLS",
    "TOOL_BY_NAME",
    "ToolDef",
    "input_schema",
    "output_schema",
    "parse_input",
    "plain_schema",
    "tools_for",
]
