"""`leanrig agent search`: a model-free prover over MCP.

Tries candidate terms with ``try_proofs`` and sets the first complete one (exit 0; else 1)."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .candidate_terms import (
    HOLE,
    App,
    Arrow,
    Binder,
    Signature,
    Sym,
    Term,
    TermError,
    declaration_parts,
    parse_signature,
    parse_term,
    rename_in_body,
    same,
    show_arg,
    substitute,
    unify,
)
from .mcp_connection import AgentClient, ToolCallError, connect, load_config, task_id, workspace_dir
from .mcp_connection import write_usage as _write_usage

Subst = dict[str, Term]

BATCH: Final = 16  # try_proofs' limit
ZERO_USAGE: Final = {
    "input_tokens": 0,
    "cached_input_tokens": 0,
    "output_tokens": 0,
    "cost_usd": 0.0,
}
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Fact:
    proof: str  # a term
    type: Term


@dataclass(frozen=True, slots=True)
class Lemma:
    name: str
    signature: Signature
    body: str | None  # its proof term, when the source was read


@dataclass(slots=True)
class Problem:
    target: Term
    locals: dict[str, Term]  # name → type
    facts: list[Fact] = field(default_factory=list)


def body_offset(text: str, start: dict[str, int]) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: start["line"] - 1]) + start["column"] - 1


def goal_hypotheses(goal: str) -> tuple[dict[str, Term], Term | None]:
    """Hypotheses and target of a pretty-printed goal (unreadable lines are skipped)."""
    hyps: dict[str, Term] = {}
    target = None
    lines: list[str] = []
    for raw in goal.split("\n"):
        if raw.startswith((" ", "\t")) and lines:
            lines[-1] += " " + raw.strip()
        else:
            lines.append(raw)
    for line in lines:
        try:
            if line.startswith("⊢"):
                target = parse_term(line[1:])
            elif " : " in line:
                names, _, text = line.partition(" : ")
                t = parse_term(text)
                hyps.update({n: t for n in names.split()})
        except TermError:
            continue
    return hyps, target


def read_problem(opened: dict[str, Any]) -> Problem:
    """The target and local hypotheses: from the signature where it parses, else the goal."""
    text, start = opened["text"], opened["body_range"]["start"]
    hyps, goal_target = goal_hypotheses(opened["goals"][0]) if opened.get("goals") else ({}, None)
    target = goal_target
    head = text[: body_offset(text, start)]
    decls = list(re.finditer(r"\b(?:theorem|lemma|example)\b", head))
    if decls:
        try:
            _, sig_text, _ = declaration_parts(head[decls[-1].start() :] + ":=")
            sig = parse_signature(sig_text)
            hyps.update({b.name: b.type for b in sig.binders})
            target = sig.conclusion
        except TermError:
            pass
    if target is None:
        raise TermError("cannot read the theorem's statement")
    return Problem(target, hyps, [Fact(n, t) for n, t in hyps.items()])


def type_of(problem: Problem, term: Term) -> Term:
    if isinstance(term, Sym) and term.name in problem.locals:
        return problem.locals[term.name]
    if isinstance(term, App) and term.head in problem.locals:
        fn = problem.locals[term.head]
        for _ in term.args:
            if not isinstance(fn, Arrow):
                return HOLE
            fn = fn.cod
        return fn
    return HOLE


def derive(problem: Problem) -> None:
    """Add what projections and symmetry give from the hypotheses (two rounds)."""
    seen = {f.proof for f in problem.facts}
    for _ in range(2):
        new: list[Fact] = []
        for f in problem.facts:
            t, p = f.type, show_arg(Sym(f.proof)) if " " not in f.proof else f"({f.proof})"
            if isinstance(t, App) and t.head == "And" and len(t.args) == 2:
                a, b = t.args
                new += [
                    Fact(f"@And.left {show_arg(a)} {show_arg(b)} {p}", a),
                    Fact(f"@And.right {show_arg(a)} {show_arg(b)} {p}", b),
                    Fact(f"{p}.1", a),
                    Fact(f"{p}.2", b),
                ]
            if isinstance(t, App) and t.head == "@Eq" and len(t.args) == 3:
                ty, a, b = t.args
                ty = ty if ty != HOLE else type_of(problem, a)
                new.append(
                    Fact(
                        f"@Eq.symm {show_arg(ty)} {show_arg(a)} {show_arg(b)} {p}",
                        App("@Eq", (ty, b, a)),
                    )
                )
        for f in new:
            if f.proof not in seen:
                seen.add(f.proof)
                problem.facts.append(f)


def _applied(term: Term, head: str, arity: int) -> bool:
    """Whether ``term`` is ``head`` applied to exactly ``arity`` arguments."""
    return isinstance(term, App) and term.head == head and len(term.args) == arity


def prove(problem: Problem, goal: Term, depth: int) -> Iterator[str]:
    """Candidate proof terms of ``goal`` from hypotheses, constructors and core lemmas."""
    for f in problem.facts:
        if same(f.type, goal):
            yield f.proof
    g = show_arg(goal)
    if goal == Sym("True"):
        yield "True.intro"
    if isinstance(goal, App) and goal.head == "@Eq" and len(goal.args) == 3:
        ty, a, b = goal.args
        if ty == HOLE:
            ty = type_of(problem, a) if type_of(problem, a) != HOLE else type_of(problem, b)
        t = show_arg(ty)
        yield f"@Eq.refl {t} {show_arg(a)}"
        yield f"@Eq.refl {t} {show_arg(b)}"
        eqs = [f for f in problem.facts if _applied(f.type, "@Eq", 3)]
        for f1 in eqs:
            for f2 in eqs:
                assert isinstance(f1.type, App)
                assert isinstance(f2.type, App)
                _, x1, m1 = f1.type.args
                _, m2, y2 = f2.type.args
                if same(x1, a) and same(m1, m2) and same(y2, b):
                    yield (
                        f"@Eq.trans {t} {show_arg(a)} {show_arg(m1)} {show_arg(b)} "
                        f"{_paren(f1.proof)} {_paren(f2.proof)}"
                    )
        if (
            isinstance(a, App)
            and isinstance(b, App)
            and a.head == b.head
            and len(a.args) == len(b.args) == 1
        ):
            x, y = a.args[0], b.args[0]
            for f in eqs:
                assert isinstance(f.type, App)
                if same(f.type.args[1], x) and same(f.type.args[2], y):
                    xt = show_arg(type_of(problem, x))
                    yield (
                        f"@congrArg {xt} {t} {show_arg(x)} {show_arg(y)} {a.head} {_paren(f.proof)}"
                    )
    if depth > 0 and (_applied(goal, "And", 2) or _applied(goal, "Or", 2)):
        assert isinstance(goal, App)
        left, right = goal.args
        ls, rs = show_arg(left), show_arg(right)
        if goal.head == "And":
            for pa in _first(prove(problem, left, depth - 1), 3):
                for pb in _first(prove(problem, right, depth - 1), 3):
                    yield f"@And.intro {ls} {rs} {_paren(pa)} {_paren(pb)}"
        else:
            for pa in _first(prove(problem, left, depth - 1), 3):
                yield f"@Or.inl {ls} {rs} {_paren(pa)}"
            for pb in _first(prove(problem, right, depth - 1), 3):
                yield f"@Or.inr {ls} {rs} {_paren(pb)}"
    for f in problem.facts:
        ft = f.type
        if ft == Sym("False"):
            yield f"@False.elim {g} {_paren(f.proof)}"
        if (_applied(ft, "And", 2) or _applied(ft, "Or", 2)) and isinstance(goal, App):
            assert isinstance(ft, App)
            swapped = App(ft.head, (ft.args[1], ft.args[0]))
            if same(swapped, goal):
                sa, sb = (show_arg(x) for x in ft.args)
                yield f"@{ft.head}.symm {sa} {sb} {_paren(f.proof)}"
        if depth > 0 and isinstance(ft, Arrow) and same(ft.cod, goal):
            for pa in _first(prove(problem, ft.dom, depth - 1), 3):
                yield f"{_paren(f.proof)} {_paren(pa)}"


def _first(it: Iterator[str], n: int) -> list[str]:
    out = []
    for x in it:
        out.append(x)
        if len(out) == n:
            break
    return out


def _paren(term: str) -> str:
    return f"({term})" if (" " in term and not term.startswith("(")) else term


def instantiate(lemma: Lemma, problem: Problem, goal: Term, depth: int) -> Subst | None:
    """Binder values that make the lemma's conclusion ``goal``, or None."""
    variables = frozenset(b.name for b in lemma.signature.binders)
    subst = unify(lemma.signature.conclusion, goal, variables, {})
    if subst is None:
        return None
    binders = lemma.signature.binders
    for _ in range(3):
        for b in binders:  # premises from hypotheses
            if b.name in subst or not _is_premise(b, binders):
                continue
            want = substitute(b.type, subst)
            for f in problem.facts:
                found = unify(want, f.type, variables, subst)
                if found is not None:
                    subst = {**found, b.name: Sym(_paren(f.proof))}
                    break
        for b in binders:  # implicit arguments from the types of assigned values
            value = subst.get(b.name)
            if value is not None:
                known = type_of(problem, value)
                if known != HOLE:
                    subst = unify(b.type, known, variables, subst) or subst
    for b in binders:  # the rest: proved when fully known, else a hole
        if b.name not in subst:
            want = substitute(b.type, subst)
            proofs = (
                _first(prove(problem, want, depth), 1) if not _mentions(want, variables) else []
            )
            subst[b.name] = Sym(f"({proofs[0]})") if proofs else HOLE
    return subst


