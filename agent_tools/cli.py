"""The ``leanrig`` command line. Parses arguments and calls into the packages; no logic of its own."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lsp_bridge.bootstrap import ensure_bootstrap
from lsp_bridge.errors import LeanrigError


def _cmd_bootstrap(args: argparse.Namespace) -> int:
    result = ensure_bootstrap(install=True)
    if not args.quiet or result.built:
        print(f"bootstrap Lean: {result.lean} ({result.version_line})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="leanrig", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    boot = sub.add_parser("bootstrap", help="build the zero-install Lean (idempotent)")
    boot.add_argument("--quiet", action="store_true")
    boot.set_defaults(func=_cmd_bootstrap)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except LeanrigError as exc:
        print(f"leanrig: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
