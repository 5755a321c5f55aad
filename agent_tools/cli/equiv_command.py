"""``leanrig equiv``: whether two statements are equivalent (BEq+), as lines or JSON.

Exit 0 equivalent, 1 not shown, 2 on a usage error or an invalid pair."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from lsp_bridge import LeanrigError

from .arg_types import positive


@dataclass(frozen=True, slots=True)
class PairSource:
    """``first`` (the reference) and ``second`` (the candidate), both declared in ``text``."""

    text: str
    first: str
    second: str
    suite_dir: Path | None
    project: Path  # where to look for Lean (a project's toolchain)
    insert_at: int | None = None


def add_equiv_command(sub: Any, common: argparse.ArgumentParser) -> None:
    equiv = sub.add_parser(
        "equiv",
        parents=[common],
        help="are two statements equivalent? BEq+: each proved from the other in Lean "
        "(exit 0 yes, 1 not shown, 2 invalid)",
        description="Grade two statements of FILE by BEq+: each direction is proved from the "
        "other statement in a fresh sandboxed Lean and re-checked alone (docs/equivalence.md).",
    )
    equiv.add_argument(
        "file",
        metavar="FILE",
        help="a Lean file declaring both statements; "
        "with --task, the task file with a candidate statement",
    )
    equiv.add_argument("--first", metavar="NAME", help="the reference statement's full name")
    equiv.add_argument("--second", metavar="NAME", help="the candidate statement's full name")
    equiv.add_argument(
        "--task",
        metavar="ID",
        help="a statement task of --suite: grade FILE's "
        "statement against the task's hidden reference, as a run's verdict "
        "does (the statement's own check first)",
    )
    equiv.add_argument(
        "--suite",
        metavar="DIR",
        help="the suite whose library FILE imports, and its axiom allow-list and limits",
    )
    equiv.add_argument(
        "--budget",
        type=positive(float),
        metavar="SECONDS",
        help="Lean's time per direction (default: the suite's [limits] "
        "equiv_seconds, 20 unless the suite says)",
    )
    equiv.add_argument("--json", action="store_true", help="the result as JSON")
    equiv.set_defaults(func=cmd_equiv)


def _file_pair(args: argparse.Namespace) -> PairSource:
    path = Path(args.file).absolute()
    try:
        # Unconverted: a lone carriage return is Lean's error to report.
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LeanrigError(
            f"cannot read {args.file}: {exc}", hint="pass a UTF-8 Lean file"
        ) from exc
    suite_dir = Path(args.suite).absolute() if args.suite else None
    return PairSource(text, args.first, args.second, suite_dir, suite_dir or _project_of(path))


def _project_of(path: Path) -> Path:
    """The nearest directory up with a Lake file or ``lean-toolchain``, else ``path``'s own."""
    marks = ("lakefile.lean", "lakefile.toml", "lean-toolchain")
    for folder in path.parents:
        if any((folder / mark).exists() for mark in marks):
            return folder
    return path.parent


def cmd_equiv(args: argparse.Namespace) -> int:
    import anyio

    from lsp_bridge import find_lean

    from ..tasks import library_dir, load_suite
    from ..verdict import EquivalenceGrader

    if args.task is not None:
        return _cmd_task(args)
    if args.first is None or args.second is None:
        raise LeanrigError(
            "give --first and --second (two statements of FILE), or --suite and --task",
            hint="leanrig equiv FILE --first NAME --second NAME, or "
            "leanrig equiv --suite DIR --task ID CANDIDATE.lean",
        )
    source = _file_pair(args)
    suite = load_suite(source.suite_dir, only=[]) if source.suite_dir is not None else None
    install = find_lean(source.project)
    library = library_dir(suite, install) if suite is not None else None
    grader = EquivalenceGrader(suite, install, library=library, project=source.project)
    budget = args.budget or grader.suite.spec.limits.equiv_seconds

    async def grade() -> Any:
        return await grader.grade(
            source.text,
            source.first,
            source.second,
            insert_at=source.insert_at,
            budget_seconds=budget,
        )

    result = anyio.run(grade)
    if args.json:
        print(orjson.dumps(result.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        print("\n".join(report_lines(result)))
    if result.outcome == "invalid":
        return 2
    return 0 if result.outcome == "equivalent" else 1


def _cmd_task(args: argparse.Namespace) -> int:
    """``--suite DIR --task ID FILE``: FILE's statement graded as a run grades an attempt's."""
    import anyio

    from lsp_bridge import find_lean

    from ..tasks import library_dir, load_suite, writes_statement
    from ..verdict import EquivalenceGrader, StatementGrader, Verifier

    if args.suite is None:
        raise LeanrigError("--task needs --suite DIR", hint="name the suite the task is in")
    suite = load_suite(Path(args.suite).absolute(), only=[args.task])
    task = suite.task(args.task)
    if not writes_statement(task.kind):
        raise LeanrigError(
            f"task {task.id} is a {task.kind} task: it has no reference",
            hint="pick a statement task (suite.toml `kind`)",
        )
    text = _file_pair_text(args.file)
    start, end = task.statement_span
    prefix, suffix = task.text[:start], task.text[end:]
    if not (text.startswith(prefix) and text.endswith(suffix)) or len(text) < len(prefix + suffix):
        raise LeanrigError(
            f"{args.file} differs from task {task.id}'s file outside the target's statement",
            hint="change only the statement (between the theorem's name and `:=`)",
        )
    statement = text[len(prefix) : len(text) - len(suffix)]
    install = find_lean(suite.root)
    library = library_dir(suite, install)
    verifier = Verifier(suite, install, library=library)
    grader = StatementGrader(suite, verifier, EquivalenceGrader(suite, install, library=library))
    budget = args.budget or suite.spec.limits.equiv_seconds
    verdict = anyio.run(grader.grade, task, statement, budget)
    if args.json:
        print(orjson.dumps(verdict.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        head = "ACCEPTED" if verdict.accepted else "NOT ACCEPTED"
        print(f"{head}: task {task.id}, statement{statement.rstrip()}")
        for reason in verdict.reasons:
            print(f"  - {reason}")
        if verdict.equivalence is not None:
            print("\n".join(report_lines(verdict.equivalence)))
    return 0 if verdict.accepted else 1


def _file_pair_text(file: str) -> str:
    try:
        return Path(file).absolute().read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LeanrigError(f"cannot read {file}: {exc}", hint="pass a UTF-8 Lean file") from exc


def report_lines(result: Any) -> list[str]:
    head = {
        "equivalent": "EQUIVALENT",
        "not_equivalent": "NOT SHOWN EQUIVALENT",
        "invalid": "INVALID",
    }[result.outcome]
    lines = [
        f"{head}: {result.first} (reference) and {result.second} (candidate); "
        f"portfolio {result.portfolio}, {result.elapsed_ms:.0f} ms"
    ]
    lines += [f"  - {reason}" for reason in result.reasons]
    for label, arrow, direction in (
        ("forward", f"{result.first} ⇒ {result.second}", result.forward),
        ("backward", f"{result.second} ⇒ {result.first}", result.backward),
    ):
        if direction is None:
            continue
        said = direction.outcome.replace("_", " ")
        if direction.strategy:
            said += f" by {direction.strategy}"
        lines.append(
            f"  {label} ({arrow}): {said}, {direction.elapsed_ms:.0f} ms, "
            f"{direction.tried} candidate(s)"
        )
        if direction.theorem:
            lines += [f"    {line}" for line in direction.theorem.splitlines()]
        if direction.note:
            lines.append(f"    {direction.note}")
    return lines
