"""The term-mode portfolio ``bootstrap-terms/1`` (docs/equivalence.md): reads Lean's printed
statements as terms and writes candidate proofs of one from ``base``, the other. Pure: it
decides nothing, Lean checks every candidate; an unreadable term is a ``TermError``."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from lsp_bridge import LeanrigError

PORTFOLIO_VERSION: Final = "bootstrap-terms/1"

Strategy = Literal["same", "apply", "restructure", "assumption", "base-free"]
# Guard -> the strategies whose proofs do not count when it checks, as in the reference BEq+.
GUARDS: Final[Mapping[str, frozenset[str]]] = {
    "assumption": frozenset({"same", "apply", "restructure"}),
    "base-free": frozenset({"restructure"}),
}
STRICT_GUARDS: Final[Mapping[str, frozenset[str]]] = {
    "assumption": frozenset({"same", "apply", "restructure"}),
    "base-free": frozenset({"same", "apply", "restructure"}),
}


class TermError(LeanrigError):
    hint = "the equivalence grader falls back to the candidates that need no reading"


@dataclass(frozen=True, slots=True)
class Var:
    name: str
    explicit: bool = False


@dataclass(frozen=True, slots=True)
class Meta:
    index: int


@dataclass(frozen=True, slots=True)
class App:
    fn: Term
    args: tuple[Term, ...]


@dataclass(frozen=True, slots=True)
class Pi:
    name: str | None  # None: an arrow `A → B`
    kind: str  # "(" explicit, "{" implicit, "[" instance, "⦃" strict implicit
    dom: Term
    body: Term


@dataclass(frozen=True, slots=True)
class Lam:
    name: str | None
    kind: str
    dom: Term | None
    body: Term


@dataclass(frozen=True, slots=True)
class Sort:
    word: str  # "Prop", "Sort", "Type": levels are left to Lean


@dataclass(frozen=True, slots=True)
class Lit:
    text: str


@dataclass(frozen=True, slots=True)
class Proj:
    term: Term
    field: str


@dataclass(frozen=True, slots=True)
class Hole:
    pass


Term = Var | Meta | App | Pi | Lam | Sort | Lit | Proj | Hole
FALSE: Final = Var("False")


_STOP = set('()[]{}⦃⦄⟨⟩,:@→∀λ↔∧∨¬=≠≤<≥>+*/%^∣∃↦·-×"') | {" ", "\t", "\n", "\r"}
_MULTI = ("=>", "->", ":=", "↦")
_SINGLE = set("()[]{}⦃⦄⟨⟩,:@→∀λ↔∧∨¬=≠≤<≥>+*/%^∣∃·-×")
# token -> (left binding power, right binding power, head constant)
_INFIX: Final = {
    "↔": (20, 21, "Iff"),
    "∨": (30, 30, "Or"),
    "∧": (35, 35, "And"),
    "=": (50, 51, "Eq"),
    "≠": (50, 51, "Ne"),
    "≤": (50, 51, "LE.le"),
    "<": (50, 51, "LT.lt"),
    "≥": (50, 51, "GE.ge"),
    ">": (50, 51, "GT.gt"),
    "∣": (50, 51, "Dvd.dvd"),
    "+": (65, 66, "HAdd.hAdd"),
    "-": (65, 66, "HSub.hSub"),
    "*": (70, 71, "HMul.hMul"),
    "/": (70, 71, "HDiv.hDiv"),
    "%": (70, 71, "HMod.hMod"),
    "^": (75, 75, "HPow.hPow"),
}
_ARROW_BP: Final = 25
_BRACKETS: Final = {"(": ")", "{": "}", "[": "]", "⦃": "⦄"}
_KEYWORDS: Final = frozenset({"fun", "λ", "∀", "∃", "Sort", "Type", "Prop", "let", "have"})


def tokens(text: str) -> list[str]:
    """Lean's printed term as tokens; universe instantiations (``.{u, v}``) are dropped."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        multi = next((m for m in _MULTI if text.startswith(m, i)), None)
        if multi is not None:
            out.append("=>" if multi == "↦" else "→" if multi == "->" else multi)
            i += len(multi)
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
            continue
        if c in _SINGLE:
            out.append(c)
            i += 1
            continue
        j = i
        while j < n:
            if text[j] == "«":
                close = text.find("»", j)
                if close < 0:
                    raise TermError("an unclosed «")
                j = close + 1
            elif text.startswith(".{", j) or text[j] in _STOP:
                break
            else:
                j += 1
        out.append(text[i:j])
        if text.startswith(".{", j):
            close = text.find("}", j)
            if close < 0:
                raise TermError("an unclosed universe list")
            j = close + 1
        i = j
    return [t for t in out if t]


