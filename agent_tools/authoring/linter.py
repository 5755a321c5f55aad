"""``leanrig suite lint``: statement defects that hand every agent free points, as ``Finding``s.

One Lean run per task elaborates probes placed right after the target's body; the codes are
listed in docs/suite-format.md. Must not change the suite."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel

from lsp_bridge import (
    COMMENT_KINDS,
    LeanInstall,
    LineIndex,
    TokenKind,
    declarations,
    find_lean,
    lean_tokens,
    name_parts,
)

from ..agents import Fact, Problem, Sym, TermError, parse_signature, prove
from ..tasks import Suite, Task, declaration_end, library_sources, load_suite, writes_statement
from ..verdict import escape_name, forbidden_constructs, parse_check
from .checker import lean_path_of, outside_body, with_reference
from .one_shot_lean import LeanAnswer, OneShotLean
from .statements import Signature, canonical, read_printed, signature

Severity = Literal["error", "warning", "info"]
# A claim with this many of its reference's characters in a row (spaces ignored) spells it out.
CLAIM_RUN = 24
CANDIDATES = 24  # per probe kind: a small budget, as an agent's first look would be
# Conventional constructor and reflexivity names, probed with a leading dot (`.refl`).
CONSTRUCTORS = ("refl", "rfl", "intro")
TACTICS = ("decide", "simp", "omega", "aesop")  # a full toolchain only
FALSE_TACTICS = ("simp_all", "omega", "aesop")
_UNUSED = re.compile(r"(?:unused variable|Variable name) `([^`]+)`")


class Finding(BaseModel):
    code: str
    severity: Severity
    task: str
    location: str  # FILE:LINE:COLUMN, the file relative to the suite
    message: str
    allowed: bool = False  # accepted by the suite's [lint] allow


def _finding(task: str, at: str, code: str, severity: Severity, message: str) -> Finding:
    return Finding(code=code, severity=severity, task=task, location=at, message=message)


class LintReport(BaseModel):
    suite: str
    ok: bool  # no finding of severity error or warning that the suite does not allow
    findings: list[Finding]


@dataclass(slots=True)
class _Probe:
    kind: str  # "trivial" | "false" | "sort" | "against"
    text: str  # the term or the binder name it probes
    first: int = 0  # its lines in the probed file (1-based, inclusive)
    last: int = 0


@dataclass(slots=True)
class _Probed:
    task: Task
    signature: Signature
    probes: list[_Probe] = field(default_factory=list)
    statement: str = ""
    unprintable: str = ""  # why Lean could not print the statement ('' when it did)
    answer: LeanAnswer | None = None
    namespace: str = ""


def _namespace_of(task: Task) -> str:
    """The namespace prefix the target's name opens: ``«PLift».`` for ``PLift.up_down``, else ''."""
    text = task.text
    tokens = (t for t in lean_tokens(text, task.span.decl_start) if t.kind not in COMMENT_KINDS)
    for token in tokens:
        if token.kind is TokenKind.IDENT and token.text(text) in ("theorem", "lemma"):
            name = next(tokens, None)
            if name is None:
                break
            parts = name_parts(name.text(text))[:-1]
            return "".join(f"{p}." if p == "_root_" else f"«{p}»." for p in parts)
    return ""


def lint_suite(root: Path, *, budget: float = 10.0, against: Path | None = None) -> LintReport:
    suite = load_suite(root)
    old = load_suite(against) if against is not None else None
    install = find_lean(suite.root)
    return anyio.run(_lint, suite, install, budget, old)


