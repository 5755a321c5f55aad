"""The equivalence grade (BEq+): each statement proved from the other in fresh sandboxed Lean.

1. Probe: ``#check`` both; an unknown name makes the pair ``invalid``; universes pinned pairwise.
2. Per direction, one Lean run checks every portfolio candidate (``base : first ⊢ second``), the
   guards, and that the target statement is finished (no ``sorryAx``, axioms allowed).
3. The first proof that counts is re-checked alone in a fresh Lean; only that makes ``proved``.
"Equivalent" needs both directions; Lean decides, text only proposes. The file is trusted to be
a statement file: what a candidate statement may contain is the caller's check."""

from __future__ import annotations

import itertools
import re
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import anyio

from lsp_bridge import LeanInstall, LeanrigError, lone_carriage_return
from repl_pool import SandboxPolicy, parse_header

from ..tasks import DEFAULT_AXIOMS, Suite, SuiteSpec
from .equiv_tactics import (
    CONVERT_DEPTHS,
    TACTIC_PORTFOLIO_VERSION,
    beq_plus_plan,
    exact_suggestion,
    tactic_proof,
)
from .equiv_terms import (
    GUARDS,
    PORTFOLIO_VERSION,
    STRICT_GUARDS,
    Candidate,
    DirectionPlan,
    direction_plan,
)
from .lean_output import Statement, escape_name, parse_axioms, parse_check, parse_json_messages
from .not_accepted import NotAccepted
from .sandboxed_lean import SandboxedLean
from .verifier import axioms_outside

DirectionOutcome = Literal["proved", "not_shown", "timed_out"]
Outcome = Literal["equivalent", "not_equivalent", "invalid"]

# Every order of the universe parameters is tried up to this many.
MAX_PERMUTED_UNIVERSES: Final = 3
# Lean's default, whatever the file sets before it.
CANDIDATE_HEARTBEATS: Final = 200_000
# Statements printed in full, as `equiv_terms` reads them back.
_PRINT_OPTIONS: Final = (
    "pp.fullNames true",
    "pp.universes true",
    "pp.funBinderTypes true",
    "pp.proofs true",
    "pp.fieldNotation false",
    "pp.structureInstances false",
)
_NAMED_RE = re.compile(r"'(?P<name>.+?)' (?:does not depend on any axioms|depends on axioms)")


class EquivalenceError(LeanrigError):
    hint = "check `leanrig doctor`: the grader could not run Lean"


@dataclass(frozen=True, slots=True)
class DirectionResult:
    """One direction: ``proved`` (``theorem`` was re-checked), ``not_shown`` or ``timed_out``."""

    outcome: DirectionOutcome
    strategy: str | None = None
    proof: str | None = None
    theorem: str | None = None
    elapsed_ms: float = 0.0
    tried: int = 0
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "strategy": self.strategy,
            "proof": self.proof,
            "theorem": self.theorem,
            "elapsed_ms": round(self.elapsed_ms, 1),
            "tried": self.tried,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Equivalence:
    """The grade of ``second`` (candidate) against ``first`` (reference); ``forward`` proves
    ``second`` from ``first``. An ``invalid`` pair has ``reasons`` and no direction tried."""

    outcome: Outcome
    first: str
    second: str
    forward: DirectionResult | None
    backward: DirectionResult | None
    reasons: tuple[str, ...]
    portfolio: str
    elapsed_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "first": self.first,
            "second": self.second,
            "forward": self.forward.to_json() if self.forward else None,
            "backward": self.backward.to_json() if self.backward else None,
            "reasons": list(self.reasons),
            "portfolio": self.portfolio,
            "elapsed_ms": round(self.elapsed_ms, 1),
        }


@dataclass(frozen=True, slots=True)
class _Placed:
    text: str
    first_line: int  # Lean's 1-based line of the block's first line

    @classmethod
    def insert(cls, text: str, at: int, block: Sequence[str]) -> _Placed:
        before, after = text[:at], text[at:]
        if before and not before.endswith("\n"):
            before += "\n"
        first = before.count("\n") + 1
        return cls(before + "\n".join(block) + "\n" + after, first)


@dataclass(frozen=True, slots=True)
class _Theorem:
    candidate: Candidate
    name: str
    lines: tuple[str, ...]  # the declaration, then its `#print axioms`


