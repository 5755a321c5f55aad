"""Reading what Lean prints for the verdict: ``--json`` messages, query answers, compile errors.

Pure: must not run Lean or judge (the verifier decides)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from lsp_bridge import LineIndex, Pos, name_parts

# The list may be broken over lines; names print escaped where needed.
_AXIOMS_RE = re.compile(
    r"'(?P<name>.+)' (?:does not depend on any axioms|depends on axioms: \[(?P<list>.*)\])",
    re.DOTALL,
)
# "@T.{u_1, u_2} : type": "@" and the levels only where needed.
_NAME_PART = r"(?:«[^»]*»|[^\s.«»{}:]+)"
_CHECK_RE = re.compile(
    rf"@?(?P<name>{_NAME_PART}(?:\.{_NAME_PART})*)(?:\.\{{(?P<levels>[^}}]*)\}})? : (?P<type>.*)",
    re.DOTALL,
)


# Lean's answer, the same for every type, when printing fails and `pp.rawOnError` is off.
_UNPRINTED = "failed to pretty print expression"


@dataclass(frozen=True, slots=True)
class Statement:
    """A theorem's statement as ``#check @T`` under ``pp.all`` prints it. Equal iff the types
    are the same up to the names of the universe parameters (``u_1, …``)."""

    universes: tuple[str, ...]
    type: str

    def universe_list(self) -> str:
        return ".{" + ", ".join(self.universes) + "}"


def escape_name(name: str) -> str:
    """``name`` with every component escaped, so it reads back exactly (``«Demo».«main»``)."""
    return ".".join(f"«{part}»" for part in name_parts(name))


def _split_names(listing: str) -> tuple[str, ...]:
    names: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in listing:
        if ch == "," and not escaped:
            names.append("".join(current).strip())
            current = []
            continue
        escaped = escaped or ch == "«"
        escaped = escaped and ch != "»"
        current.append(ch)
    names.append("".join(current).strip())
    return tuple(n for n in names if n)


def parse_check(data: str, theorem: str, module: str | None = None) -> Statement | None:
    """The statement in ``#check @theorem``'s answer, or None if it is not about ``theorem``.
    ``module``: dropped from private names, so the submission and the task read the same."""
    match = _CHECK_RE.fullmatch(data.strip())
    if match is None or name_parts(match["name"]) != name_parts(theorem):
        return None
    levels = tuple(level.strip() for level in (match["levels"] or "").split(",") if level.strip())
    statement = match["type"]
    if statement.strip().startswith(_UNPRINTED):
        return None
    if module is not None:
        statement = statement.replace(f"_private.{module}.0.", "_private.0.")
    return Statement(universes=levels, type=statement)


def parse_axioms(messages: list[dict[str, Any]], theorem: str) -> tuple[str, ...] | None:
    """The axioms ``#print axioms theorem`` lists, or None if no message answers it."""
    for m in messages:
        match = _AXIOMS_RE.fullmatch(str(m.get("data", "")).strip())
        if match is None or name_parts(match["name"]) != name_parts(theorem):
            continue
        return _split_names(match["list"]) if match["list"] is not None else ()
    return None


def compile_failure(
    errors: list[dict[str, Any]],
    text: str,
    body_start: int,
    body_end: int,
    declaration: tuple[int, int],
) -> str:
    """The verdict's reason for compile ``errors`` (at least one): the body's first, else Lean's."""
    index = LineIndex(text)

    def position(error: dict[str, Any]) -> Pos | None:
        pos = error.get("pos")
        if not isinstance(pos, dict) or not isinstance(pos.get("line"), int):
            return None
        # Lean's column is 0-based; the verdict's positions are 1-based, as the agent's are.
        column = pos.get("column", 0)
        return Pos(pos["line"], (column if isinstance(column, int) else 0) + 1)

    def in_body(error: dict[str, Any]) -> bool:
        at = position(error)
        return at is not None and body_start <= index.offset_of(at) <= body_end

    error = next((e for e in errors if in_body(e)), errors[0])
    message = str(error.get("data", "")).splitlines()[0] if error.get("data") else "(no message)"
    at = position(error)
    if at is None:
        return f"compilation failed: {message}"
    where = error_place(index.offset_of(at), body_start, body_end, declaration)
    return f"compilation failed at {at.line}:{at.column} ({where}): {message}"


def error_place(offset: int, body_start: int, body_end: int, declaration: tuple[int, int]) -> str:
    """Whether an error at ``offset`` is in the body, on the declaration, or in the task's text."""
    if body_start <= offset <= body_end:
        return "in the proof body"
    if declaration[0] <= offset <= declaration[1]:
        return (
            "on the target theorem's declaration, not its statement: Lean reports some errors "
            "of a proof there, e.g. a recursive proof's failed termination"
        )
    return (
        "outside the proof body, in the task file's own text: the proof changed how the "
        "rest of the file reads, or the task file does not compile without it"
    )


def parse_json_messages(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return out