async def _lint(suite: Suite, install: LeanInstall, budget: float, old: Suite | None) -> LintReport:
    full = suite.spec.lean == "full" and install.mode == "toolchain"
    findings: list[Finding] = []
    probed: dict[str, _Probed] = {}
    old_statements: dict[str, str] = {}
    lean_path = await lean_path_of(suite, install)
    library = await anyio.to_thread.run_sync(_library_constructors, suite)
    limiter = anyio.CapacityLimiter(2)
    async with OneShotLean.scratch(install, lean_path, budget) as lean:

        async def one(i: int, task: Task) -> None:
            if writes_statement(task.kind):
                # An attempt writes the statement, so the reference's statement is probed.
                task = await anyio.to_thread.run_sync(with_reference, suite, task)
            prior = old.tasks.get(task.id) if old is not None else None
            job = _probe_file(task, full, prior, library)
            text = _probed_text(job, prior)
            async with limiter:
                job.answer = await lean.elaborate(f"Lint_{i}", text)
            _read_statement(job, text)
            probed[task.id] = job

        async with anyio.create_task_group() as tg:
            for i, task in enumerate(suite.tasks.values()):
                tg.start_soon(one, i, task)
    if old is not None:
        old_path = await lean_path_of(old, install)
        async with OneShotLean.scratch(install, old_path, budget) as lean:
            for task_id in suite.tasks:
                if task_id in old.tasks:
                    prior = _Probed(old.tasks[task_id], signature(old.tasks[task_id]))
                    text = _probed_text(prior, None)
                    prior.answer = await lean.elaborate(f"Old_{len(old_statements)}", text)
                    _read_statement(prior, text)
                    old_statements[task_id] = prior.statement
    for task in suite.tasks.values():
        findings += _text_findings(task)
        if writes_statement(task.kind):
            findings += _claim_findings(suite, task)
        else:
            findings += _lean_findings(probed[task.id])
    findings += _duplicates(suite, probed)
    if old is not None:
        findings += _changes(suite, old, probed, old_statements)
    allow = suite.spec.lint.allow if suite.spec.lint is not None else {}
    for f in findings:
        f.allowed = f.task in allow.get(f.code, [])
    ok = not any(f.severity != "info" and not f.allowed for f in findings)
    return LintReport(suite=suite.name, ok=ok, findings=findings)


def _problem(sig: Signature) -> Problem | None:
    """The search agent's view of the statement: its binders as hypotheses."""
    try:
        parsed = parse_signature(f"{sig.binders} : {sig.conclusion}")
    except TermError:
        return None
    hyps = {b.name: b.type for b in parsed.binders}
    return Problem(parsed.conclusion, hyps, [Fact(n, t) for n, t in hyps.items()])


def _first(terms: Iterator[str], n: int) -> list[str]:
    out: list[str] = []
    for term in terms:
        if term not in out:
            out.append(term)
        if len(out) == n:
            break
    return out


def _inductive_prop_constructors(text: str) -> list[str]:
    """Last names of the constructors of the inductive propositions ``text`` declares (lexical)."""
    names: list[str] = []
    for decl in declarations(text):
        if decl.keyword != "inductive":
            continue
        end = declaration_end(text, decl.keyword_start)
        pieces: list[str] = []
        for token in lean_tokens(text, decl.name_start):
            if token.start >= end:
                break
            if token.kind not in COMMENT_KINDS:
                pieces.append(token.text(text))
        names += _constructors_of(pieces)
    return list(dict.fromkeys(names))


def _constructors_of(pieces: list[str]) -> list[str]:
    """Constructor names from an ``inductive``'s tokens (name onwards), if its type is ``Prop``."""
    depth = 0
    colon = body = -1
    for k, piece in enumerate(pieces):
        depth += (piece in "([{⦃⟨") - (piece in ")]}⦄⟩")
        if depth == 0 and piece == ":" and colon < 0:
            colon = k
        if depth == 0 and piece in ("where", "|"):
            body = k
            break
    if colon < 0 or body < 0 or pieces[body - 1] != "Prop":
        return []
    found = []
    depth = 0
    for k, piece in enumerate(pieces[body:], start=body):
        depth += (piece in "([{⦃⟨") - (piece in ")]}⦄⟩")
        if depth == 0 and piece == "|" and k + 1 < len(pieces):
            found.append(pieces[k + 1].rsplit(".", 1)[-1])
    return found