def _is_premise(binder: Binder, binders: tuple[Binder, ...]) -> bool:
    """Whether the binder takes a proof (filled from hypotheses, not by unification)."""
    t = binder.type
    if isinstance(t, App | Arrow):
        return not _is_sort(t)
    if t.name in ("True", "False"):
        return True
    return any(b.name == t.name and b.type == Sym("Prop") for b in binders)


def _is_sort(term: Term) -> bool:
    return (isinstance(term, Sym) and term.name in ("Prop", "Type")) or (
        isinstance(term, App) and term.head in ("Sort", "Type")
    )


def _mentions(term: Term, names: frozenset[str]) -> bool:
    match term:
        case Sym(name):
            return name in names
        case Arrow(dom, cod):
            return _mentions(dom, names) or _mentions(cod, names)
        case App(head, args):
            return head in names or any(_mentions(a, names) for a in args)
    raise AssertionError(term)


def lemma_candidates(lemma: Lemma, problem: Problem, goal: Term) -> Iterator[str]:
    subst = instantiate(lemma, problem, goal, 1)
    if subst is None:
        return
    values = {b.name: show_arg(subst[b.name]) for b in lemma.signature.binders}
    if any(
        v == "_"
        for b, v in zip(lemma.signature.binders, values.values(), strict=True)
        if b.kind != "["
    ):
        return  # an unproved premise: the lemma does not apply
    if lemma.body is not None:
        yield rename_in_body(lemma.body, values)
        yield lemma.body
    args = " ".join("_" if b.kind == "[" else values[b.name] for b in lemma.signature.binders)
    yield f"@{lemma.name} {args}".strip()


