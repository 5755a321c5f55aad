"""The tool catalogue: names, descriptions and parameters, shared by the MCP and JSON-RPC servers.

Parameters are flat (strings, integers, lists of strings) so every input schema is a plain JSON
Schema object without ``$ref`` or ``anyOf`` (strict clients reject those).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..sessions import ProofService

POSITIONS = "Positions are 1-based lines and 1-based Unicode code point columns in the task file."


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    params: dict[str, tuple[type, str]]  # name -> (python type, description)
    session_scoped: bool


SID = (str, "the session_id returned by open_task")

TOOLS: list[ToolSpec] = [
    ToolSpec("list_tasks", "List the suite's tasks: id, title, field, difficulty.", {}, False),
    ToolSpec(
        "open_task",
        "Open a proof session on a task. Returns session_id, the file text, the editable proof "
        "body and its range, and Lean's diagnostics and goals for the initial body. " + POSITIONS,
        {"task_id": (str, "a task id from list_tasks")},
        False,
    ),
    ToolSpec(
        "set_proof",
        "Replace the whole proof body (the text after the theorem's `:=`) and re-elaborate. "
        "Returns the new version's diagnostics, goals and `complete` (no errors, no sorry, no "
        "unsolved goals). Edits that would leave the theorem are rejected; the session then "
        "stays at its previous version.",
        {"session_id": SID, "body": (str, "the new proof body")},
        True,
    ),
    ToolSpec(
        "replace_in_proof",
        "Replace the single occurrence of `old` in the proof body with `new`, then re-elaborate "
        "(like set_proof).",
        {
            "session_id": SID,
            "old": (str, "text occurring exactly once in the proof body"),
            "new": (str, "its replacement"),
        },
        True,
    ),
    ToolSpec(
        "get_goals",
        "Goals at a position: tactic goals, the expected type of the term there, and structured "
        "goals (hypotheses and target). " + POSITIONS,
        {
            "session_id": SID,
            "line": (int, "1-based line"),
            "column": (int, "1-based Unicode code point column"),
        },
        True,
    ),
    ToolSpec(
        "get_proof_state",
        "The session's current text, body, diagnostics, goals and "
        "`complete`, without asking Lean again.",
        {"session_id": SID},
        True,
    ),
    ToolSpec(
        "try_proofs",
        "Elaborate several candidate bodies in parallel, one result per candidate; the session "
        "itself is unchanged.",
        {"session_id": SID, "bodies": (list, "candidate proof bodies (1 to 16)")},
        True,
    ),
    ToolSpec(
        "check_proof",
        "The final, independent verdict on the session's current proof: "
        "fresh sandboxed Lean, no sorry, allowed axioms only, statement unchanged, nothing "
        "outside the body changed.",
        {"session_id": SID},
        True,
    ),
    ToolSpec(
        "get_timings",
        "This session's ledger entries and totals (queue, Lean, overhead milliseconds).",
        {"session_id": SID},
        True,
    ),
    ToolSpec(
        "close_session",
        "Close the session (records its wall-clock time).",
        {"session_id": SID},
        True,
    ),
    ToolSpec(
        "server_status", "Pool stats: Lean processes with pids, states, queues, latency.", {}, False
    ),
]
TOOL_BY_NAME = {t.name: t for t in TOOLS}


def bind(service: ProofService, spec: ToolSpec, client: str) -> Callable[..., Awaitable[Any]]:
    method = getattr(service, spec.name)

    async def call(**kwargs: Any) -> Any:
        if spec.session_scoped or spec.name == "open_task":
            kwargs["client"] = client
        return await method(**kwargs)

    return call


def validate_params(spec: ToolSpec, params: Any) -> dict[str, Any]:
    """Check JSON params against the spec; raises ValueError with a message naming the field."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    unknown = set(params) - set(spec.params)
    if unknown:
        raise ValueError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
    out: dict[str, Any] = {}
    for name, (ptype, _desc) in spec.params.items():
        if name not in params:
            raise ValueError(f"missing parameter `{name}`")
        value = params[name]
        if ptype is int:
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"`{name}` must be an integer")
        elif ptype is str:
            if not isinstance(value, str):
                raise ValueError(f"`{name}` must be a string")
        elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"`{name}` must be a list of strings")
        out[name] = value
    return out
