"""``leanrig suite check``: is every task of a suite sound to hand out?

Each task is elaborated in a fresh sandboxed Lean run, its axioms and statement checked, and its
reference solution verified if given. Must not change the suite."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import anyio
from pydantic import BaseModel

from lsp_bridge import COMMENT_KINDS, LeanInstall, TokenKind, find_lean, lean_tokens

from ..tasks import (
    Suite,
    SuiteError,
    Task,
    axioms_declared,
    library_dir,
    load_suite,
    reference_statement,
    writes_statement,
)
from ..verdict import (
    EquivalenceGrader,
    StatementGrader,
    Verifier,
    escape_name,
    forbidden_constructs,
    parse_axioms,
    parse_check,
)
from .one_shot_lean import LeanAnswer, OneShotLean, lake_lean_path, line_of
from .statements import read_printed


class TaskCheck(BaseModel):
    task: str
    ok: bool
    problems: list[str]
    statement: str = ""  # the elaborated statement (pp.all), universe parameters first
    # What Lean could not answer, which is no problem of the task.
    notes: list[str] = []
    # "accepted" | "rejected" | "missing" (no DIR/<id>.lean) | "none" (no --solutions)
    solution: str = "none"
    elapsed_ms: float = 0.0


class CheckReport(BaseModel):
    suite: str
    ok: bool
    tasks: list[TaskCheck]
    missing_solutions: list[str] = []  # with --solutions: the tasks that have none


def check_suite(
    root: Path, solutions: Path | None = None, *, require_solutions: bool = False
) -> CheckReport:
    """Check the suite at ``root``; with ``solutions``, each task's reference solution too.

    Raises SuiteError when ``solutions`` is not a directory; ``require_solutions`` fails on none."""
    suite = load_suite(root)
    if solutions is not None and not solutions.is_dir():
        raise SuiteError(
            f"--solutions {solutions}: no such directory",
            hint="give the directory holding <task id>.lean for each task",
        )
    install = find_lean(suite.root)
    return anyio.run(_check, suite, install, solutions, require_solutions)


async def lean_path_of(suite: Suite, install: LeanInstall) -> list[Path]:
    """The LEAN_PATH of a suite's tasks: its compiled library, if any, and Lake dependencies."""
    built = await anyio.to_thread.run_sync(library_dir, suite, install)
    return ([built] if built is not None else []) + await lake_lean_path(suite.root, install)


def query_lines(task: Task) -> tuple[str, int, int]:
    """The task file with the trusted queries appended; the lines of their answers."""
    name = escape_name(task.spec.theorem)
    text = task.text.rstrip("\n") + "\n\n"
    first = text.count("\n") + 1
    text += (
        f"set_option pp.all true in\nset_option pp.rawOnError true in\n#check @{name}\n"
        f"#print axioms {name}\n"
    )
    return text, first + 2, first + 3


def with_reference(suite: Suite, task: Task) -> Task:
    """A statement task restated with its reference's statement."""
    path = suite.reference_path(task)
    return task.restated(reference_statement(path.read_text(encoding="utf-8")))


def outside_body(task: Task) -> str:
    return task.text[: task.span.start] + task.text[task.span.end :]


def without_unsafe_axioms(text: str) -> str:
    """``text`` with the ``unsafe`` of each ``unsafe axiom`` blanked: no theorem can use one."""
    code = [t for t in lean_tokens(text) if t.kind not in COMMENT_KINDS]
    for token, after in itertools.pairwise(code):
        if (
            token.kind is TokenKind.IDENT
            and token.text(text) == "unsafe"
            and after.kind is TokenKind.IDENT
            and after.text(text) == "axiom"
        ):
            text = text[: token.start] + " " * (token.end - token.start) + text[token.end :]
    return text