def _is_name(tok: str) -> bool:
    return tok not in _SINGLE and tok not in _MULTI and tok not in ("=>", ":=") and tok != ""


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

    def term(self, min_bp: int = 0) -> Term:
        left = self.prefix()
        while (op := self.peek()) is not None:
            if op == "→":
                if min_bp > _ARROW_BP:
                    break
                self.take()
                left = Pi(None, "(", left, self.term(_ARROW_BP))
            elif op in _INFIX:
                lbp, rbp, head = _INFIX[op]
                if lbp < min_bp:
                    break
                self.take()
                left = App(Var(head), (left, self.term(rbp)))
            else:
                break
        return left

    def prefix(self) -> Term:
        tok = self.peek()
        if tok == "∀":
            self.take()
            binders = self.binders(",")
            body = self.term()
            for name, kind, dom in reversed(binders):
                body = Pi(name, kind, dom or Hole(), body)
            return body
        if tok in ("fun", "λ"):
            self.take()
            binders = self.binders("=>")
            body = self.term()
            for name, kind, dom in reversed(binders):
                body = Lam(name, kind, dom, body)
            return body
        if tok == "∃":
            self.take()
            binders = self.binders(",")
            body = self.term()
            for name, kind, dom in reversed(binders):
                body = App(Var("Exists"), (Lam(name, kind, dom, body),))
            return body
        if tok == "¬":
            self.take()
            return App(Var("Not"), (self.term(40),))
        if tok in ("let", "have"):
            raise TermError(f"`{tok}` in a statement is not read")
        return self.application()

    def binders(self, end: str) -> list[tuple[str | None, str, Term | None]]:
        out: list[tuple[str | None, str, Term | None]] = []
        while (tok := self.peek()) != end:
            if tok is None:
                raise TermError(f"binders without {end!r}")
            if tok in _BRACKETS:
                close = _BRACKETS[tok]
                self.take()
                names: list[str | None] = []
                start = self.i
                while (t := self.peek()) is not None and _is_name(t) and t not in _KEYWORDS:
                    names.append(None if self.take() == "_" else t)
                if self.peek() == ":" and names:
                    self.take()
                elif tok == "[":  # an anonymous instance binder `[C α]`
                    self.i = start
                    names = [None]
                else:
                    raise TermError(f"a binder group without a type after {names}")
                dom = self.term()
                self.take(close)
                out += [(n, tok, dom) for n in names]
            elif _is_name(tok) and tok not in _KEYWORDS:
                bare: list[str | None] = []
                while (t := self.peek()) is not None and _is_name(t) and t not in _KEYWORDS:
                    bare.append(None if self.take() == "_" else t)
                dom = None
                if self.peek() == ":":
                    self.take()
                    dom = self.term()
                out += [(n, "(", dom) for n in bare]
            else:
                raise TermError(f"unexpected {tok!r} in binders")
        self.take(end)
        return out

    def starts_atom(self) -> bool:
        tok = self.peek()
        if tok is None:
            return False
        binding = ("fun", "λ", "∀", "∃", "let", "have")
        return tok in ("(", "@", "⟨") or (_is_name(tok) and tok not in binding)

    def application(self) -> Term:
        head = self.atom()
        args: list[Term] = []
        while True:
            if self.starts_atom():
                args.append(self.atom())
            elif self.peek() in ("fun", "λ", "∀", "∃", "¬"):
                args.append(self.prefix())
                break
            else:
                break
        if not args:
            return head
        if isinstance(head, App):
            return App(head.fn, head.args + tuple(args))
        return App(head, tuple(args))

    def atom(self) -> Term:
        tok = self.take()
        if tok == "(":
            inner = self.term()
            self.take(")")
            return self.projections(inner)
        if tok == "@":
            name = self.take()
            if not _is_name(name):
                raise TermError(f"expected a name after @, got {name!r}")
            return self.named(name, explicit=True)
        if tok == "⟨":
            raise TermError("anonymous constructors in a statement are not read")
        if tok in ("Sort", "Type"):
            self.level()
            return Sort(tok)
        if tok == "Prop":
            return Sort("Prop")
        if tok == "_":
            return Hole()
        if tok[0].isdigit() or tok[0] in "\"'":
            return Lit(tok)
        if _is_name(tok) and tok not in _KEYWORDS:
            return self.named(tok, explicit=False)
        raise TermError(f"unexpected {tok!r}")

    def named(self, name: str, *, explicit: bool) -> Term:
        parts = name.split(".")
        cut = len(parts)
        while cut > 1 and parts[cut - 1].isdigit():
            cut -= 1
        term: Term = Var(".".join(parts[:cut]), explicit)
        for index in parts[cut:]:
            term = Proj(term, index)
        return self.projections(term)

    def projections(self, term: Term) -> Term:
        while (tok := self.peek()) is not None and tok.startswith(".") and len(tok) > 1:
            self.take()
            for part in tok[1:].split("."):
                term = Proj(term, part)
        return term

    def level(self) -> None:
        tok = self.peek()
        if tok == "(":
            depth = 0
            while True:
                t = self.take()
                depth += t == "("
                depth -= t == ")"
                if depth == 0:
                    return
        if tok is not None and (tok[0].isdigit() or (_is_name(tok) and tok not in _KEYWORDS)):
            self.take()


