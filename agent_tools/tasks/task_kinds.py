"""What an attempt writes per task kind: the proof body, the target's statement, or both. Pure.

A **statement** is the signature after the name, up to the body's ``:=``. A statement task's
hidden reference is read by the grader alone."""

from __future__ import annotations

from typing import Literal, get_args

from .locate import BodySpan, LocateError, declaration_head, declaration_index, locate_body

TaskKind = Literal["proof", "statement", "statement_and_proof"]
TASK_KINDS: tuple[TaskKind, ...] = get_args(TaskKind)


def writes_statement(kind: TaskKind) -> bool:
    return kind != "proof"


def writes_proof(kind: TaskKind) -> bool:
    return kind != "statement"


def statement_bounds(text: str, span: BodySpan) -> tuple[int, int]:
    """The target's statement bounds; raises LocateError if ``:=`` is not where ``span`` says."""
    name_end = declaration_head(text, span.decl_start)[1]
    assign = span.start - len(":=")
    if text[assign : span.start] != ":=" or assign < name_end:
        raise LocateError("the statement's `:=` is not where the body starts")
    return name_end, assign


def reference_statement(text: str) -> str:
    """The statement of the one theorem in a reference file; else raises LocateError."""
    theorems = {}
    for parts, source in declaration_index(text).items():
        if source is None:
            continue
        try:
            theorems[".".join(parts)] = locate_body(text, ".".join(parts))
        except LocateError:  # a definition the reference uses
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
