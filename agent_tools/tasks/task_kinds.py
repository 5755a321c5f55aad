"""What an attempt writes, per task kind: a proof body (``proof``), the target's statement
(``statement``: autoformalization), or both (``statement_and_proof``). Pure text functions.

A target's **statement** is its signature after the name: its binders and its type, up to the
``:=`` that starts the body (``theorem main (a b : Nat) : a + b = b + a :=`` has the statement
`` (a b : Nat) : a + b = b + a ``). A statement task's reference is the statement of the one
theorem in a hidden Lean file; the grader (verdict.statement_verdict) alone reads it.
"""

from __future__ import annotations

from typing import Literal, get_args

from .locate import BodySpan, LocateError, declaration_head, declaration_index, locate_body

TaskKind = Literal["proof", "statement", "statement_and_proof"]
TASK_KINDS: tuple[TaskKind, ...] = get_args(TaskKind)


def writes_statement(kind: TaskKind) -> bool:
    """Does an attempt at a task of ``kind`` write the target's statement?"""
    return kind != "proof"


def writes_proof(kind: TaskKind) -> bool:
    """Does an attempt at a task of ``kind`` write the proof body?"""
    return kind != "statement"


def statement_bounds(text: str, span: BodySpan) -> tuple[int, int]:
    """The target's statement in ``text``: from the end of its name to its ``:=``.

    Raises LocateError: the body's ``:=`` is not where ``span`` says."""
    name_end = declaration_head(text, span.decl_start)[1]
    assign = span.start - len(":=")
    if text[assign : span.start] != ":=" or assign < name_end:
        raise LocateError("the statement's `:=` is not where the body starts")
    return name_end, assign


def reference_statement(text: str) -> str:
    """The statement of the one theorem in ``text`` (a reference file).

    Raises LocateError: no theorem, or more than one, or its statement is empty."""
    theorems = {}
    for parts, source in declaration_index(text).items():
        if source is None:
            continue
        try:
            theorems[".".join(parts)] = locate_body(text, ".".join(parts))
        except LocateError:  # not a theorem (a definition the reference uses)
            continue
    if len(theorems) != 1:
        found = (
            f"{len(theorems)} theorems ({', '.join(list(theorems)[:4])})"
            if theorems
            else ("no theorem")
        )
        raise LocateError(f"a reference file holds one theorem; this one has {found}")
    ((name, span),) = theorems.items()
    start, end = statement_bounds(text, span)
    statement = text[start:end]
    if not statement.strip():
        raise LocateError(f"the reference theorem {name} has an empty statement")
    return statement