def _library_constructors(suite: Suite) -> list[str]:
    names: list[str] = []
    for _, source in library_sources(suite):
        names += _inductive_prop_constructors(source.read_text(encoding="utf-8"))
    return list(dict.fromkeys(names))


def _probe_file(task: Task, full: bool, prior: Task | None, library: list[str]) -> _Probed:
    sig = signature(task)
    job = _Probed(task, sig, namespace=_namespace_of(task))
    problem = _problem(sig)
    trivial = ["True.intro"]
    false: list[str] = []
    if problem is not None:
        trivial += _first(prove(problem, problem.target, 0), CANDIDATES)
        false = _first(prove(problem, Sym("False"), 1), CANDIDATES) if sig.groups else []
    # `_` fills an explicit argument unification determines (`Eq.refl a` in a prelude).
    names = [*CONSTRUCTORS, *_inductive_prop_constructors(task.text), *library]
    for name in list(dict.fromkeys(names))[:CANDIDATES]:
        trivial += [f".{name}", f".{name} _"]
    if full:
        trivial += [f"by {t}" for t in TACTICS]
        false += [f"by {t}" for t in FALSE_TACTICS] if sig.groups else []
    job.probes += [_Probe("trivial", t) for t in dict.fromkeys(trivial)]
    job.probes += [_Probe("false", t) for t in dict.fromkeys(false)]
    job.probes += [_Probe("sort", name) for g in sig.groups for name in g.names]
    if prior is not None:
        job.probes.append(_Probe("against", ""))
    return job


def _probe_decl(job: _Probed, probe: _Probe, i: int, prior: Task | None) -> str:
    sig = job.signature
    name = f"theorem {job.namespace}«leanrig_lint_{i}»"
    heartbeats = "set_option maxHeartbeats 50000 in\n" if probe.text.startswith("by ") else ""
    if probe.kind == "trivial":
        return f"{heartbeats}{name}{sig.text}:=\n  {probe.text}\n"
    if probe.kind == "false":
        head = f"{name}{sig.universes} {sig.binders} : False"
        return f"{heartbeats}{head} :=\n  {probe.text}\n"
    if probe.kind == "sort":
        # In a binder, as in the target's signature, so auto-bound implicits bind alike.
        before: list[str] = []
        for group in sig.groups:
            if probe.text in group.names:
                binders = " ".join([*before, f"(_ : ({group.type} : Prop))"])
                return f"{name}{sig.universes} {binders} : ∀ p : Prop, p → p :=\n  fun _ h => h\n"
            before.append(group.text)
        return ""
    assert prior is not None
    old = signature(prior)
    args = " ".join(old.names)
    head = f"{name}{old.universes} {old.binders} : {old.conclusion}"
    return f"{head} :=\n  @{_target(job)} {args}\n"


def _target(job: _Probed) -> str:
    return escape_name(job.task.spec.theorem)


def _probed_text(job: _Probed, prior: Task | None) -> str:
    """The task file with the probes after the target's body (their lines recorded) and a query."""
    task = job.task
    file = task.unwrapped(task.text)  # same length and lines: positions stay the file's
    head = file[: task.span.end] + "\n\n"
    line = head.count("\n") + 1
    block = []
    for i, probe in enumerate(job.probes):
        decl = _probe_decl(job, probe, i, prior)
        probe.first, probe.last = line, line + decl.count("\n") - 1
        line += decl.count("\n") + 1
        block.append(decl)
    text = head + "\n".join(block) + "\n" + file[task.span.end :].lstrip("\n")
    query = f"set_option pp.all true in\nset_option pp.rawOnError true in\n#check @{_target(job)}"
    return text.rstrip("\n") + f"\n\n{query}\n"