def parse_term(text: str) -> Term:
    """Lean's printed term (``#check`` output after the colon) as a ``Term``."""
    p = _Parser(tokens(text))
    term = p.term()
    if p.peek() is not None:
        raise TermError(f"unexpected {p.peek()!r} after the term")
    return term


def free_names(term: Term) -> set[str]:
    match term:
        case Var(name):
            return {name}
        case App(fn, args):
            return free_names(fn).union(*(free_names(a) for a in args))
        case Pi(name, _, dom, body):
            return free_names(dom) | (free_names(body) - {name} if name else free_names(body))
        case Lam(name, _, dom, body):
            inner = free_names(body) - {name} if name else free_names(body)
            return inner | (free_names(dom) if dom is not None else set())
        case Proj(inner, _):
            return free_names(inner)
    return set()


def metas(term: Term) -> set[int]:
    match term:
        case Meta(index):
            return {index}
        case App(fn, args):
            return metas(fn).union(*(metas(a) for a in args))
        case Pi(_, _, dom, body):
            return metas(dom) | metas(body)
        case Lam(_, _, dom, body):
            return metas(body) | (metas(dom) if dom is not None else set())
        case Proj(inner, _):
            return metas(inner)
    return set()


def all_names(term: Term) -> set[str]:
    """Every name in ``term``, bound or free."""
    match term:
        case Var(name):
            return {name}
        case App(fn, args):
            return all_names(fn).union(*(all_names(a) for a in args))
        case Pi(name, _, dom, body) | Lam(name, _, dom, body):
            out = all_names(body) | ({name} if name else set())
            return out | (all_names(dom) if dom is not None else set())
        case Proj(inner, _):
            return all_names(inner)
    return set()


def replace(term: Term, names: Mapping[str, Term], metas_: Mapping[int, Term]) -> Term:
    """``term`` with free ``names`` and ``metas_`` replaced, renaming binders to avoid capture."""
    if not names and not metas_:
        return term
    match term:
        case Var(name):
            return names.get(name, term)
        case Meta(index):
            return metas_.get(index, term)
        case App(fn, args):
            return _app(replace(fn, names, metas_), [replace(a, names, metas_) for a in args])
        case Proj(inner, fld):
            return Proj(replace(inner, names, metas_), fld)
        case Pi(name, kind, dom, body):
            new_dom = replace(dom, names, metas_)
            name, body, scope = _under(name, body, names, metas_)
            return Pi(name, kind, new_dom, replace(body, scope, metas_))
        case Lam(name, kind, dom, body):
            new_dom2 = replace(dom, names, metas_) if dom is not None else None
            name, body, scope = _under(name, body, names, metas_)
            return Lam(name, kind, new_dom2, replace(body, scope, metas_))
    return term