@dataclass(frozen=True, slots=True)
class _Proof:
    candidate: Candidate
    name: str  # the readable theorem's name
    declaration: tuple[str, ...]
    alone: tuple[str, ...] | None  # the same proof without ``base``, which must fail


@dataclass(slots=True)
class _Found:
    key: str
    started: float
    deadline: float
    tried: int
    done: DirectionResult | None = None
    invalid: list[str] = field(default_factory=list)
    proofs: list[_Proof] = field(default_factory=list)
    note: str | None = None

    def proved(self, proof: _Proof) -> DirectionResult:
        theorem = "\n".join(proof.declaration[:-1])
        c = proof.candidate
        return DirectionResult(
            "proved", c.strategy, c.proof, theorem, _ms(self.started), self.tried
        )

    def timed_out(self, proof: _Proof, exc: Exception) -> DirectionResult:
        note = f"the re-check of a proof by {proof.candidate.strategy} did not finish: {exc}"
        return DirectionResult(
            "timed_out", elapsed_ms=_ms(self.started), tried=self.tried, note=note
        )


@dataclass(frozen=True, slots=True)
class _Probe:
    statements: dict[str, Statement | None]  # None: Lean could not print it
    reasons: tuple[str, ...]  # why the pair is invalid
    file_error: str | None


def _standalone_suite(root: Path, axioms: Iterable[str]) -> Suite:
    spec = SuiteSpec(name="leanrig-equiv", axioms=list(axioms), tasks=[])
    return Suite(root=root, spec=spec, tasks={})


