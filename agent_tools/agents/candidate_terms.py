"""Lean terms for the search agent: a small parser, first-order unification, explicit printing.

Not Lean's elaborator: Lean checks every candidate. Unreadable input raises `TermError`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from lsp_bridge import LeanrigError


class TermError(LeanrigError):
    hint = "the search agent skips what it cannot read"


@dataclass(frozen=True, slots=True)
class Sym:
    name: str


@dataclass(frozen=True, slots=True)
class App:
    head: str  # a name, `@name` for an explicit application
    args: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class Arrow:
    dom: Term
    cod: Term


Term = Sym | App | Arrow
HOLE: Final = Sym("_")


@dataclass(frozen=True, slots=True)
class Binder:
    name: str
    type: Term
    kind: str  # "(" explicit, "{" implicit, "[" instance, "⦃" strict implicit


@dataclass(frozen=True, slots=True)
class Signature:
    binders: tuple[Binder, ...]
    conclusion: Term


# Heads without implicit arguments: `@And p q` and `And p q` are the same term.
PLAIN_HEADS: Final = frozenset({"And", "Or", "Not", "Iff", "True", "False"})
# Heads with leading implicit arguments (how many), as the goal printer hides them.
IMPLICIT_HEADS: Final = {"Eq": 1, "Ne": 1, "HEq": 0}
_UNIVERSES = re.compile(r"\.\{[^}]*\}")
_TOKEN = re.compile(r"\s+|:=|=>|->|[()\[\]{}⦃⦄,:@→∀∧∨¬↔λ=]|[^\s()\[\]{}⦃⦄,:@→∀∧∨¬↔λ=]+")
_OPEN: Final = {"(": ")", "{": "}", "[": "]", "⦃": "⦄"}
_INFIX: Final = {"=": (50, 51), "∧": (35, 35), "∨": (30, 30), "↔": (20, 21), "→": (25, 25)}


def tokens(text: str) -> list[str]:
    text = _UNIVERSES.sub("", text)
    out = [t for t in _TOKEN.findall(text) if not t.isspace()]
    return ["→" if t == "->" else t for t in out]


def make_app(head: str, args: Iterable[Term]) -> Term:
    """An application in the canonical form unification compares."""
    args = tuple(args)
    bare = head.removeprefix("@")
    if bare in PLAIN_HEADS:
        head = bare
    elif bare in IMPLICIT_HEADS and not head.startswith("@"):
        head = "@" + bare
        args = (HOLE,) * IMPLICIT_HEADS[bare] + args
    if not args:
        return Sym(head)
    return App(head, args)


class _Parser:
    def __init__(self, toks: list[str]) -> None:
        self.toks = toks
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise TermError(f"expected {expected or 'more input'}, got {tok!r}")
        self.i += 1
        return tok

    def atom_start(self) -> bool:
        tok = self.peek()
        return tok is not None and (tok in ("(", "@") or _is_name(tok))

    def expr(self, min_prec: int = 0) -> Term:
        left = self.prefix()
        while (op := self.peek()) in _INFIX:
            prec, rhs = _INFIX[op]
            if prec < min_prec:
                break
            self.take()
            right = self.expr(rhs)
            match op:
                case "=":
                    left = make_app("Eq", (left, right))
                case "∧":
                    left = make_app("And", (left, right))
                case "∨":
                    left = make_app("Or", (left, right))
                case "↔":
                    left = make_app("Iff", (left, right))
                case _:
                    left = Arrow(left, right)
        return left

    def prefix(self) -> Term:
        if self.peek() == "¬":
            self.take()
            return make_app("Not", (self.expr(40),))
        if self.peek() in ("∀", "λ", "fun", "∃"):
            raise TermError(f"{self.peek()} is not supported")
        head = self.atom()
        args = []
        while self.atom_start():
            args.append(self.atom())
        if not args:
            return head
        if isinstance(head, Sym):
            return make_app(head.name, args)
        if isinstance(head, App):
            return App(head.head, head.args + tuple(args))
        raise TermError("an arrow applied to arguments")

    def atom(self) -> Term:
        tok = self.take()
        if tok == "(":
            inner = self.expr()
            self.take(")")
            while (field := self.peek()) is not None and _is_projection(field):
                self.take()  # `(e).f`: one atom, kept as written
                inner = Sym(f"({show(inner)}){field}")
            return inner
        if tok == "@":
            return Sym("@" + self.name())
        if _is_name(tok):
            return HOLE if tok == "_" else make_app(tok, ())
        raise TermError(f"unexpected {tok!r}")

    def name(self) -> str:
        tok = self.take()
        if not _is_name(tok):
            raise TermError(f"expected a name, got {tok!r}")
        return tok


def _is_projection(tok: str) -> bool:
    return tok.startswith(".") and len(tok) > 1 and _is_name(tok)


def _is_name(tok: str) -> bool:
    return (
        tok not in _OPEN
        and tok not in _OPEN.values()
        and tok
        not in (
            ",",
            ":",
            ":=",
            "=>",
            "@",
            "→",
            "∀",
            "∧",
            "∨",
            "¬",
            "↔",
            "λ",
            "=",
            "fun",
            "∃",
        )
    )


def parse_term(text: str) -> Term:
    p = _Parser(tokens(text))
    term = p.expr()
    if p.peek() is not None:
        raise TermError(f"unexpected {p.peek()!r} in {text!r}")
    return term


def parse_signature(text: str) -> Signature:
    """``binders : type`` (what follows a declaration's name, up to ``:=``)."""
    toks = tokens(text)
    depth = 0
    for i, tok in enumerate(toks):
        depth += tok in _OPEN
        depth -= tok in _OPEN.values()
        if tok == ":=" and depth == 0:
            toks = toks[:i]
            break
    p = _Parser(toks)
    binders: list[Binder] = []
    while (opener := p.peek()) is not None and opener in _OPEN:
        close = _OPEN[opener]
        p.take()
        start = p.i
        level = 0
        while not (p.peek() == close and level == 0):
            t = p.take()
            level += t in _OPEN
            level -= t in _OPEN.values()
        group = toks[start : p.i]
        p.take(close)
        if ":" in group:
            colon = group.index(":")
            names, type_toks = group[:colon], group[colon + 1 :]
        else:
            names, type_toks = ["_inst"], group
        sub = _Parser(type_toks)
        btype = sub.expr()
        binders += [Binder(n, btype, opener) for n in names]
    p.take(":")
    conclusion = p.expr()
    if p.peek() is not None:
        raise TermError(f"unexpected {p.peek()!r} after the statement")
    return Signature(tuple(binders), conclusion)


def declaration_parts(source: str) -> tuple[str, str, str | None]:
    """A declaration's (name, signature text after the name, body after ``:=`` or None)."""
    match = re.search(r"\b(?:theorem|lemma|def|abbrev|example)\s+([^\s({\[⦃:]+)", source)
    if match is None:
        raise TermError("no declaration keyword")
    rest = source[match.end() :]
    depth = 0
    for i, ch in enumerate(rest):
        depth += ch in "([{⦃"
        depth -= ch in ")]}⦄"
        if depth == 0 and rest.startswith(":=", i):
            return match.group(1), rest[:i], rest[i + 2 :].strip()
    return match.group(1), rest, None


Subst = dict[str, Term]


def substitute(term: Term, subst: Mapping[str, Term]) -> Term:
    match term:
        case Sym(name):
            return subst.get(name, term)
        case Arrow(dom, cod):
            return Arrow(substitute(dom, subst), substitute(cod, subst))
        case App(head, args):
            new_args = tuple(substitute(a, subst) for a in args)
            value = subst.get(head)
            if isinstance(value, Sym):
                return make_app(value.name, new_args)
            if isinstance(value, App):
                return App(value.head, value.args + new_args)
            return App(head, new_args)
    raise AssertionError(term)


def unify(pattern: Term, term: Term, variables: frozenset[str], subst: Subst) -> Subst | None:
    """A new ``subst`` extended so ``pattern`` matches ``term`` (holes match anything), or None."""
    if pattern == HOLE or term == HOLE:
        return subst
    if isinstance(pattern, Sym) and pattern.name in variables:
        if pattern.name in subst:
            return subst if unify(subst[pattern.name], term, frozenset(), {}) is not None else None
        return {**subst, pattern.name: term}
    if isinstance(pattern, Sym) and isinstance(term, Sym):
        return subst if pattern.name == term.name else None
    if isinstance(pattern, Arrow) and isinstance(term, Arrow):
        first = unify(pattern.dom, term.dom, variables, subst)
        return None if first is None else unify(pattern.cod, term.cod, variables, first)
    if isinstance(pattern, App) and isinstance(term, App):
        n = len(pattern.args)
        if pattern.head in variables:  # `f x` against `g a b`: f := g a
            if len(term.args) < n:
                return None
            head = make_app(term.head, term.args[: len(term.args) - n])
            out = unify(Sym(pattern.head), head, variables, subst)
            term_args = term.args[len(term.args) - n :]
        elif pattern.head == term.head and n == len(term.args):
            out, term_args = subst, term.args
        else:
            return None
        for p_arg, t_arg in zip(pattern.args, term_args, strict=True):
            if out is None:
                return None
            out = unify(p_arg, t_arg, variables, out)
        return out
    return None


def same(a: Term, b: Term) -> bool:
    return unify(a, b, frozenset(), {}) is not None


def has_hole(term: Term) -> bool:
    match term:
        case Sym(name):
            return name == "_"
        case Arrow(dom, cod):
            return has_hole(dom) or has_hole(cod)
        case App(_, args):
            return any(has_hole(a) for a in args)
    raise AssertionError(term)


def show(term: Term) -> str:
    """Explicit Lean: applications whose head has implicit arguments keep their `@`."""
    match term:
        case Sym(name):
            return name
        case Arrow(dom, cod):
            left = f"({show(dom)})" if isinstance(dom, Arrow) else show(dom)
            return f"{left} → {show(cod)}"
        case App(head, args):
            return " ".join([head, *(show_arg(a) for a in args)])
    raise AssertionError(term)


def show_arg(term: Term) -> str:
    text = show(term)
    return f"({text})" if isinstance(term, App | Arrow) else text


def rename_in_body(body: str, values: Mapping[str, str]) -> str:
    """``body`` with identifiers in ``values`` replaced, except names any ``fun`` binds."""
    bound: set[str] = set()
    for match in re.finditer(r"\bfun\b(.*?)=>", body, re.DOTALL):
        bound.update(match.group(1).split())
    parts = re.split(r"([^\s()\[\]{}⦃⦄,:@→∀∧∨¬↔λ=]+)", body)
    out = []
    for part in parts:
        head, dot, rest = part.partition(".")
        if part in values and part not in bound:
            out.append(values[part])
        elif dot and head in values and head not in bound:
            out.append(values[head] + dot + rest)
        else:
            out.append(part)
    return "".join(out)