def _under(
    name: str | None, body: Term, names: Mapping[str, Term], metas_: Mapping[int, Term]
) -> tuple[str | None, Term, dict[str, Term]]:
    inner = {k: v for k, v in names.items() if k != name}
    if name is None:
        return name, body, inner
    incoming: set[str] = set()
    for value in [*inner.values(), *metas_.values()]:
        incoming |= free_names(value)
    if name not in incoming:
        return name, body, inner
    fresh = _fresh(name, incoming | all_names(body))
    return fresh, replace(body, {name: Var(fresh)}, {}), inner


def _fresh(base: str, taken: set[str]) -> str:
    stem = re.sub(r"[^\w']", "", base.split(".")[-1]) or "x"
    for k in itertools.count(1):
        if f"{stem}_{k}" not in taken:
            return f"{stem}_{k}"
    raise AssertionError


def _app(fn: Term, args: list[Term]) -> Term:
    if not args:
        return fn
    if isinstance(fn, App):
        return App(fn.fn, fn.args + tuple(args))
    return App(fn, tuple(args))


def _spine(term: Term) -> tuple[Term, tuple[Term, ...]]:
    if isinstance(term, App):
        return term.fn, term.args
    return term, ()


def alpha_eq(a: Term, b: Term) -> bool:
    return unify(a, b, {}) is not None


@dataclass(slots=True)
class _Unifier:
    slack: int  # mismatches allowed between constant-headed terms, for Lean to unfold
    locals_: frozenset[str]
    subst: dict[int, Term] = field(default_factory=dict)
    top: Term | None = None  # the whole pattern: its head must match

    def run(self, p: Term, t: Term, bp: dict[str, int], bt: dict[str, int], depth: int) -> bool:
        if isinstance(p, Hole) or isinstance(t, Hole):
            return True
        if isinstance(p, Meta):
            if p.index in self.subst:
                return self.run(self.subst[p.index], t, {}, bt, depth)
            if free_names(t) & set(bt):
                return False
            self.subst[p.index] = t
            return True
        match p, t:
            case Var(x), Var(y):
                ix, iy = bp.get(x), bt.get(y)
                if ix is not None or iy is not None:
                    return ix == iy
                return x == y or self.mismatch(p, t, bp, bt)
            case App(), App():
                pf, pa = _spine(p)
                tf, ta = _spine(t)
                if len(pa) != len(ta):
                    return self.mismatch(p, t, bp, bt)
                saved = (self.slack, dict(self.subst))
                if self.run(pf, tf, bp, bt, depth) and all(
                    self.run(x, y, bp, bt, depth) for x, y in zip(pa, ta, strict=True)
                ):
                    return True
                self.slack, self.subst = saved
                return self.mismatch(p, t, bp, bt)
            case Pi(n1, _, d1, b1), Pi(n2, _, d2, b2):
                return self.run(d1, d2, bp, bt, depth) and self.run(
                    b1, b2, _bind(bp, n1, depth), _bind(bt, n2, depth), depth + 1
                )
            case Lam(n1, _, d1, b1), Lam(n2, _, d2, b2):
                doms = d1 is None or d2 is None or self.run(d1, d2, bp, bt, depth)
                return doms and self.run(
                    b1, b2, _bind(bp, n1, depth), _bind(bt, n2, depth), depth + 1
                )
            case Sort(w1), Sort(w2):
                return (w1 == "Prop") == (w2 == "Prop")
            case Lit(x), Lit(y):
                return x == y or self.mismatch(p, t, bp, bt)
            case Proj(x, f1), Proj(y, f2):
                return f1 == f2 and self.run(x, y, bp, bt, depth)
        return self.mismatch(p, t, bp, bt)

    def mismatch(self, p: Term, t: Term, bp: dict[str, int], bt: dict[str, int]) -> bool:
        if self.top is p or self.slack <= 0 or not (self.rigid(p, bp) and self.rigid(t, bt)):
            return False
        self.slack -= 1
        return True

    def rigid(self, term: Term, bound: dict[str, int]) -> bool:
        head, _ = _spine(term)
        if isinstance(head, Lit):
            return True
        return isinstance(head, Var) and head.name not in bound and head.name not in self.locals_