def queries(opened: dict[str, Any], title: str, problem: Problem) -> list[str]:
    words: list[str] = []
    doc = re.findall(
        r"/--(.*?)-/",
        opened["text"][: body_offset(opened["text"], opened["body_range"]["start"])],
        re.DOTALL,
    )
    heads = [_head(problem.target), *(_head(t) for t in problem.locals.values())]
    words += [h.removeprefix("@") for h in heads if h]
    out = [title, doc[-1] if doc else "", " ".join(dict.fromkeys(words))]
    out += list(dict.fromkeys(words))
    return [" ".join(_WORD.findall(q)) for q in out if _WORD.findall(q)]


def _head(term: Term) -> str | None:
    if isinstance(term, App):
        return term.head
    if isinstance(term, Sym) and term.name in ("True", "False"):
        return term.name
    return None


async def library_lemmas(
    client: AgentClient, qs: list[str], limit: int, log: list[dict[str, Any]]
) -> list[Lemma]:
    names: dict[str, dict[str, Any]] = {}
    for q in qs:
        try:
            found = await client.call("search_library", query=q, limit=limit)
        except ToolCallError as exc:
            log.append({"search_library": q, "error": exc.text})
            continue
        hits = found.get("results") or found.get("hits") or found.get("declarations") or []
        log.append({"search_library": q, "hits": [h.get("name") for h in hits]})
        for h in hits:
            if isinstance(h, dict) and isinstance(h.get("name"), str):
                names.setdefault(h["name"], h)
    lemmas = []
    for name, hit in names.items():
        source = None
        if "read_library" in client.tools:
            try:
                read = await client.call("read_library", name=name)
                source = read.get("source") or read.get("text")
            except ToolCallError as exc:
                log.append({"read_library": name, "error": exc.text})
        lemma = parse_lemma(name, hit.get("statement"), source)
        if lemma is not None:
            lemmas.append(lemma)
    return lemmas