async def _check(
    suite: Suite, install: LeanInstall, solutions: Path | None, require_solutions: bool
) -> CheckReport:
    lean_path = await lean_path_of(suite, install)
    library = await anyio.to_thread.run_sync(library_dir, suite, install)
    results: dict[str, TaskCheck] = {}
    index = {task_id: i for i, task_id in enumerate(suite.tasks)}
    limiter = anyio.CapacityLimiter(2)
    verifier = Verifier(suite, install, library=library)
    statements = StatementGrader(
        suite, verifier, EquivalenceGrader(suite, install, library=library)
    )
    async with OneShotLean.scratch(install, lean_path, suite.spec.limits.wall_seconds) as lean:

        async def one(task: Task) -> None:
            started = time.perf_counter()
            original = task
            if writes_statement(task.kind):
                # Checked as its reference states it, which is what the grader compares with.
                task = await anyio.to_thread.run_sync(with_reference, suite, task)
            async with limiter:
                text, check_line, axioms_line = query_lines(task)
                answer = await lean.elaborate(f"Check_{index[task.id]}", text)
            check = task_check(suite, task, answer, check_line, axioms_line)
            if writes_statement(task.kind) and not check.problems:
                async with limiter:
                    graded = await statements.grade(
                        original, task.statement, suite.spec.limits.equiv_seconds
                    )
                if not graded.accepted:
                    check.problems.append(
                        "the grader does not show the reference equivalent to itself: "
                        + "; ".join(graded.reasons)
                    )
            solution = anyio.Path(solutions / f"{task.id}.lean") if solutions else None
            if solution is not None and not await solution.is_file():
                check.solution = "missing"
                if require_solutions:
                    check.problems.append(f"no reference solution ({solution.name} in {solutions})")
            elif solution is not None:
                submitted = (await solution.read_bytes()).decode("utf-8", "replace")
                async with limiter:
                    verdict = await verifier.verify(task, submitted)
                check.solution = "accepted" if verdict.accepted else "rejected"
                if not verdict.accepted:
                    check.problems.append(
                        "the reference solution is rejected: " + "; ".join(verdict.reasons)
                    )
            check.ok = not check.problems
            check.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
            results[task.id] = check

        async with anyio.create_task_group() as tg:
            for task in suite.tasks.values():
                tg.start_soon(one, task)
    checks = [results[task_id] for task_id in suite.tasks]
    by_statement: dict[str, str] = {}
    for check in checks:
        if not check.statement:
            continue
        other = by_statement.setdefault(check.statement, check.task)
        if other != check.task:
            check.problems.append(f"the same statement as task {other}")
            check.ok = False
    missing = [c.task for c in checks if c.solution == "missing"]
    return CheckReport(
        suite=suite.name, ok=all(c.ok for c in checks), tasks=checks, missing_solutions=missing
    )


def task_check(
    suite: Suite, task: Task, answer: LeanAnswer, check_line: int, axioms_line: int
) -> TaskCheck:
    """What is wrong with ``task``, from Lean's answer on its file with the queries appended."""
    problems: list[str] = []
    theorem = task.spec.theorem
    if answer.returncode is None:
        problems.append("Lean did not finish within the suite's wall-clock limit")
    for error in answer.errors[:1]:
        problems.append(
            f"does not elaborate: {error.line}:{error.column}: {error.text.splitlines()[0][:200]}"
        )
    target_line = line_of(task.text, task.span.decl_start)
    sorries = [m.line for m in answer.messages if m.uses_sorry]
    if target_line not in sorries and not answer.errors:
        problems.append("its placeholder does not use sorry")
    others = [line for line in sorries if line != target_line]
    if others:
        problems.append(f"another declaration uses sorry (line {others[0]})")
    statement = ""
    notes: list[str] = []
    for m in answer.at_lines(check_line, check_line):
        parsed = parse_check(m.text, theorem)
        if parsed is None:
            continue
        printed = read_printed(parsed.type)
        if printed.text:
            statement = f"{parsed.universe_list()} {printed.text}"
        else:
            notes.append(
                f"Lean could not print its elaborated statement ({printed.failure}): "
                "it is compared with no other task's"
            )
    axioms = parse_axioms(
        [{"data": m.text} for m in answer.at_lines(axioms_line, axioms_line)], theorem
    )
    allowed = {*suite.spec.axioms, "sorryAx"}
    if axioms is not None:
        extra = [a for a in axioms if a not in allowed]
        if extra:
            problems.append(
                f"the target depends on axioms outside the allow-list: {', '.join(extra)}"
            )
    elif not answer.errors:
        problems.append("Lean did not answer `#print axioms` for the target")
    around = outside_body(task)
    declared = [a for a in axioms_declared(around) if a not in allowed]
    if declared:
        problems.append(f"the file declares axioms outside the allow-list: {', '.join(declared)}")
    reasons = forbidden_constructs(without_unsafe_axioms(around))
    problems += [f"outside the proof: {reason}" for reason in reasons]
    return TaskCheck(
        task=task.id, ok=not problems, problems=problems, statement=statement, notes=notes
    )