def _bind(env: dict[str, int], name: str | None, depth: int) -> dict[str, int]:
    return {**env, name: depth} if name else env


def unify(
    pattern: Term,
    term: Term,
    subst: Mapping[int, Term],
    *,
    slack: int = 0,
    locals_: frozenset[str] = frozenset(),
    whole: bool = False,
) -> dict[int, Term] | None:
    """Extend ``subst`` (metas → target terms) so ``pattern`` matches ``term``; a new dict or None.

    ``slack``: mismatches allowed between non-``locals_`` constant-headed subterms (``whole``:
    at the top too)."""
    u = _Unifier(slack, locals_, dict(subst), None if whole else pattern)
    return u.subst if u.run(pattern, term, {}, {}, 0) else None


def show(term: Term) -> str:
    """Lean text for ``term`` (levels as ``_``, applications explicit where printed so)."""
    match term:
        case Var(name, explicit):
            return f"@{name}" if explicit else name
        case Meta() | Hole():
            return "_"
        case Lit(text):
            return text
        case Sort(word):
            return word if word == "Prop" else f"{word} _"
        case Proj(inner, fld):
            return f"{_atomic(inner)}.{fld}"
        case App(fn, args):
            return " ".join([_atomic(fn), *(_atomic(a) for a in args)])
        case Pi(name, kind, dom, body):
            if name is None or name not in free_names(body):
                left = f"({show(dom)})" if isinstance(dom, Pi | Lam) else show(dom)
                return f"{left} → {show(body)}"
            close = _BRACKETS[kind]
            return f"∀ {kind}{name} : {show(dom)}{close}, {show(body)}"
        case Lam(name, kind, dom, body):
            bound = name or "_"
            binder = bound if dom is None else f"{kind}{bound} : {show(dom)}{_BRACKETS[kind]}"
            return f"fun {binder} => {show(body)}"
    raise AssertionError(term)


def _atomic(term: Term) -> str:
    text = show(term)
    simple = isinstance(term, Var | Meta | Hole | Lit | Proj) or (
        isinstance(term, Sort) and term.word == "Prop"
    )
    return text if simple else f"({text})"