def parse_lemma(name: str, statement: object, source: object) -> Lemma | None:
    if isinstance(source, str):
        try:
            _, sig_text, body = declaration_parts(source)
            return Lemma(name, parse_signature(sig_text), body)
        except TermError:
            pass
    if isinstance(statement, str):
        text = statement.strip()
        short = name.rsplit(".", 1)[-1]
        for prefix in (name, short):
            if text.startswith(prefix):
                text = text[len(prefix) :]
                break
        try:
            return Lemma(name, parse_signature(re.sub(r"^\.\{[^}]*\}", "", text)), None)
        except TermError:
            return None
    return None


async def run_search_agent(
    *, mcp_config: str | None, task: str | None, max_candidates: int, limit: int, check: bool
) -> int:
    config = load_config(mcp_config)
    workspace = workspace_dir()
    log: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    found: str | None = None
    tried = 0
    try:
        async with connect(config) as client:
            listed = await client.call("list_tasks")
            tid = task_id(task) or listed["tasks"][0]["id"]
            title = next((t.get("title", "") for t in listed["tasks"] if t["id"] == tid), "")
            opened = await client.call("open_task", task_id=tid)
            sid = opened["session_id"]
            problem = read_problem(opened)
            derive(problem)
            candidates: list[str] = list(dict.fromkeys(prove(problem, problem.target, 2)))
            if "search_library" in client.tools:
                lemmas = await library_lemmas(client, queries(opened, title, problem), limit, log)
                for lemma in lemmas:
                    for c in lemma_candidates(lemma, problem, problem.target):
                        if c not in candidates:
                            candidates.append(c)
            candidates = candidates[:max_candidates]
            log.append({"candidates": len(candidates)})
            for i in range(0, len(candidates), BATCH):
                batch = candidates[i : i + BATCH]
                bodies = ["\n  " + c.replace("\n", "\n  ") for c in batch]
                result = await client.call("try_proofs", session_id=sid, bodies=bodies)
                tried += len(batch)
                done = [r for r in result["results"] if r.get("complete")]
                if done:
                    found = bodies[int(done[0]["index"])]
                    break
            if found is not None:
                state = await client.call("set_proof", session_id=sid, body=found)
                log.append({"set_proof": found.strip(), "complete": state.get("complete")})
                if check:
                    verdict = await client.call("check_proof", session_id=sid)
                    log.append({"check_proof": verdict.get("accepted")})
    finally:
        _write_usage(workspace, ZERO_USAGE)
        summary = {
            "proof": found.strip() if found else None,
            "tried": tried,
            "elapsed_s": round(time.perf_counter() - t0, 3),
            "log": log,
        }
        print(orjson.dumps(summary).decode(), flush=True)
    if found is None:
        print("leanrig agent search: no candidate was complete", file=sys.stderr)
        return 1
    return 0