def _read_statement(job: _Probed, text: str) -> None:
    assert job.answer is not None
    last = text.count("\n")
    for m in job.answer.at_lines(last, last):
        parsed = parse_check(m.text, job.task.spec.theorem)
        if parsed is None:
            continue
        printed = read_printed(parsed.type)
        if printed.text:
            job.statement = canonical(f"{parsed.universe_list()} {printed.text}")
        else:
            job.unprintable = printed.failure


def _closes(answer: LeanAnswer, probe: _Probe) -> bool:
    return not any(
        m.severity == "error" or m.uses_sorry for m in answer.at_lines(probe.first, probe.last)
    )


def _where(task: Task, offset: int) -> str:
    pos = LineIndex(task.text).pos_of(offset)
    return f"{task.spec.file}:{pos.line}:{pos.column}"


def _lean_findings(job: _Probed) -> list[Finding]:
    task, answer = job.task, job.answer
    assert answer is not None
    at = _where(task, task.span.decl_start)
    found: list[Finding] = []
    if answer.returncode is None:
        return [
            _finding(
                task.id,
                at,
                "budget-exceeded",
                "info",
                "Lean did not finish the probes within the budget",
            )
        ]
    closing = [p for p in job.probes if p.kind == "trivial" and _closes(answer, p)]
    contradiction = [p for p in job.probes if p.kind == "false" and _closes(answer, p)]
    if contradiction:
        found.append(
            _finding(
                task.id,
                at,
                "contradictory-hypotheses",
                "error",
                (
                    f"False follows from the hypotheses: "
                    f"`{contradiction[0].text}`; any conclusion is then free"
                ),
            )
        )
    if closing and closing[0].text == "True.intro" and job.signature.conclusion != "True":
        found.append(
            _finding(
                task.id,
                at,
                "unfolds-to-true",
                "error",
                (
                    f"the target `{job.signature.conclusion}` unfolds to True "
                    "(the preamble's definitions give it away): `True.intro` proves it"
                ),
            )
        )
    elif closing and not contradiction:
        found.append(
            _finding(
                task.id,
                at,
                "trivial-target",
                "error",
                f"a trivial term closes the target: `{closing[0].text}`",
            )
        )
    found += _unused(job, at)
    if job.unprintable:
        found.append(
            _finding(
                task.id,
                at,
                "statement-unprintable",
                "info",
                (
                    "Lean could not print the elaborated statement (`#check` under pp.all: "
                    f"{job.unprintable}), so it is the same as no other task's"
                ),
            )
        )
    return found


def _unused(job: _Probed, at: str) -> list[Finding]:
    """Binders Lean's linter reports unused whose type is not a proposition."""
    task, answer = job.task, job.answer
    assert answer is not None
    first = task.text.count("\n", 0, task.span.decl_start) + 1
    last = task.text.count("\n", 0, task.span.start) + 1
    named = {match[1] for m in answer.at_lines(first, last) if (match := _UNUSED.search(m.text))}
    data = {p.text for p in job.probes if p.kind == "sort" and not _closes(answer, p)}
    return [
        _finding(
            task.id,
            at,
            "unused-variable",
            "warning",
            (
                f"the variable `{name}` is bound but neither the target nor any "
                "hypothesis mentions it"
            ),
        )
        for name in job.signature.names
        if name in named and name in data
    ]