def _paren(text: str) -> str:
    if re.fullmatch(r"@?[\w.'✝]+", text):
        return text
    if text.startswith("⟨") and text.endswith("⟩"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch in "⟨(["
            depth -= ch in "⟩)]"
            if depth == 0 and i < len(text) - 1:
                break
        else:
            return text
    return f"({text})"


@dataclass(frozen=True, slots=True)
class Binder:
    name: str
    kind: str
    type: Term


@dataclass(frozen=True, slots=True)
class Telescope:
    binders: tuple[Binder, ...]
    conclusion: Term


def _is_head(term: Term, name: str, arity: int) -> bool:
    fn, args = _spine(term)
    return isinstance(fn, Var) and fn.name == name and len(args) == arity


def split(term: Term) -> tuple[list[tuple[str | None, str, Term]], Term]:
    """``∀ binders, conclusion``, reading ``Not A`` as ``A → False``."""
    binders: list[tuple[str | None, str, Term]] = []
    while True:
        if isinstance(term, Pi):
            binders.append((term.name, term.kind, term.dom))
            term = term.body
        elif _is_head(term, "Not", 1):
            assert isinstance(term, App)
            binders.append((None, "(", term.args[0]))
            term = FALSE
        else:
            return binders, term


def telescope(text: str, avoid: set[str]) -> Telescope:
    """The printed statement, its binders renamed to distinct valid names not in ``avoid``."""
    raw, conclusion = split(parse_term(text))
    taken = set(avoid) | all_names(parse_term(text))
    binders: list[Binder] = []
    renamed: dict[str, Term] = {}
    used: set[str] = set()
    for name, kind, dom in raw:
        dom = replace(dom, renamed, {})
        readable = name is not None and re.fullmatch(r"[^\W\d]\w*'*", name) is not None
        if readable and name is not None and name not in used and name not in avoid:
            new = name
        else:
            new = _fresh("inst" if kind == "[" else "h" if name is None else name, taken | used)
        used.add(new)
        if name is not None:
            renamed = {**renamed, name: Var(new)}
        binders.append(Binder(new, kind, dom))
    return Telescope(tuple(binders), replace(conclusion, renamed, {}))


@dataclass(frozen=True, slots=True)
class Fact:
    text: str  # a Lean term, atomic or parenthesized
    type: Term
    uses_base: bool


@dataclass(frozen=True, slots=True)
class Proof:
    text: str
    uses_base: bool
    head_base: bool = False  # `base` applied at the head, its conclusion unchanged


@dataclass(frozen=True, slots=True)
class Candidate:
    """A proof of the target from ``base``, or, for a ``guard``, of the target alone."""

    strategy: str  # a `Strategy`, or a step of the tactic portfolio (equiv_tactics.py)
    proof: str
    guard: bool = False

    @property
    def uses_base(self) -> bool:
        return not self.guard


@dataclass(frozen=True, slots=True)
class DirectionPlan:
    proofs: tuple[Candidate, ...]
    guards: tuple[Candidate, ...]
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class _Search:
    taken: set[str]
    lenient: int = 0  # rigid mismatches allowed where `base` is applied
    max_width: int = 4  # alternatives kept per sub-goal
    steps: int = 20_000  # sub-goals left to try
    locals_: set[str] = field(default_factory=set)  # the target's binders and introduced names

    def fresh(self, stem: str) -> str:
        name = _fresh(stem, self.taken)
        self.taken.add(name)
        self.locals_.add(name)
        return name

    def closure(self, fact: Fact, depth: int = 2) -> list[Fact]:
        out = [fact]
        if depth == 0:
            return out
        for name in ("And", "Iff"):
            if _is_head(fact.type, name, 2):
                assert isinstance(fact.type, App)
                a, b = fact.type.args
                if name == "And":
                    parts = [(a, 1), (b, 2)]
                else:
                    parts = [(Pi(None, "(", a, b), 1), (Pi(None, "(", b, a), 2)]
                for typ, index in parts:
                    out += self.closure(
                        Fact(f"{_paren(fact.text)}.{index}", typ, fact.uses_base), depth - 1
                    )
        return out

    def prove(self, goal: Term, ctx: list[Fact], depth: int, symm: bool = True) -> Iterator[Proof]:
        self.steps -= 1
        if self.steps < 0:
            return
        raw, conclusion = split(goal)
        if raw:
            # As it is first: a fact may have exactly this type, or an unfolded `Not`.
            yield from self.direct(goal, ctx, depth, symm)
            names: list[str] = []
            renamed: dict[str, Term] = {}
            facts = list(ctx)
            for name, _, dom in raw:
                new = self.fresh("y")
                names.append(new)
                facts += self.closure(Fact(new, replace(dom, renamed, {}), False))
                if name is not None:
                    renamed = {**renamed, name: Var(new)}
            inner = replace(conclusion, renamed, {})
            # `@fun` binds implicit binders too.
            at = "@" if any(kind != "(" for _, kind, _ in raw) else ""
            for p in self.prove(inner, facts, depth, symm):
                yield Proof(f"{at}fun {' '.join(names)} => {p.text}", p.uses_base)
            return
        yield from self.direct(goal, ctx, depth, symm)

    def direct(self, goal: Term, ctx: list[Fact], depth: int, symm: bool) -> Iterator[Proof]:
        for f in ctx:
            if unify(f.type, goal, {}) is not None:
                yield Proof(f.text, f.uses_base, f.text == BASE)
        if depth <= 0:
            return
        for f in ctx:
            yield from self.apply(f, goal, ctx, depth)
        for name in ("And", "Iff"):
            if _is_head(goal, name, 2):
                assert isinstance(goal, App)
                a, b = goal.args
                if name == "Iff":
                    a, b = Pi(None, "(", a, b), Pi(None, "(", b, a)
                lefts = list(itertools.islice(self.prove(a, ctx, depth - 1), self.max_width))
                rights = list(itertools.islice(self.prove(b, ctx, depth - 1), self.max_width))
                for x, y in itertools.product(lefts, rights):
                    yield Proof(f"⟨{x.text}, {y.text}⟩", x.uses_base or y.uses_base)
        if symm and _is_head(goal, "Eq", 2):
            assert isinstance(goal, App)
            flipped = App(goal.fn, (goal.args[1], goal.args[0]))
            for p in itertools.islice(self.prove(flipped, ctx, depth - 1, False), self.max_width):
                yield Proof(f"Eq.symm {_paren(p.text)}", p.uses_base)

    def apply(self, fact: Fact, goal: Term, ctx: list[Fact], depth: int) -> Iterator[Proof]:
        """``fact`` applied so that its conclusion, an ``And`` part or ``Iff`` side is ``goal``."""
        binders, conclusion = _as_metas(fact.type)
        views = _views(conclusion)
        if not binders and len(views) == 1:
            return
        slack = self.lenient if fact.uses_base else 0
        others = [f for f in ctx if not (fact.uses_base and f.uses_base)]
        m = len(binders)
        for pattern, projection, premise in views:
            subst = unify(pattern, goal, {}, slack=slack, locals_=frozenset(self.locals_))
            if subst is None:
                continue
            extra = [Binder("_", "(", premise)] if premise is not None else []
            for args, used in self.fill(
                [*binders, *extra], conclusion, subst, others, depth - 1, slack
            ):
                head = f"@{fact.text} {' '.join(args[:m])}" if binders else fact.text
                if projection:
                    head = f"{_paren(head)}{projection}"
                if premise is not None:
                    head = f"{head} {args[m]}"
                yield Proof(head, fact.uses_base or used, fact.uses_base and not projection)

    def fill(
        self,
        binders: list[Binder],
        conclusion: Term,
        subst: dict[int, Term],
        ctx: list[Fact],
        depth: int,
        slack: int,
    ) -> Iterator[tuple[list[str], bool]]:
        """Arguments for ``binders`` (metas ``0…``): matched, ``_`` or a target variable when
        determined later, else a fact or a proof from ``ctx``."""
        later: list[set[int]] = []
        seen: set[int] = metas(conclusion)
        for b in reversed(binders):
            later.append(set(seen))
            seen |= metas(b.type)
        later.reverse()
        locals_ = frozenset(self.locals_)
        variables = [f for f in ctx if f.text in locals_ and not f.uses_base]

        def go(
            j: int, subst: dict[int, Term], chosen: list[str | int], used: bool
        ) -> Iterator[tuple[list[str], bool]]:
            if self.steps < 0:
                return
            self.steps -= 1
            if j == len(binders):
                args = [
                    c if isinstance(c, str) else _atomic(subst[c]) if c in subst else "_"
                    for c in chosen
                ]
                yield args, used
                return
            b = binders[j]
            if j in subst:
                yield from go(j + 1, subst, [*chosen, j], used)
                return
            need = replace(b.type, {}, subst)
            if j in later[j]:
                yield from go(j + 1, subst, [*chosen, j], used)
                # Same name first, then same position: statements often keep both.
                nth = _nth_text(variables, j)
                aligned = sorted(variables, key=lambda f: (f.text != b.name, f.text != nth))
                for f in aligned[: self.max_width]:
                    if unify(need, f.type, subst) is not None:
                        yield from go(j + 1, {**subst, j: Var(f.text)}, [*chosen, j], used)
                return
            matched = False
            for f in ctx:
                if isinstance(f.type, Sort) and not isinstance(need, Sort):
                    continue
                # A hypothesis may match a definition unfolded as a whole (`Nat.IsZero n`).
                extended = unify(need, f.type, subst, slack=slack, locals_=locals_, whole=True)
                if extended is not None:
                    matched = True
                    yield from go(j + 1, extended, [*chosen, _paren(f.text)], used or f.uses_base)
            if b.kind == "[":
                yield from go(j + 1, subst, [*chosen, "_"], used)
            elif not metas(need) and not matched:
                for p in itertools.islice(self.prove(need, ctx, depth), self.max_width):
                    yield from go(j + 1, subst, [*chosen, _paren(p.text)], used or p.uses_base)

        yield from go(0, subst, [], False)


def _views(conclusion: Term, depth: int = 2) -> list[tuple[Term, str, Term | None]]:
    """(type, projection, premise) for ``conclusion``, its ``And`` parts and ``Iff`` sides."""
    views: list[tuple[Term, str, Term | None]] = [(conclusion, "", None)]
    if depth > 0 and _is_head(conclusion, "And", 2):
        assert isinstance(conclusion, App)
        for index, part in enumerate(conclusion.args, start=1):
            views += [(t, f".{index}{path}", None) for t, path, _ in _views(part, depth - 1)]
    elif depth > 0 and _is_head(conclusion, "Iff", 2):
        assert isinstance(conclusion, App)
        a, b = conclusion.args
        views += [(b, ".1", a), (a, ".2", b)]
    return views


def _nth_text(facts: list[Fact], n: int) -> str | None:
    return facts[n].text if n < len(facts) else None


def _as_metas(typ: Term) -> tuple[list[Binder], Term]:
    raw, conclusion = split(typ)
    binders: list[Binder] = []
    renamed: dict[str, Term] = {}
    for index, (name, kind, dom) in enumerate(raw):
        binders.append(Binder(name or "_", kind, replace(dom, renamed, {})))
        if name is not None:
            renamed = {**renamed, name: Meta(index)}
    return binders, replace(conclusion, renamed, {})


def _dedupe(cands: Iterable[Candidate], limit: int) -> list[Candidate]:
    seen: set[str] = set()
    out: list[Candidate] = []
    for c in cands:
        if c.proof not in seen:
            seen.add(c.proof)
            out.append(c)
        if len(out) >= limit:
            break
    return out


BASE: Final = "base"


def direction_plan(
    source: str | None, target: str | None, *, limit: int = 48, guard_limit: int = 24
) -> DirectionPlan:
    """Candidates proving ``target`` from ``base : source``, then guards (at most the limits).
    Both statements as Lean printed them; None when it could not."""
    same = [Candidate("same", BASE), Candidate("same", f"@{BASE}")]
    notes: list[str] = []
    src = tgt = None
    try:
        tgt = telescope(target, {BASE}) if target is not None else None
        src = parse_term(source) if source is not None else None
    except TermError as exc:
        notes.append(f"the statements could not be read ({exc.message}): only `same` is tried")
    if tgt is None or src is None:
        return DirectionPlan(tuple(same), (), tuple(notes))
    names = [b.name for b in tgt.binders]
    intro = f"@fun {' '.join(names)} => " if names else ""
    src_binders, _ = split(src)
    if len(src_binders) == len(names) and names:
        same.append(Candidate("same", f"{intro}@{BASE} {' '.join(names)}"))
    taken = {BASE, *names, *all_names(src), *all_names(tgt.conclusion)}
    for b in tgt.binders:
        taken |= all_names(b.type)
    ctx: list[Fact] = []
    search = _Search(set(taken), locals_=set(names))
    for b in tgt.binders:
        ctx += search.closure(Fact(b.name, b.type, False))
    base = Fact(BASE, src, True)

    def found(lenient: int) -> Iterator[Candidate]:
        search.lenient = lenient
        for p in search.prove(tgt.conclusion, [*ctx, base], depth=3):
            if p.uses_base:
                yield Candidate("apply" if p.head_base else "restructure", intro + p.text)

    proofs = _dedupe(itertools.chain(same, found(0), found(2)), limit)
    guards = [Candidate("assumption", intro + n, guard=True) for n in names]
    search.lenient = 0
    for p in itertools.islice(search.prove(tgt.conclusion, ctx, depth=3), guard_limit * 4):
        if not p.uses_base:
            guards.append(Candidate("base-free", intro + p.text, guard=True))
    return DirectionPlan(tuple(proofs), tuple(_dedupe(guards, guard_limit)), tuple(notes))
