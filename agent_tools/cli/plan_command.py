"""`leanrig model plan-from ATTEMPT_DIR`: a recorded attempt as a replay plan; no logic here."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson


def _cmd_plan_from(args: argparse.Namespace) -> int:
    from ..models import plan_from_attempt

    recorded = plan_from_attempt(Path(args.attempt_dir))
    text = orjson.dumps(recorded.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
    if args.out:
        Path(args.out).write_bytes(text)
    else:
        sys.stdout.buffer.write(text)
    steps = sum(1 for s in recorded.steps if "tool" in s)
    print(
        f"leanrig model: {recorded.task}: {steps} tool call(s) from {recorded.source}"
        + "".join(f"; {n}" for n in recorded.notes),
        file=sys.stderr,
    )
    return 0


def add_plan_from_command(model_kinds: Any) -> None:
    plan_from = model_kinds.add_parser(
        "plan-from",
        help="a recorded attempt (its model_io.jsonl, else its ledger) as a "
        "replay plan for `leanrig model serve --plan`",
    )
    plan_from.add_argument("attempt_dir", metavar="ATTEMPT_DIR", help="RUN_DIR/attempts/TASK/K")
    plan_from.add_argument("--out", metavar="PLAN.json", help="default: standard output")
    plan_from.set_defaults(func=_cmd_plan_from)
