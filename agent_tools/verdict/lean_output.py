"""What Lean prints, read for the verdict: ``--json`` message lines, the trusted query's
answers (``#check @T`` under ``pp.all`` as a ``Statement``; ``#print axioms``), and the first
error of a failed compile with its place (the proof's body, the target's declaration, or the
task file's own text).

Pure: must not run Lean or judge (the verifier compares statements and axioms and decides).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from lsp_bridge import LineIndex, Pos, name_parts

# `#print axioms T`: "'T' does not depend on any axioms" / "'T' depends on axioms: [a, b]" (the
# list may be broken over lines; names print escaped where needed: 'Demo.«my thm»').
_AXIOMS_RE = re.compile(
    r"'(?P<name>.+)' (?:does not depend on any axioms|depends on axioms: \[(?P<list>.*)\])",
    re.DOTALL,
)
# `#check @T` under pp.all: "@T.{u_1, u_2} : type" ("@" only when T has implicit arguments, the
# universe list only when T is universe polymorphic, both possibly broken over lines).
_NAME_PART = r"(?:«[^»]*»|[^\s.«»{}:]+)"
_CHECK_RE = re.compile(
    rf"@?(?P<name>{_NAME_PART}(?:\.{_NAME_PART})*)(?:\.\{{(?P<levels>[^}}]*)\}})? : (?P<type>.*)",
    re.DOTALL,
)


# Lean's answer when its pretty printer fails on a type (a prelude without `nat_lit` fails on
# every numeral) and `pp.rawOnError` is off: the same sentence for every type. (With it on, the
# answer names the error and goes on with the raw printer's text: a statement, compared whole.)
_UNPRINTED = "failed to pretty print expression"


@dataclass(frozen=True, slots=True)
class Statement:
    """A theorem's statement as the trusted query prints it (``#check @T`` under ``pp.all``):
    its universe parameters, renamed ``u_1, u_2, …`` in declaration order, and its fully
    explicit type in terms of them. Two statements are equal iff the theorems have the same
    type up to the names of their universe parameters (count and order count)."""

    universes: tuple[str, ...]
    type: str

    def universe_list(self) -> str:
        return ".{" + ", ".join(self.universes) + "}"


def escape_name(name: str) -> str:
    """``name`` with every component escaped (``«Demo».«X».«main»``): any theorem name, also
    one with keywords or spaces in it, reads back as exactly that name."""
    return ".".join(f"«{part}»" for part in name_parts(name))


def _split_names(listing: str) -> tuple[str, ...]:
    """``a, «b, c»,\n d`` → ``("a", "«b, c»", "d")``: commas inside «» do not separate."""
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
    """The statement in ``#check @theorem``'s answer (pp.all), or None if the answer is not
    about ``theorem``. ``module``: the compiled module the answer is about, whose name Lean
    puts into its private names (``_private.LeanrigSubmission.0.N.two``): left out, so a
    statement naming a private declaration of the task file reads the same from the
    submission and from the untouched task, compiled under two names (a red-team sweep:
    every proof of such a task was rejected, "elaborated types differ")."""
    match = _CHECK_RE.fullmatch(data.strip())
    if match is None or name_parts(match["name"]) != name_parts(theorem):
        return None
    levels = tuple(level.strip() for level in (match["levels"] or "").split(",") if level.strip())
    statement = match["type"]
    if statement.strip().startswith(_UNPRINTED):
        return None  # a printer failure's text is the same for every statement: no statement
    if module is not None:
        statement = statement.replace(f"_private.{module}.0.", "_private.0.")
    return Statement(universes=levels, type=statement)


def parse_axioms(messages: list[dict[str, Any]], theorem: str) -> tuple[str, ...] | None:
    """The axioms ``#print axioms theorem`` lists (as Lean prints them), or None if no message
    answers it."""
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
    """The verdict's reason for Lean's ``errors`` (``--json`` messages, at least one) compiling
    the submission ``text``: the proof body's first error if it has one, else Lean's first;
    its position, and whether it is in the proof body ``[body_start, body_end]`` or in the
    task file's own text — an error there means the proof changed how the rest reads, or the
    task file itself does not compile (a suite to fix) — or on the target's declaration itself
    (``declaration``: its doc comment to its name, ``tasks.declaration_head``), where Lean
    reports some of a proof's errors."""
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
    """Whether an error at ``offset`` of a submission is the proof's — in its body, or on the
    target's declaration itself (``declaration``: ``tasks.declaration_head``), where Lean puts
    e.g. a recursive proof's failed termination — or the task file's (its statement included)."""
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