def _text_findings(task: Task) -> list[Finding]:
    """Axioms, ``opaque`` and ``implemented_by``/``extern`` in the task file outside the body."""
    around = outside_body(task)
    found: list[Finding] = []
    for decl in declarations(task.text):
        if task.span.start <= decl.keyword_start < task.span.end:
            continue
        at = _where(task, decl.keyword_start)
        if (
            decl.keyword == "axiom"
            and decl.full_name != "sorryAx"
            and ("unsafe" not in decl.modifiers)
        ):
            found.append(
                _finding(
                    task.id,
                    at,
                    "preamble-axiom",
                    "error",
                    f"the task file declares the axiom {decl.full_name}: a proof may use it",
                )
            )
        elif decl.keyword == "opaque":
            found.append(
                _finding(
                    task.id,
                    at,
                    "preamble-opaque",
                    "warning",
                    (
                        f"`opaque {decl.full_name}`: the kernel cannot see its value, so a "
                        "statement about it may be unprovable or free"
                    ),
                )
            )
    at = _where(task, 0)
    for reason in forbidden_constructs(around):
        if "implemented_by" in reason or "extern" in reason:
            found.append(
                _finding(task.id, at, "preamble-unchecked-code", "error", f"the preamble: {reason}")
            )
    return found


def _claim_findings(suite: Suite, task: Task) -> list[Finding]:
    """A statement task's claim spelling out its reference's type or ``CLAIM_RUN`` chars of it."""
    reference = with_reference(suite, task).statement
    claim = "".join(task.claim.split())
    kept = "".join(reference.split())
    _, _, type_ = reference.rpartition(" : ")
    runs = {"".join(type_.split())} | {
        kept[i : i + CLAIM_RUN] for i in range(max(0, len(kept) - CLAIM_RUN + 1))
    }
    spelled = next((r for r in sorted(runs, key=len, reverse=True) if r and r in claim), None)
    if spelled is None or len(spelled) < min(CLAIM_RUN, len(kept)):
        return []
    return [
        _finding(
            task.id,
            _where(task, task.span.decl_start),
            "claim-spells-reference",
            "error",
            (
                "the claim spells out the reference's Lean text "
                f"(`{spelled[:60]}`): an agent could copy the answer; say it in words"
            ),
        )
    ]


def _duplicates(suite: Suite, probed: dict[str, _Probed]) -> list[Finding]:
    first: dict[str, str] = {}
    found = []
    for task in suite.tasks.values():
        statement = probed[task.id].statement
        if not statement:
            continue
        other = first.setdefault(statement, task.id)
        if other != task.id:
            found.append(
                _finding(
                    task.id,
                    _where(task, task.span.decl_start),
                    "duplicate-statement",
                    "error",
                    (f"the same statement as task {other} (up to the names of bound variables)"),
                )
            )
    return found


def _changes(
    suite: Suite, old: Suite, probed: dict[str, _Probed], old_statements: dict[str, str]
) -> list[Finding]:
    found = []
    for task in suite.tasks.values():
        if task.id not in old.tasks:
            continue
        job = probed[task.id]
        at = _where(task, task.span.decl_start)
        old_text = " ".join(signature(old.tasks[task.id]).text.split())
        text_changed = old_text != " ".join(job.signature.text.split())
        if job.statement and job.statement == old_statements.get(task.id):
            if text_changed:
                found.append(
                    _finding(
                        task.id,
                        at,
                        "statement-text-changed",
                        "info",
                        ("the statement's text changed; Lean elaborates it to the same statement"),
                    )
                )
            continue
        if not text_changed and not job.statement:
            continue
        against = next(p for p in job.probes if p.kind == "against")
        assert job.answer is not None
        if _closes(job.answer, against):
            found.append(
                _finding(
                    task.id,
                    at,
                    "statement-changed",
                    "info",
                    (
                        "the statement changed, to one Lean shows "
                        "definitionally equal to the old (the new theorem proves the "
                        "old statement)"
                    ),
                )
            )
        else:
            found.append(
                _finding(
                    task.id,
                    at,
                    "statement-changed",
                    "warning",
                    (
                        "the statement changed and Lean does not "
                        "show it definitionally equal to the old one: results on the "
                        "two versions are not comparable"
                    ),
                )
            )
    found += [
        _finding(
            task_id,
            "suite.toml",
            "task-removed",
            "warning",
            "the old suite has this task; the new one does not",
        )
        for task_id in old.tasks
        if task_id not in suite.tasks
    ]
    return found
