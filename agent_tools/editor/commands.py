"""The `edit` and `lsp` commands' arguments and bodies (`leanrig edit|lsp`, and
`python -m agent_tools.editor edit|lsp`, which parse the same arguments)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import anyio

from lsp_bridge import LeanrigError

from ..servers import ignore_stop_signals, on_first, run_event_loop, stop_signals
from .edit_workspace import EditOptions, prepare_workspace
from .lsp import LspOptions, run_lsp


def add_lsp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, help="suite directory (with suite.toml)")
    parser.add_argument("--task", required=True, help="task id")
    parser.add_argument("--workspace", required=True, help="the folder the editor has open")
    parser.add_argument("--run-dir", help="where results.jsonl and the ledger go "
                        "(default: WORKSPACE/run)")  # fmt: skip
    parser.add_argument("--time-limit", type=float, metavar="S",
                        help="seconds from the editor's first connection (wall clock, the "
                        "same for every start of the attempt); then edits are refused and the "
                        "verdict runs")  # fmt: skip
    parser.add_argument("--no-sandbox", action="store_true", help="run Lean without bwrap/rlimits")
    # Editors append their own server arguments (a root folder, -D options): ignored, so a
    # human runs Lean with the same options as the agents.
    parser.add_argument("editor_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def add_edit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, help="suite directory (with suite.toml)")
    parser.add_argument("--task", required=True, help="task id")
    parser.add_argument("--workspace", help="folder to create (default: ./leanrig-<task>)")
    parser.add_argument("--run-dir", help="where results.jsonl and the ledger go "
                        "(default: WORKSPACE/run)")  # fmt: skip
    parser.add_argument("--time-limit", type=float, metavar="S", help="attempt time limit")
    parser.add_argument("--no-sandbox", action="store_true", help="run Lean without bwrap/rlimits")
    parser.add_argument("--json", action="store_true", help="print the paths as JSON")


def cmd_edit(args: argparse.Namespace) -> int:
    workspace = prepare_workspace(
        EditOptions(
            suite=Path(args.suite),
            task=args.task,
            workspace=Path(args.workspace) if args.workspace else None,
            run_dir=Path(args.run_dir) if args.run_dir else None,
            time_limit=args.time_limit,
            sandbox=not args.no_sandbox,
        )
    )
    if args.json:
        print(json.dumps({"workspace": str(workspace.root), "task_file": str(workspace.task_file),
                          "shim_dir": str(workspace.shim_dir), "run_dir": str(workspace.run_dir),
                          "lsp_command": list(workspace.lsp_command),
                          "kept_task_file": workspace.kept_task_file,
                          "files": {k: str(v) for k, v in workspace.files.items()}}))  # fmt: skip
    else:
        print(workspace.instructions())
    return 0


def cmd_lsp(args: argparse.Namespace) -> int:
    options = LspOptions(
        suite=Path(args.suite),
        task=args.task,
        workspace=Path(args.workspace),
        run_dir=Path(args.run_dir) if args.run_dir else None,
        time_limit=args.time_limit,
        sandbox=not args.no_sandbox,
    )

    async def main() -> None:
        with stop_signals() as signals:
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(on_first, signals, lambda _signum: tg.cancel_scope.cancel())
                    await run_lsp(options)
                    tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # A refusal (a LeanrigError: exit 2 with its message) out of the group, so
                # either entry (`leanrig lsp`, `python -m agent_tools.editor lsp`) says it.
                refused, other = group.split(LeanrigError)
                if refused is None or other is not None or len(refused.exceptions) != 1:
                    raise
                leaf = refused.exceptions[0]
                raise leaf from leaf.__cause__

    run_event_loop(main)
    ignore_stop_signals()  # stopped or done: what is left is exiting
    return 0
