"""The ``leanrig`` command line: parses arguments, calls into the packages; no logic here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import orjson

from lsp_bridge.bootstrap import ensure_bootstrap
from lsp_bridge.errors import LeanrigError

from .logs import configure_logging


def _cmd_bootstrap(args: argparse.Namespace) -> int:
    result = ensure_bootstrap(install=True)
    if not args.quiet or result.built:
        print(f"bootstrap Lean: {result.lean} ({result.version_line})")
    return 0


def _cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_doctor

    report = run_doctor()
    if args.json:
        print(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        for key, value in report.to_json().items():
            print(f"{key:>13}: {value}")
    if report.lean_path is None:
        print("leanrig: no usable Lean. Run `make setup` or set LEANRIG_LEAN.", file=sys.stderr)
        return 2
    return 0 if report.smoke_ok else 1


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leanrig", description=__doc__)
    parser.add_argument("--log-level", default="warning", help="structlog level (JSON on stderr)")
    sub = parser.add_subparsers(dest="command", required=True)

    boot = sub.add_parser("bootstrap", help="build the zero-install Lean (idempotent)")
    boot.add_argument("--quiet", action="store_true")
    boot.set_defaults(func=_cmd_bootstrap)

    doctor = sub.add_parser("doctor", help="which Lean, its mode, sandbox tools, smoke test")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(func=_cmd_doctor)

    demo = sub.add_parser("demo", help="a scripted proof session on the bootstrap Lean")
    demo.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    try:
        code: int = args.func(args)
    except LeanrigError as exc:
        print(f"leanrig: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
