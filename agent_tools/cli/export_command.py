"""`leanrig export inspect RUN_DIR… --out FILE.eval`: a run as an Inspect eval log."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson


def _cmd_export(args: argparse.Namespace) -> int:
    from ..runs import export_inspect

    written = export_inspect([Path(p) for p in args.run_dirs], Path(args.out))
    for log in written:
        print(orjson.dumps(log.to_json()).decode())
    return 0


def add_export_command(sub: Any, common: argparse.ArgumentParser) -> None:
    export = sub.add_parser(
        "export", parents=[common], help="a run in another tool's format: Inspect's eval log"
    )
    formats = export.add_subparsers(dest="export_format", required=True)
    inspect = formats.add_parser(
        "inspect",
        parents=[common],
        help="runs as Inspect eval logs (`inspect view`; needs leanrig[inspect])",
    )
    inspect.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories")
    inspect.add_argument(
        "--out",
        required=True,
        metavar="FILE.eval|DIR",
        help="the log file (one run), or a directory: one <run>.eval per run",
    )
    inspect.set_defaults(func=_cmd_export)
