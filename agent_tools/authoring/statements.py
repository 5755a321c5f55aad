"""A task's statement as text: its signature split into binders and conclusion, and Lean's printed
statement made canonical. Must not decide what a statement means: Lean's answers do."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsp_bridge import COMMENT_KINDS, TokenKind, lean_tokens

from ..tasks import Task, declaration_head

_OPEN = "([{⦃⟨"
_CLOSE = ")]}⦄⟩"


@dataclass(frozen=True, slots=True)
class BinderGroup:
    text: str  # as written, brackets included: `{a b : α}`
    names: tuple[str, ...]  # () for an anonymous instance binder `[C α]`
    type: str  # the text after its `:` (the whole inside for `[C α]`)


@dataclass(frozen=True, slots=True)
class Signature:
    text: str  # after the name (universe parameters `.{u}` included), up to `:=`
    groups: tuple[BinderGroup, ...]
    conclusion: str
    universes: str = ""  # `.{u, v}` as written after the name, or ''

    @property
    def binders(self) -> str:
        return " ".join(g.text for g in self.groups)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for g in self.groups for n in g.names)


def signature(task: Task) -> Signature:
    _, name_end = declaration_head(task.text, task.span.decl_start)
    return split_signature(task.text[name_end : task.span.start - 2])


def split_signature(text: str) -> Signature:
    """``.{u} {α : Sort u} (x : α) : P x`` → its binder groups and conclusion."""
    tokens = [t for t in lean_tokens(text) if t.kind not in COMMENT_KINDS]
    groups: list[BinderGroup] = []
    depth = 0
    start = 0
    colon = len(text)
    universes = ""
    if len(tokens) > 1 and tokens[0].text(text) == "." and tokens[1].text(text) == "{":
        close = next((t for t in tokens if t.text(text) == "}"), None)
        if close is not None:
            universes = text[tokens[0].start : close.end]
            tokens = [t for t in tokens if t.start >= close.end]
    for token in tokens:
        piece = token.text(text)
        if token.kind is not TokenKind.SYMBOL:
            continue
        if piece in _OPEN:
            if depth == 0:
                start = token.start
            depth += 1
        elif piece in _CLOSE:
            depth -= 1
            if depth == 0 and text[start] in "([{⦃":
                groups.append(_group(text[start : token.end]))
        elif piece == ":" and depth == 0:
            colon = token.start
            break
    return Signature(text, tuple(groups), text[colon + 1 :].strip(), universes)


def _group(text: str) -> BinderGroup:
    inner = text[1:-1]
    depth = 0
    for token in lean_tokens(inner):
        piece = token.text(inner)
        depth += (piece in _OPEN) - (piece in _CLOSE)
        if piece == ":" and depth == 0 and token.kind is TokenKind.SYMBOL:
            names = tuple(inner[: token.start].split())
            return BinderGroup(text, names, inner[token.end :].strip())
    return BinderGroup(text, (), inner.strip())


# `#check`'s answers when its pretty printer fails (with `pp.rawOnError`: the raw text follows).
_FAILED = "failed to pretty print expression"
_RAW = re.compile(
    r"\[Error pretty printing expression: (?P<why>.*?)\.? Falling back to raw printer\.\]",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Printed:
    """The type in a ``#check`` answer: the statement as Lean printed it, or why it could not."""

    text: str  # the statement; '' when Lean could not print it
    failure: str = ""  # Lean's reason when it could not ('' when it printed)
    raw: str = ""  # the raw printer's text Lean fell back to (`pp.rawOnError`), if any


def read_printed(answer: str) -> Printed:
    """The type part of a ``#check`` message as a ``Printed``; a printer failure has no text."""
    answer = answer.strip()
    if answer.startswith(_FAILED):
        return Printed("", _FAILED)
    match = _RAW.match(answer)
    if match is not None:
        return Printed("", match["why"].strip(), answer[match.end() :].strip())
    return Printed(answer)


def canonical(statement: str) -> str:
    """Lean's printed statement with bound names renamed ``x0, x1, …`` and whitespace normalized."""
    tokens = [t for t in lean_tokens(statement) if t.kind not in COMMENT_KINDS]
    names: dict[str, str] = {}
    binding: set[int] = set()
    for i, token in enumerate(tokens):
        piece = token.text(statement)
        if piece in "({[⦃" or piece in ("fun", "λ", "∀", "∃"):
            j = i + 1
            run = []
            while j < len(tokens) and tokens[j].kind is TokenKind.IDENT:
                run.append(j)
                j += 1
            if run and j < len(tokens) and tokens[j].text(statement) in (":", "=>", ","):
                binding.update(run)
    out = []
    for i, token in enumerate(tokens):
        piece = token.text(statement)
        if i in binding and piece not in names:
            names[piece] = f"x{len(names)}"
        out.append(names.get(piece, piece) if token.kind is TokenKind.IDENT else piece)
    return " ".join(out)