class EquivalenceGrader:
    """BEq+ between two statements of a file, with the ``suite``'s library and limits."""

    def __init__(
        self,
        suite: Suite | None,
        install: LeanInstall,
        *,
        library: Path | None,
        sandbox: SandboxPolicy | None = None,
        work_root: Path | None = None,
        allowed_axioms: Iterable[str] | None = None,
        strict_guards: bool = False,
        project: Path | None = None,
    ) -> None:
        """``project``, without a suite: where a Lake ``LEAN_PATH`` is asked (default: cwd)."""
        self.guards = STRICT_GUARDS if strict_guards else GUARDS
        if allowed_axioms is None:
            allowed_axioms = suite.spec.axioms if suite is not None else DEFAULT_AXIOMS
        self.allowed = tuple(allowed_axioms)
        root = (project or Path.cwd()).resolve()
        self.suite = suite or _standalone_suite(root, self.allowed)
        self.install = install
        self.sandbox = sandbox or SandboxPolicy()
        # Scratch paths become sandbox bind mounts, and Lean runs elsewhere.
        work = work_root.resolve() if work_root is not None else None
        self._lean = SandboxedLean(self.suite, install, library, self.sandbox, work)

    @property
    def portfolio(self) -> str:
        return PORTFOLIO_VERSION + ("+strict-guards" if self.guards is STRICT_GUARDS else "")

    async def grade(
        self,
        text: str,
        first: str,
        second: str,
        *,
        insert_at: int | None = None,
        budget_seconds: float,
    ) -> Equivalence:
        """Whether ``second`` (candidate) is equivalent to ``first`` (reference) in ``text``.
        Direction theorems go at ``insert_at`` (default: the end); ``budget_seconds`` bounds
        the probe and each direction."""
        started = time.perf_counter()
        if budget_seconds <= 0:
            raise EquivalenceError(f"the budget must be positive, not {budget_seconds:g} s")
        at = len(text) if insert_at is None else insert_at
        if not 0 <= at <= len(text):
            raise EquivalenceError(f"insert_at {at} is outside the file (0…{len(text)})")
        if lone_carriage_return(text) is not None:
            return self._invalid(
                first,
                second,
                started,
                "the file has a carriage return not followed by a line feed, "
                "which Lean does not accept",
            )
        at = len(text[:at].replace("\r\n", "\n"))  # as Lean reads CRLF
        text = text.replace("\r\n", "\n")
        try:
            probe = await self._probe(text, at, (first, second), budget_seconds)
        except _TimedOut as exc:
            return self._invalid(
                first, second, started, f"the statements were not read: {exc}", text=text
            )
        if probe.reasons:
            return self._invalid(first, second, started, *probe.reasons, text=text)
        one, two = probe.statements[first], probe.statements[second]
        results: dict[str, DirectionResult] = {}
        invalid: list[str] = []

        async def direction(key: str, source: str, target: str, check: tuple[str, ...]) -> None:
            found[key] = await self._direction(
                text,
                at,
                key,
                (source, probe.statements[source]),
                (target, probe.statements[target]),
                check,
                budget_seconds,
            )
            invalid.extend(found[key].invalid)

        found: dict[str, _Found] = {}
        if one is not None and two is not None and len(one.universes) != len(two.universes):
            note = (
                f"not tried: `{first}` has {len(one.universes)} universe parameter(s) and "
                f"`{second}` {len(two.universes)}; the grader pins them pairwise"
            )
            results = {k: DirectionResult("not_shown", note=note) for k in ("forward", "backward")}
            invalid += await self._statements_only(text, at, probe, budget_seconds)
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(direction, "forward", first, second, (second,))
                tg.start_soon(direction, "backward", second, first, (first,))
            if not invalid:
                results = await self._settle(text, at, found)
        if invalid:
            return self._invalid(first, second, started, *dict.fromkeys(invalid), text=text)
        forward, backward = results["forward"], results["backward"]
        proved = forward.outcome == "proved" and backward.outcome == "proved"
        return Equivalence(
            outcome="equivalent" if proved else "not_equivalent",
            first=first,
            second=second,
            forward=forward,
            backward=backward,
            reasons=(),
            portfolio=self.portfolio_for(text),
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )

    async def _probe(self, text: str, at: int, names: tuple[str, str], budget: float) -> _Probe:
        options = " in ".join(f"set_option {o}" for o in _PRINT_OPTIONS)
        block = [f"{options} in #check @{_ref(name)}" for name in dict.fromkeys(names)]
        placed = _Placed.insert(text, at, block)
        messages = await self._run(placed.text, budget, "probe")
        block_lines = range(placed.first_line, placed.first_line + len(block))
        # The file's own errors do not decide: the batches check the statements for `sorryAx`.
        own = [m for m in messages if m.get("severity") == "error" and _line(m) not in block_lines]
        file_error = _describe(own[0]) if own else None
        statements: dict[str, Statement | None] = {}
        reasons: list[str] = []
        for offset, name in enumerate(dict.fromkeys(names)):
            answers = [m for m in messages if _line(m) == placed.first_line + offset]
            errors = [m for m in answers if m.get("severity") == "error"]
            infos = [m for m in answers if m.get("severity") == "information"]
            if errors:
                reasons.append(
                    f"`{name}` is not a declaration Lean knows here: {_first_line(errors[0])}"
                )
            elif len(infos) != 1:
                reasons.append(
                    f"Lean said nothing about `{name}` (is it declared before the insertion "
                    "point, and does the file not stop early, e.g. at `#exit`?)"
                )
            else:
                statements[name] = parse_check(str(infos[0].get("data", "")), name)
        if reasons and file_error is not None:
            reasons.append(f"the file's first error: {file_error}")
        return _Probe(statements, tuple(reasons), file_error)

    def _statement_check(
        self, name: str, statement: Statement | None, nonce: str, index: int
    ) -> _Theorem:
        """A theorem whose axioms are those of ``name``'s statement, not of its body."""
        levels = [f"leanrig_s{i + 1}" for i in range(len(statement.universes))] if statement else []
        pinned = f".{{{', '.join(levels)}}}" if levels else ""
        thm = f"leanrig_equiv_{nonce}_statement_{index}"
        header = (
            f"theorem {thm}{pinned} (h : type_of% @{_ref(name)}{pinned}) :\n"
            f"    type_of% @{_ref(name)}{pinned} :="
        )
        return _Theorem(Candidate("same", "h"), thm, _declaration(header, "h", thm))

    def _statement_reasons(
        self, name: str, ok: bool, messages: list[dict[str, Any]], check: _Theorem, first_line: int
    ) -> list[str]:
        if ok:
            return []
        last = first_line + len(check.lines) - 1
        axioms = _axioms_at(messages, last, check.name) or ()
        if "sorryAx" in axioms:
            return [
                f"`{name}` is not a finished statement: it depends on sorryAx (an error "
                "Lean recovered from, or an unfinished definition it uses)"
            ]
        extra = axioms_outside(axioms, self.allowed)
        if extra:
            return [f"`{name}`'s statement uses axioms outside the allow-list: {', '.join(extra)}"]
        errors = [
            m for m in messages if m.get("severity") == "error" and first_line <= _line(m) <= last
        ]
        said = _first_line(errors[0]) if errors else "no answer from `#print axioms`"
        return [f"`{name}`'s statement could not be checked: {said}"]

    async def _statements_only(self, text: str, at: int, probe: _Probe, budget: float) -> list[str]:
        nonce = secrets.token_hex(4)
        checks = {
            n: self._statement_check(n, s, nonce, i)
            for i, (n, s) in enumerate(probe.statements.items())
        }
        placed, spans = _place(text, at, list(checks.values()))
        try:
            messages = await self._run(placed.text, budget, "statements")
        except (_TimedOut, _Crashed) as exc:
            return [f"the statements could not be checked: {exc}"]
        reasons: list[str] = []
        for (name, check), (start, end) in zip(checks.items(), spans, strict=True):
            ok = self._passes(
                messages, placed.first_line + start, placed.first_line + end, check.name
            )
            reasons += self._statement_reasons(name, ok, messages, check, placed.first_line + start)
        return reasons

    async def _direction(
        self,
        text: str,
        at: int,
        key: str,
        source: tuple[str, Statement | None],
        target: tuple[str, Statement | None],
        check: tuple[str, ...],
        budget: float,
    ) -> _Found:
        """The batch of ``source ⇒ target``: proofs to re-check, and why ``check`` is invalid."""
        started = time.perf_counter()
        deadline = started + budget
        (source_name, source_stmt), (target_name, target_stmt) = source, target
        source_type = source_stmt.type if source_stmt else None
        tactics = self._tactics(text)
        if tactics:
            steps = beq_plus_plan(source_type)
            plan = DirectionPlan(
                tuple(c for c in steps.candidates if c.uses_base),
                tuple(c for c in steps.candidates if not c.uses_base),
                steps.notes,
            )
        else:
            plan = direction_plan(source_type, target_stmt.type if target_stmt else None)
        count = len(target_stmt.universes) if target_stmt else 0
        levels = [f"leanrig_u{i + 1}" for i in range(count)]
        orders = (
            list(itertools.permutations(levels))
            if count <= MAX_PERMUTED_UNIVERSES
            else [tuple(levels)]
        )
        nonce = secrets.token_hex(4)
        statements = {source_name: source_stmt, target_name: target_stmt}
        checks = [self._statement_check(n, statements[n], nonce, i) for i, n in enumerate(check)]
        theorems: list[_Theorem] = []
        for order in orders:
            for cand in plan.proofs:
                name = f"leanrig_equiv_{nonce}_{len(theorems)}"
                header = _header(name, levels, order, source_name, target_name)
                theorems.append(_Theorem(cand, name, _declaration(header, cand.proof, name)))
        for cand in plan.guards:
            name = f"leanrig_equiv_{nonce}_{len(theorems)}"
            header = _header(name, levels, None, source_name, target_name)
            theorems.append(_Theorem(cand, name, _declaration(header, cand.proof, name)))
        placed, spans = _place(text, at, [*checks, *theorems])

        try:
            messages = await self._run(placed.text, deadline - time.perf_counter(), key)
        except _TimedOut as exc:
            done = DirectionResult(
                "timed_out", elapsed_ms=_ms(started), tried=len(theorems), note=str(exc)
            )
            return _Found(key, started, deadline, len(theorems), done=done)
        except _Crashed as exc:
            done = DirectionResult(
                "not_shown",
                elapsed_ms=_ms(started),
                tried=len(theorems),
                note=f"the candidates' Lean run failed: {exc}",
            )
            return _Found(key, started, deadline, len(theorems), done=done)
        passed_all = [
            self._passes(messages, placed.first_line + start, placed.first_line + end, thm.name)
            for thm, (start, end) in zip([*checks, *theorems], spans, strict=True)
        ]
        invalid: list[str] = []
        for name, thm, ok, (start, _) in zip(check, checks, passed_all, spans, strict=False):
            invalid += self._statement_reasons(name, ok, messages, thm, placed.first_line + start)
        if invalid:
            done = DirectionResult("not_shown", elapsed_ms=_ms(started))
            return _Found(key, started, deadline, 0, done=done, invalid=invalid)
        passed = passed_all[len(checks) :]
        own_spans = spans[len(checks) :]
        if tactics:
            starts = [placed.first_line + a for a, _ in own_spans]
            winners, note = _tactic_winners(theorems, passed, messages, starts)
        else:
            winners, note = self._term_winners(theorems, passed, plan)
        proofs: list[_Proof] = []
        for thm, cand, needs_base in winners[:3]:
            readable = f"leanrig_equiv_{key}"
            order = _order_of(thm, theorems, plan, orders)
            header = _header(readable, levels, order, source_name, target_name)
            declaration = _declaration(header, cand.proof, readable)
            # Counted only if it needs `base`: the same proof of the target alone must fail.
            alone = None
            if needs_base:
                bare = f"leanrig_equiv_{key}_alone"
                alone = _declaration(
                    _header(bare, levels, None, source_name, target_name), cand.proof, bare
                )
            proofs.append(_Proof(cand, readable, declaration, alone))
        if winners:
            failed = "no proof that passed in the batch passed alone in a fresh Lean (or, found "
            note = "; ".join([*plan.notes, failed + "by `exact?`, it did not need the other one)"])
        return _Found(key, started, deadline, len(theorems), proofs=proofs, note=note)

    async def _settle(
        self, text: str, at: int, found: dict[str, _Found]
    ) -> dict[str, DirectionResult]:
        """Each direction's result: its first proof that passes alone in a fresh Lean."""
        results = {key: f.done for key, f in found.items() if f.done is not None}
        pending = {key: f for key, f in found.items() if f.done is None and f.proofs}
        results |= {
            key: DirectionResult("not_shown", elapsed_ms=_ms(f.started), tried=f.tried, note=f.note)
            for key, f in found.items()
            if f.done is None and not f.proofs
        }
        if not pending:
            return results
        deadline = min(f.deadline for f in pending.values())
        try:
            passed = await self._recheck(
                text, at, [f.proofs[0] for f in pending.values()], deadline
            )
        except _TimedOut as exc:
            passed = [False] * len(pending)
            for key, f in pending.items():
                results[key] = f.timed_out(f.proofs[0], exc)
        for (key, f), ok in zip(list(pending.items()), passed, strict=True):
            if key in results:
                continue
            if ok:
                results[key] = f.proved(f.proofs[0])
                continue
            results[key] = DirectionResult(
                "not_shown", elapsed_ms=_ms(f.started), tried=f.tried, note=f.note
            )
            for proof in f.proofs[1:]:
                try:
                    [ok] = await self._recheck(text, at, [proof], f.deadline)
                except _TimedOut as exc:
                    results[key] = f.timed_out(proof, exc)
                    break
                if ok:
                    results[key] = f.proved(proof)
                    break
        return results

    def _term_winners(
        self, theorems: list[_Theorem], passed: list[bool], plan: DirectionPlan
    ) -> tuple[list[tuple[_Theorem, Candidate, bool]], str]:
        """The term portfolio's proofs that count under ``self.guards``, and why none does."""
        blocked: set[str] = set()
        guard_proof: dict[str, str] = {}
        for thm, ok in zip(theorems, passed, strict=True):
            if ok and thm.candidate.strategy in self.guards:
                blocked |= self.guards[thm.candidate.strategy]
                guard_proof.setdefault(thm.candidate.strategy, thm.candidate.proof)
        winners = [
            (thm, thm.candidate, False)
            for thm, ok in zip(theorems, passed, strict=True)
            if ok and thm.candidate.uses_base and thm.candidate.strategy not in blocked
        ]
        return winners, _why_not(theorems, passed, guard_proof, plan)

    def _passes(self, messages: list[dict[str, Any]], first: int, last: int, name: str) -> bool:
        """No error on lines ``first…last``; ``name`` uses no ``sorryAx`` nor disallowed axiom."""
        if any(m.get("severity") == "error" and first <= _line(m) <= last for m in messages):
            return False
        axioms = _axioms_at(messages, last, name)
        return (
            axioms is not None
            and "sorryAx" not in axioms
            and not axioms_outside(axioms, self.allowed)
        )

    async def _recheck(
        self, text: str, at: int, proofs: list[_Proof], deadline: float
    ) -> list[bool]:
        """Whether each proof passes in a fresh Lean and its ``alone`` form, if any, does not."""
        block: list[str] = []
        starts: list[int] = []
        for proof in proofs:
            starts.append(len(block))
            block.extend((*proof.declaration, *(proof.alone or ())))
        placed = _Placed.insert(text, at, block)
        try:
            messages = await self._run(placed.text, deadline - time.perf_counter(), "recheck")
        except _Crashed:
            return [False] * len(proofs)
        results: list[bool] = []
        for proof, start in zip(proofs, starts, strict=True):
            first = placed.first_line + start
            last = first + len(proof.declaration) - 1
            ok = self._passes(messages, first, last, proof.name)
            if ok and proof.alone is not None:
                bare = proof.alone[-1].removeprefix("#print axioms ")
                ok = not self._passes(messages, last + 1, last + len(proof.alone), bare)
            results.append(ok)
        return results

    def _tactics(self, text: str) -> bool:
        """A full toolchain and a non-``prelude`` file: the tactic portfolio grades ``text``."""
        return self.install.mode == "toolchain" and not parse_header(text).prelude

    def portfolio_for(self, text: str) -> str:
        if self._tactics(text):
            return TACTIC_PORTFOLIO_VERSION
        return self.portfolio

    async def _run(self, text: str, timeout: float, stem: str) -> list[dict[str, Any]]:
        """Lean's ``--json`` messages on ``text`` from a fresh sandboxed process."""
        if timeout <= 0:
            raise _TimedOut("the budget was spent")
        lean = str(self.install.lean)
        async with self._lean.scratch(f"leanrig-equiv-{stem}-") as work:
            src = work / "LeanrigEquiv.lean"
            await anyio.Path(src).write_text(text, encoding="utf-8")
            try:
                result = await self._lean.run([lean, "--json", str(src)], work, work, timeout)
            except NotAccepted as exc:
                reason = exc.reasons[0] if exc.reasons else "Lean failed"
                if reason.startswith("timeout"):
                    raise _TimedOut(f"Lean did not finish within {timeout:.1f} s") from exc
                if (
                    reason.startswith("crash: ")
                    and "killed by signal" not in reason
                    and ("exited with status" not in reason)
                ):
                    raise EquivalenceError(f"Lean could not run: {reason}") from exc
                raise _Crashed(reason) from exc
        return parse_json_messages(result.stdout)

    def _invalid(
        self, first: str, second: str, started: float, *reasons: str, text: str = "prelude"
    ) -> Equivalence:
        return Equivalence(
            outcome="invalid",
            first=first,
            second=second,
            forward=None,
            backward=None,
            reasons=reasons,
            portfolio=self.portfolio_for(text),
            elapsed_ms=(time.perf_counter() - started) * 1000,
        )


