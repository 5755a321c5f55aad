"""The tamper-proof final verdict, in fresh sandboxed Lean processes (never the agent's session).

1. Structure: the frame is kept (body_bounds); the body passes the prechecks and ``forbidden``.
2. Parse (a fresh sandboxed ``lean --worker``): no errors; the body stays inside the target
   declaration.
3. Compile to ``LeanrigSubmission.olean``; a trusted file importing it checks ``#print axioms``
   and the target's ``#check`` under ``pp.all`` against the untouched task file's.
4. Where the toolchain has ``leanchecker``, replay the environment in the kernel.
A timeout or a crash is a rejection with that reason, never an acceptance."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from lsp_bridge import (
    SETUP_ARTEFACT_NOTE,
    LeanClient,
    LeanInstall,
    LeanrigError,
    LineIndex,
    Timeouts,
    lone_carriage_return,
    without_setup_artefacts,
)
from repl_pool import SandboxPolicy

from ..tasks import (
    Suite,
    Task,
    body_bounds,
    check_scope,
    declaration_head,
    editor_trimmed,
    flatten_symbols,
    precheck_body,
    suffix_structure,
)
from .forbidden import forbidden_constructs
from .lean_output import (
    Statement,
    compile_failure,
    error_place,
    escape_name,
    parse_axioms,
    parse_check,
    parse_json_messages,
)
from .not_accepted import NotAccepted
from .sandboxed_lean import SandboxedLean


@dataclass(frozen=True, slots=True)
class Verdict:
    accepted: bool
    reasons: tuple[str, ...]
    axioms: tuple[str, ...]
    elapsed_ms: float
    lean_version: str
    stages: dict[str, float] = field(default_factory=dict)  # stage -> ms

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "reasons": list(self.reasons),
            "axioms": list(self.axioms),
            "elapsed_ms": round(self.elapsed_ms, 1),
            "lean_version": self.lean_version,
            "stages_ms": {k: round(v, 1) for k, v in self.stages.items()},
        }


def axioms_outside(axioms: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """Axioms off the allow-list (``sorryAx`` is rejected as an incomplete proof instead)."""
    permitted = set(allowed)
    return [a for a in axioms if a not in permitted and a != "sorryAx"]


# The suite's load-time sorry rule is lexical, so a placeholder may prove the theorem.
PLACEHOLDER_PROVES = (
    "the proof body is the task's placeholder, unchanged, and the placeholder already proves "
    "the theorem: the suite is broken (tell its author); no attempt is scored for it"
)


UNCHANGED_STATEMENT = (
    "the statement is the task's placeholder, unchanged: write the statement of the claim "
    "(set_statement)"
)


def _as_lean_reads(submission: str) -> str:
    """``submission`` with CRLF as LF; raises NotAccepted on a lone carriage return (checked
    first: normalizing would make ``\r\r\n`` a CRLF)."""
    lone = lone_carriage_return(submission)
    if lone is not None:
        pos = LineIndex(submission).pos_of(lone)
        raise NotAccepted(
            f"the file has a carriage return not followed by a line feed at {pos.line}:"
            f"{pos.column}, which Lean does not accept"
        )
    return submission.replace("\r\n", "\n")


# Task key, theorem, task text, Lean, the suite's library, a Lake project's LEAN_PATH.
ReferenceKey = tuple[str, str, str, str, str, str]


@dataclass(slots=True)
class References:
    """What Lean reads in the untouched task files, each computed once and shared by verifiers.

    A key holds what Lean's answer depends on: the task's text and theorem, the Lean, the suite's
    library (its directory is named by its content) and a Lake project's LEAN_PATH, not what its
    builds hold (a rebuilt dependency is read again by a new process)."""

    types: dict[ReferenceKey, Statement] = field(default_factory=dict)  # the target's statement
    suffixes: dict[ReferenceKey, list[str]] = field(default_factory=dict)  # declarations after it


# A process's verifiers share by default: a run's final verdicts and its attempts' check_proof.
PROCESS_REFERENCES = References()


class Verifier:
    def __init__(
        self,
        suite: Suite,
        install: LeanInstall,
        *,
        library: Path | None,
        sandbox: SandboxPolicy | None = None,
        work_root: Path | None = None,
        references: References | None = None,
    ) -> None:
        self.suite = suite
        self.install = install
        self.library = library
        self.sandbox = sandbox or SandboxPolicy()
        # Scratch paths become file URIs and bind mounts, and Lean runs in another directory.
        self.work_root = work_root.resolve() if work_root is not None else None
        self._lean = SandboxedLean(suite, install, library, self.sandbox, self.work_root)
        self.references = references if references is not None else PROCESS_REFERENCES
        # One reading of each kind per task at a time; the locks stay with this verifier's loop.
        self._reading: dict[tuple[str, ReferenceKey], anyio.Lock] = {}
        checker = install.leanchecker
        self._checker = str(checker) if checker is not None else None

    async def verify(
        self, task: Task, submission: str, *, statement: bool = False, statement_axioms: bool = True
    ) -> Verdict:
        """The verdict on ``submission``, the task file's whole text as submitted.
        ``statement``: ``task`` is a statement view; the statement is judged on its own (not
        whether it states the claim). ``statement_axioms=False``: the caller checks its axioms."""
        started = time.perf_counter()
        stages: dict[str, float] = {}
        axioms: tuple[str, ...] = ()
        try:
            submission = _as_lean_reads(submission)
            body = self._structure(task, submission)
            submission = task.with_body(body)
            stages["structure"] = (time.perf_counter() - started) * 1000
            # Lake suites: asked once, before the stages share it.
            await self._lean.project_lean_path()
            async with self._lean.scratch("leanrig-verify-") as work:
                # Independent runs go at once; the first failing stage in pipeline order counts.
                outcomes: dict[str, Any] = {}

                async def stage(name: str, run: Callable[[], Awaitable[Any]]) -> None:
                    t = time.perf_counter()
                    try:
                        outcomes[name] = await run()
                    except NotAccepted as rejected:
                        outcomes[name] = rejected
                    stages[name] = (time.perf_counter() - t) * 1000

                # Its own directory: what elaborating the body runs cannot reach the compiled
                # submission the query imports.
                parse_work = work / "parse"
                await anyio.Path(parse_work).mkdir()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        stage,
                        "parse",
                        lambda: self._parse_check(task, submission, body, parse_work),
                    )
                    query = not statement or statement_axioms
                    # A statement whose axioms the caller reads needs no compiled module unless
                    # the kernel replays it: the parse stage judges an unwrapped target's errors.
                    compiled = query or bool(task.wrappers) or self._leanchecker() is not None
                    compile_query = self._compile_and_query if query else self._compile
                    if compiled:
                        tg.start_soon(
                            stage,
                            "compile_query",
                            lambda: compile_query(task, submission, work, "LeanrigSubmission"),
                        )
                    if not statement:
                        tg.start_soon(stage, "reference", lambda: self._reference_type(task))
                for name in ("parse", "compile_query", "reference"):
                    if isinstance(outcomes.get(name), NotAccepted):
                        raise outcomes[name]
                if statement:
                    axioms = ()
                    if statement_axioms:
                        checked, _ = outcomes["compile_query"]
                        t = time.perf_counter()
                        axioms = await self._statement_axioms(task, checked, work)
                        stages["statement_axioms"] = (time.perf_counter() - t) * 1000
                    reasons = self._judge_statement(axioms)
                    if not reasons and body == task.body:
                        reasons = [UNCHANGED_STATEMENT]
                else:
                    checked, axioms = outcomes["compile_query"]
                    reasons = self._judge(task, checked, outcomes["reference"], axioms)
                if not reasons and self._leanchecker() is not None:
                    t = time.perf_counter()
                    reasons = await self._replay(work)
                    stages["leanchecker"] = (time.perf_counter() - t) * 1000
                if not reasons and body == task.body and not statement:
                    reasons = [PLACEHOLDER_PROVES]
                if reasons:
                    raise NotAccepted(*reasons)
        except NotAccepted as rejected:
            return self._verdict(False, rejected.reasons, axioms, started, stages)
        return self._verdict(True, (), axioms, started, stages)

    def _structure(self, task: Task, submission: str) -> str:
        prefix, suffix = task.text[: task.span.start], task.text[task.span.end :]
        # Editors' trailing-space and final-newline changes are tolerated (tasks.body_bounds).
        bounds = body_bounds(submission, prefix, suffix)
        if bounds is None:
            # Locate the difference in the trimmed texts, not at whitespace that does not count.
            submission = editor_trimmed(submission)
            prefix, suffix = editor_trimmed(prefix, end=False), editor_trimmed(suffix)
            index = LineIndex(submission)
            limit = min(len(submission), len(prefix))
            first = next((i for i in range(limit) if submission[i] != prefix[i]), limit)
            if first < len(prefix):
                pos = index.pos_of(first)
                where = f"first difference near {pos.line}:{pos.column}"
            else:
                room = min(len(submission) - len(prefix), len(suffix))
                same = next((k for k in range(room) if submission[-1 - k] != suffix[-1 - k]), room)
                pos = index.pos_of(max(len(prefix), len(submission) - same - 1))
                where = f"after the proof body: last difference near {pos.line}:{pos.column}"
            raise NotAccepted(f"text outside the proof body differs from the task file ({where})")
        body = submission[bounds[0] : bounds[1]]
        reasons = [r for r in [precheck_body(body)] if r] + forbidden_constructs(body)
        if reasons:
            raise NotAccepted(*reasons)
        return body

    async def _parse_check(self, task: Task, submission: str, body: str, work: Path) -> None:
        limits = self.suite.spec.limits
        command = await self._lean.server_command(work)
        uri = (work / "LeanrigSubmission.lean").as_uri()
        try:
            with anyio.fail_after(limits.wall_seconds):
                async with LeanClient.start(
                    command,
                    timeouts=Timeouts(spawn=limits.wall_seconds, barrier=limits.wall_seconds),
                ) as client:
                    # Unwrapped: document symbols leave out a declaration inside `… in`.
                    await client.open(uri, task.unwrapped(submission))
                    report = await client.wait_for(uri)
                    symbols = await client.document_symbols(uri)
        except TimeoutError:
            raise NotAccepted(
                f"timeout: Lean did not finish within {limits.wall_seconds:g} s"
            ) from None
        except LeanrigError as exc:
            raise NotAccepted(f"crash: the Lean process failed ({type(exc).__name__})") from exc
        index = LineIndex(submission)
        # Unwrapped, the wrappers' scope covers the rest of the file, which may then read
        # differently: for a wrapped target the compile stage judges errors.
        diagnostics = without_setup_artefacts(report.diagnostics)
        errors = [d for d in diagnostics if d.is_error and not task.wrappers]
        if report.status == "fatal" or errors:
            # The proof's own first: Lean's report order depends on thread timing.
            start, end = task.span.start, task.span.start + len(body)
            first = next(
                (d for d in errors if start <= index.offset_of_lsp(d.range.start) <= end),
                errors[0] if errors else None,
            )
            where = index.from_lsp(first.range.start) if first else None
            msg = first.message.splitlines()[0] if first else "processing stopped"
            if first is not None and first.is_setup_artefact:
                msg = f"{msg}: {SETUP_ARTEFACT_NOTE}"
            at = f": {msg}"
            if where is not None:
                place = error_place(
                    index.offset_of(where),
                    start,
                    end,
                    declaration_head(task.text, task.span.decl_start),
                )
                at = f"; first at {where.line}:{where.column} ({place}): {msg}"
            raise NotAccepted(f"Lean reports {len(errors)} error(s){at}")
        start = task.span.start
        end = start + len(body)
        original_index = LineIndex(task.text)
        expected_suffix = await self._original_suffix(task, original_index)
        reason = check_scope(
            text=submission,
            body_start=start,
            body_end=end,
            decl_start=task.span.decl_start,
            symbols=flatten_symbols(symbols, index),
            expected_suffix=expected_suffix,
            diagnostics=report.diagnostics,
        )
        if reason:
            raise NotAccepted(reason)

    def _reading_lock(self, kind: str, key: ReferenceKey) -> anyio.Lock:
        lock = self._reading.get((kind, key))
        if lock is None:
            lock = self._reading[kind, key] = anyio.Lock()
        return lock

    async def _reference_key(self, task: Task) -> ReferenceKey:
        lake = ":".join(map(str, await self._lean.project_lean_path()))
        theorem = task.spec.theorem
        return (task.key, theorem, task.text, str(self.install.lean), str(self.library), lake)

    async def _original_suffix(self, task: Task, index: LineIndex) -> list[str]:
        key = await self._reference_key(task)
        async with self._reading_lock("suffix", key):
            cached = self.references.suffixes.get(key)
            if cached is None:
                cached = self.references.suffixes[key] = await self._read_suffix(task, index)
            return cached

    async def _read_suffix(self, task: Task, index: LineIndex) -> list[str]:
        async with self._lean.scratch("leanrig-ref-") as work:
            command = await self._lean.server_command(work)
            uri = (work / "LeanrigOriginal.lean").as_uri()
            wall = self.suite.spec.limits.wall_seconds
            try:
                with anyio.fail_after(wall):
                    async with LeanClient.start(command) as client:
                        await client.open(uri, task.unwrapped(task.text))
                        await client.wait_for(uri)
                        symbols = await client.document_symbols(uri)
            except (TimeoutError, LeanrigError) as exc:
                raise NotAccepted(
                    f"the task file itself could not be read by Lean within {wall:g} s"
                ) from exc
        return suffix_structure(flatten_symbols(symbols, index), task.span.end, len(task.text))

    async def _compile_and_query(
        self, task: Task, text: str, work: Path, module: str
    ) -> tuple[Statement, tuple[str, ...]]:
        await self._compile(task, text, work, module)
        return await self._query(task, work, module)

    async def _compile(self, task: Task, text: str, work: Path, module: str) -> None:
        """Compile ``text`` to ``build/<module>.olean``; raises NotAccepted on an error."""
        limits = self.suite.spec.limits
        build = work / "build"
        await anyio.Path(build).mkdir(exist_ok=True)
        src = work / f"{module}.lean"
        await anyio.Path(src).write_text(text, encoding="utf-8")
        lean = str(self.install.lean)
        compiled = await self._lean.run(
            [lean, "--json", "-R", str(work), "-o", str(build / f"{module}.olean"), str(src)],
            work,
            build,
            limits.wall_seconds,
        )
        messages = parse_json_messages(compiled.stdout)
        errors = [m for m in messages if m.get("severity") == "error"]
        if compiled.returncode != 0 or errors:
            if not errors:
                raise NotAccepted(f"compilation failed: {compiled.stderr[-200:]}")
            body_end = len(text) - (len(task.text) - task.span.end)
            declaration = declaration_head(task.text, task.span.decl_start)
            raise NotAccepted(compile_failure(errors, text, task.span.start, body_end, declaration))

    async def _query(
        self, task: Task, work: Path, module: str
    ) -> tuple[Statement, tuple[str, ...]]:
        """The compiled target's statement and axioms, from a fresh Lean importing it."""
        limits = self.suite.spec.limits
        build = work / "build"
        lean = str(self.install.lean)
        theorem = task.spec.theorem
        name = escape_name(theorem)
        lines = [
            *(["prelude"] if task.header.prelude else []),
            f"import {module}",
            "set_option pp.all true in",
            "set_option pp.rawOnError true in",
            f"#check @{name}",
            f"#print axioms {name}",
        ]
        check_line, axioms_line = len(lines) - 1, len(lines)  # 1-based
        query = work / "LeanrigQuery.lean"
        await anyio.Path(query).write_text("\n".join(lines) + "\n", encoding="utf-8")
        answered = await self._lean.run(
            [lean, "--json", str(query)], work, build, limits.wall_seconds
        )
        answers = parse_json_messages(answered.stdout)
        if answered.returncode != 0:
            said = next(
                (str(a.get("data", "")) for a in answers if a.get("severity") == "error"),
                answered.stderr[-200:],
            )
            raise NotAccepted(f"the trusted query of the compiled submission failed: {said[:300]}")

        def answer_at(line: int) -> list[dict[str, Any]]:
            return [
                m
                for m in answers
                if m.get("severity") == "information" and (m.get("pos") or {}).get("line") == line
            ]

        # Exactly one answer per query line, about the target: anything else is not trusted.
        checked = answer_at(check_line)
        statement = (
            parse_check(str(checked[0].get("data", "")), theorem, module) if checked else None
        )
        axioms = parse_axioms(answer_at(axioms_line), theorem)
        if len(checked) != 1 or statement is None or axioms is None:
            raise NotAccepted("the trusted query did not find the target theorem")
        return statement, axioms

    async def _reference_type(self, task: Task) -> Statement:
        key = await self._reference_key(task)
        async with self._reading_lock("type", key):
            cached = self.references.types.get(key)
            if cached is None:
                async with self._lean.scratch("leanrig-ref-") as work:
                    try:
                        reference, _ = await self._compile_and_query(
                            task, task.text, work, "LeanrigOriginal"
                        )
                    except NotAccepted as exc:
                        raise NotAccepted(
                            f"the task file itself does not check: {exc.reasons[0]}"
                        ) from exc
                cached = self.references.types[key] = reference
            return cached

    def _judge(
        self, task: Task, statement: Statement, reference: Statement, axioms: tuple[str, ...]
    ) -> list[str]:
        reasons = []
        if statement.universes != reference.universes:
            reasons.append(
                "the theorem's statement differs from the task's (universe parameters "
                f"{statement.universe_list()} instead of {reference.universe_list()})"
            )
        elif statement.type != reference.type:
            reasons.append(
                "the theorem's statement differs from the task's (elaborated types differ)"
            )
        if "sorryAx" in axioms:
            reasons.append("the proof depends on sorryAx (an incomplete proof)")
        extra = axioms_outside(axioms, self.suite.spec.axioms)
        if extra:
            reasons.append(f"the proof uses axioms outside the allow-list: {', '.join(extra)}")
        return reasons

    async def _statement_axioms(
        self, task: Task, checked: Statement, work: Path
    ) -> tuple[str, ...]:
        """The axioms of the compiled target's *statement* (its type), not of its body."""
        name = escape_name(task.spec.theorem)
        levels = ", ".join(checked.universes)
        params, args = (f".{{{levels}}}", f".{{{levels}}}") if levels else ("", "")
        lines = [
            *(["prelude"] if task.header.prelude else []),
            "import LeanrigSubmission",
            f"def LeanrigStatement{params} : Prop := type_of% @{name}{args}",
            "#print axioms LeanrigStatement",
        ]
        query = work / "LeanrigStatementQuery.lean"
        await anyio.Path(query).write_text("\n".join(lines) + "\n", encoding="utf-8")
        answered = await self._lean.run(
            [str(self.install.lean), "--json", str(query)],
            work,
            work / "build",
            self.suite.spec.limits.wall_seconds,
        )
        answers = parse_json_messages(answered.stdout)
        axioms = parse_axioms(
            [m for m in answers if m.get("severity") == "information"], "LeanrigStatement"
        )
        if answered.returncode != 0 or axioms is None:
            said = next(
                (str(a.get("data", "")) for a in answers if a.get("severity") == "error"),
                answered.stderr[-200:],
            )
            raise NotAccepted(f"the trusted query of the statement failed: {said[:300]}")
        return axioms

    def _judge_statement(self, axioms: tuple[str, ...]) -> list[str]:
        reasons = []
        if "sorryAx" in axioms:
            reasons.append("the statement depends on sorryAx (it uses sorry)")
        extra = axioms_outside(axioms, self.suite.spec.axioms)
        if extra:
            reasons.append(f"the statement uses axioms outside the allow-list: {', '.join(extra)}")
        return reasons

    def _leanchecker(self) -> str | None:
        return self._checker

    @property
    def programs(self) -> list[Path]:
        """The programs a verdict runs: Lean, Lake and leanchecker (which may come from PATH)."""
        found = [self.install.lean, *([self.install.lake] if self.install.lake else [])]
        return found + ([Path(self._checker)] if self._checker else [])

    async def _replay(self, work: Path) -> list[str]:
        checker = self._leanchecker()
        assert checker is not None
        result = await self._lean.run(
            [checker, "LeanrigSubmission"],
            work,
            work / "build",
            self.suite.spec.limits.wall_seconds,
        )
        if result.returncode != 0:
            return [f"kernel replay (leanchecker) failed: {(result.stdout + result.stderr)[-300:]}"]
        return []

    def _verdict(
        self,
        accepted: bool,
        reasons: tuple[str, ...],
        axioms: tuple[str, ...],
        started: float,
        stages: dict[str, float],
    ) -> Verdict:
        return Verdict(
            accepted=accepted,
            reasons=reasons,
            axioms=axioms,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            lean_version=self.install.version,
            stages=stages,
        )
