"""``leanrig suite import|check|lint``: the arguments, and the report as lines or JSON."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson


def add_suite_command(sub: Any, common: argparse.ArgumentParser) -> None:
    suite = sub.add_parser(
        "suite",
        parents=[common],
        help="author a suite: import Lean files, check it, lint statements",
    )
    kinds = suite.add_subparsers(dest="suite_command", required=True)
    imp = kinds.add_parser("import", help="a suite from Lean files with sorried theorems")
    imp.add_argument(
        "paths", nargs="+", metavar="PATH", help="a Lean file, directory or Lake project"
    )
    imp.add_argument("--out", required=True, help="the suite directory to write (or update)")
    imp.add_argument("--name", help="the suite's name (default: kept, else OUT's name)")
    imp.add_argument(
        "--meta", help="title/field/difficulty (and claim) by theorem name (TOML, CSV, JSONL)"
    )
    imp.add_argument(
        "--kind",
        choices=["proof", "statement", "statement_and_proof"],
        default="proof",
        help="the tasks' kind: statement tasks take each "
        "theorem's statement as their hidden reference, --meta's `claim` as "
        "their claim",
    )
    imp.add_argument("--json", action="store_true", help="the import report as JSON")
    check = kinds.add_parser("check", help="every task elaborates with only its placeholder")
    check.add_argument("suite", metavar="DIR", help="the suite directory")
    check.add_argument("--solutions", metavar="DIR", help="reference solutions: DIR/<id>.lean")
    check.add_argument(
        "--require-solutions",
        action="store_true",
        help="a task without DIR/<id>.lean fails the check",
    )
    check.add_argument("--json", action="store_true", help="the report as JSON")
    lint = kinds.add_parser(
        "lint",
        help="statement defects: trivial targets, contradictory "
        "hypotheses, unused variables, give-aways, duplicates",
    )
    lint.add_argument("suite", metavar="DIR", help="the suite directory")
    lint.add_argument(
        "--budget",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds of Lean per task for the probes (default 10)",
    )
    lint.add_argument(
        "--against",
        metavar="OLD_DIR",
        help="an older version of the suite: report changed statements",
    )
    lint.add_argument("--json", action="store_true", help="the findings as JSON")
    suite.set_defaults(func=cmd_suite)


def _dump(value: Any) -> None:
    print(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def cmd_suite(args: argparse.Namespace) -> int:
    if args.suite_command == "import":
        return _import(args)
    if args.suite_command == "check":
        return _check(args)
    return _lint(args)


def _import(args: argparse.Namespace) -> int:
    from ..authoring import import_suite

    report = import_suite(
        [Path(p).absolute() for p in args.paths],
        Path(args.out).absolute(),
        name=args.name,
        meta=Path(args.meta).absolute() if args.meta else None,
        kind=args.kind,
    )
    if args.json:
        _dump(report.model_dump())
        return 0
    print(
        f"imported {len(report.tasks)} task(s) into {args.out} (suite {report.name}, "
        f"{report.lean}); skipped {len(report.skipped)}"
    )
    for task in report.tasks:
        note = f"  (default {', '.join(task.defaults)})" if task.defaults else ""
        print(f"  task {task.id}  ← {task.source}{note}")
    for skipped in report.skipped:
        print(f"  skipped {skipped.theorem} ({skipped.source}): {skipped.reason}")
    for removed in report.removed:
        print(f"  removed {removed}: its theorem is no longer in the files")
    return 0


def _check(args: argparse.Namespace) -> int:
    from ..authoring import check_suite
    from ..tasks import SuiteError

    solutions = Path(args.solutions).absolute() if args.solutions else None
    if args.require_solutions and solutions is None:
        raise SuiteError("--require-solutions needs --solutions DIR")
    report = check_suite(
        Path(args.suite).absolute(), solutions, require_solutions=args.require_solutions
    )
    if args.json:
        _dump(report.model_dump())
    else:
        for task in report.tasks:
            said = "ok  " if task.ok else "FAIL"
            extra = "; ".join([*task.problems, *task.notes]) or {
                "accepted": "reference solution accepted",
                "missing": "no reference solution",
            }.get(task.solution, "")
            print(f"{said} {task.task}" + (f": {extra}" if extra else ""))
        failed = sum(not t.ok for t in report.tasks)
        summary = f"{len(report.tasks) - failed} of {len(report.tasks)} task(s) ok"
        if solutions is not None:
            missing = len(report.missing_solutions)
            summary += (
                f"; {len(report.tasks) - missing} with a reference solution, {missing} without"
            )
        print(summary)
    return 0 if report.ok else 1


def _lint(args: argparse.Namespace) -> int:
    from ..authoring import lint_suite

    against = Path(args.against).absolute() if args.against else None
    report = lint_suite(Path(args.suite).absolute(), budget=args.budget, against=against)
    if args.json:
        _dump(report.model_dump())
    else:
        for f in report.findings:
            level = "allowed" if f.allowed else f.severity
            print(f"{f.location}: {level} {f.code} [{f.task}]: {f.message}")
        shown = [f for f in report.findings if not f.allowed]
        print(f"{len(shown)} finding(s), {len(report.findings) - len(shown)} allowed")
    return 0 if report.ok else 1