class _TimedOut(Exception):
    pass


class _Crashed(Exception):
    pass


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _ref(name: str) -> str:
    """``name`` as a reference from any scope."""
    return f"_root_.{escape_name(name)}"


def _header(
    name: str, levels: list[str], order: tuple[str, ...] | None, source: str, target: str
) -> str:
    params = f".{{{', '.join(levels)}}}" if levels else ""
    pinned = f".{{{', '.join(levels)}}}" if levels else ""
    if order is None:  # a guard
        return f"theorem {name}{params} : type_of% @{_ref(target)}{pinned} :="
    source_levels = f".{{{', '.join(order)}}}" if order else ""
    return (
        f"theorem {name}{params} (base : type_of% @{_ref(source)}{source_levels}) :\n"
        f"    type_of% @{_ref(target)}{pinned} :="
    )


def _declaration(header: str, proof: str, name: str) -> tuple[str, ...]:
    return (
        f"set_option maxHeartbeats {CANDIDATE_HEARTBEATS} in",
        *header.split("\n"),
        f"  {proof}",
        f"#print axioms {name}",
    )


def _order_of(
    thm: _Theorem,
    theorems: list[_Theorem],
    plan: DirectionPlan,
    orders: list[tuple[str, ...]],
) -> tuple[str, ...]:
    index = theorems.index(thm)
    return orders[index // len(plan.proofs)] if plan.proofs else ()


def _place(text: str, at: int, theorems: list[_Theorem]) -> tuple[_Placed, list[tuple[int, int]]]:
    """``theorems`` inserted at ``at``, and each one's (first, last) line in the block."""
    block: list[str] = []
    spans: list[tuple[int, int]] = []
    for thm in theorems:
        spans.append((len(block), len(block) + len(thm.lines) - 1))
        block.extend(thm.lines)
    return _Placed.insert(text, at, block), spans


def _why_not(
    theorems: list[_Theorem],
    passed: list[bool],
    guard_proof: dict[str, str],
    plan: DirectionPlan,
) -> str:
    notes = list(plan.notes)
    counted = [t for t, ok in zip(theorems, passed, strict=True) if ok and t.candidate.uses_base]
    if counted and guard_proof:
        guard = next(g for g in ("assumption", "base-free") if g in guard_proof)
        notes.append(
            f"not counted: the proof by {counted[0].candidate.strategy} "
            f"(`{counted[0].candidate.proof}`) is set aside because the target also follows "
            f"without the other statement ({guard}: `{guard_proof[guard]}`), as in BEq+"
        )
    else:
        tried = sum(t.candidate.uses_base for t in theorems)
        notes.append(f"none of the portfolio's {tried} candidate proof(s) checked")
    return "; ".join(notes)


def _tactic_winners(
    theorems: list[_Theorem],
    passed: list[bool],
    messages: list[dict[str, Any]],
    starts: list[int],
) -> tuple[list[tuple[_Theorem, Candidate, bool]], str]:
    """The reference BEq+'s decision: proofs to re-check (and whether each must need ``base``)."""
    ok = {
        (t.candidate.strategy, i): p for i, (t, p) in enumerate(zip(theorems, passed, strict=True))
    }
    guards = {
        t.candidate.strategy
        for t, p in zip(theorems, passed, strict=True)
        if p and t.candidate.guard
    }
    winners: list[tuple[_Theorem, Candidate, bool]] = []
    # 1. `exact?`: its suggestion, counted if it needs `base`.
    for i, thm in enumerate(theorems):
        if thm.candidate.strategy == "exact?" and ok[("exact?", i)]:
            end = starts[i] + len(thm.lines) - 1
            said = [
                str(m.get("data", "")).strip()
                for m in messages
                if starts[i] <= _line(m) <= end and m.get("severity") == "information"
            ]
            found = exact_suggestion(said)
            if found is not None:
                winners.append((thm, Candidate("exact?", tactic_proof(found)), True))
    # 2. `assumption` closes the target: nothing after step 1 counts.
    if "assumption" in guards:
        return winners, "not counted: `assumption` proves the target alone, as in BEq+ (step 2)"
    order = [
        "apply",
        *(["have"] if "have-guard" not in guards else []),
        *(f"convert-{k}" for k in CONVERT_DEPTHS),
    ]
    for step in order:
        winners += [
            (t, t.candidate, False)
            for i, t in enumerate(theorems)
            if t.candidate.strategy == step and ok[(step, i)]
        ]
    return winners, "none of the reference BEq+'s steps proved it"


def _line(message: dict[str, Any]) -> int:
    pos = message.get("pos")
    line = pos.get("line") if isinstance(pos, dict) else None
    return line if isinstance(line, int) else -1


def _first_line(message: dict[str, Any], limit: int = 240) -> str:
    """Lean's message on one line, cut at ``limit`` characters."""
    data = " ".join(str(message.get("data", "")).split())
    if not data:
        return "(no message)"
    return data if len(data) <= limit else data[: limit - 1] + "…"


def _describe(message: dict[str, Any]) -> str:
    pos = message.get("pos") if isinstance(message.get("pos"), dict) else {}
    assert isinstance(pos, dict)
    return f"{pos.get('line', '?')}:{pos.get('column', '?')}: {_first_line(message)}"


def _axioms_at(messages: list[dict[str, Any]], line: int, name: str) -> tuple[str, ...] | None:
    """What ``#print axioms`` on ``line`` says of ``name`` (in any namespace), or None."""
    for m in messages:
        if _line(m) != line or m.get("severity") != "information":
            continue
        data = str(m.get("data", "")).strip()
        match = _NAMED_RE.match(data)
        if match is None:
            continue
        full = match["name"]
        if full == name or full.endswith("." + name):
            return parse_axioms([m], full)
    return None
