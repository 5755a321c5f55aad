"""The `edit` and `lsp` commands' arguments and bodies (also `python -m agent_tools.editor`).

Imports only what parsing and the relay need; the serving side loads when it runs."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import IO, Any

import anyio
import structlog

from lsp_bridge import LeanrigError

SUPERVISED = "--supervised"


def add_lsp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, help="suite directory (with suite.toml)")
    parser.add_argument("--task", required=True, help="task id")
    parser.add_argument("--workspace", required=True, help="the folder the editor has open")
    parser.add_argument(
        "--run-dir", help="where results.jsonl and the ledger go (default: WORKSPACE/run)"
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="S",
        help="seconds from the editor's first connection (wall clock, the "
        "same for every start of the attempt); then edits are refused and the "
        "verdict runs",
    )
    parser.add_argument("--no-sandbox", action="store_true", help="run Lean without bwrap/rlimits")
    parser.add_argument(
        "--lean",
        help="the Lean to run (default: LEANRIG_LEAN, an elan "
        "toolchain, `lean` on PATH, the bootstrap); `leanrig edit` pins the one "
        "it found",
    )
    parser.add_argument(SUPERVISED, action="store_true", help=argparse.SUPPRESS)
    # Editors' own server arguments are ignored: a human runs Lean as the agents do.
    parser.add_argument("editor_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def add_edit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, help="suite directory (with suite.toml)")
    parser.add_argument("--task", required=True, help="task id")
    parser.add_argument("--workspace", help="folder to create (default: ./leanrig-<task>)")
    parser.add_argument(
        "--run-dir", help="where results.jsonl and the ledger go (default: WORKSPACE/run)"
    )
    parser.add_argument("--time-limit", type=float, metavar="S", help="attempt time limit")
    parser.add_argument("--no-sandbox", action="store_true", help="run Lean without bwrap/rlimits")
    parser.add_argument("--json", action="store_true", help="print the paths as JSON")


def cmd_edit(args: argparse.Namespace) -> int:
    from .edit_workspace import EditOptions, prepare_workspace

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
        print(
            json.dumps(
                {
                    "workspace": str(workspace.root),
                    "task_file": str(workspace.task_file),
                    "shim_dir": str(workspace.shim_dir),
                    "run_dir": str(workspace.run_dir),
                    "lsp_command": list(workspace.lsp_command),
                    "kept_task_file": workspace.kept_task_file,
                    "files": {k: str(v) for k, v in workspace.files.items()},
                }
            )
        )
    else:
        print(workspace.instructions())
    return 0


def cmd_lsp(args: argparse.Namespace) -> int:
    """`leanrig lsp`: the relay, or with ``--supervised`` the attempt's server; the exit code."""
    if args.supervised:
        return _serve(args)
    from ..servers import claimed_stdio, run_event_loop
    from .relay import relay

    argv = supervisor_argv(args)

    async def main() -> int:
        with claimed_stdio() as wire:
            return await relay(argv, wire)

    return run_event_loop(main)


def supervisor_argv(args: argparse.Namespace) -> list[str]:
    """The supervisor's command line for the relay's ``args``, with absolute paths."""
    argv = [
        sys.executable,
        "-m",
        "agent_tools.editor",
        "--log-level",
        _log_level(),
        "lsp",
        "--suite",
        str(Path(args.suite).absolute()),
        "--task",
        args.task,
        "--workspace",
        str(Path(args.workspace).absolute()),
    ]
    if args.run_dir:
        argv += ["--run-dir", str(Path(args.run_dir).absolute())]
    if args.time_limit is not None:
        limit = float(args.time_limit)
        # Exact: run.json compares it.
        argv += ["--time-limit", str(int(limit)) if limit.is_integer() else repr(limit)]
    if args.no_sandbox:
        argv.append("--no-sandbox")
    if args.lean:
        argv += ["--lean", args.lean]
    return [*argv, SUPERVISED]


def _log_level() -> str:
    level = structlog.get_logger().bind().get_effective_level()
    return logging.getLevelName(level).lower() if isinstance(level, int) else "warning"


def _serve(args: argparse.Namespace) -> int:
    """The supervisor: serve the attempt on stdio until the relay leaves."""
    from ..servers import on_first, run_event_loop, stop_signals
    from .human_attempt import state_path
    from .lsp import LspOptions, run_lsp

    options = LspOptions(
        suite=Path(args.suite),
        task=args.task,
        workspace=Path(args.workspace),
        run_dir=Path(args.run_dir) if args.run_dir else None,
        time_limit=args.time_limit,
        sandbox=not args.no_sandbox,
        lean=args.lean,
    )
    _shims_off_path(options.workspace)
    # Once the relay is gone, stderr goes to a file.
    fallback = state_path(options.resolved_run_dir(), args.task).with_suffix(".log")
    sys.stderr = DetachableStderr(sys.stderr, fallback)

    async def main() -> None:
        with stop_signals() as signals:
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(on_first, signals, lambda _signum: tg.cancel_scope.cancel())
                    await run_lsp(options)
                    tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # Unwrap a lone refusal so either entry point reports it (exit 2).
                refused, other = group.split(LeanrigError)
                if refused is None or other is not None or len(refused.exceptions) != 1:
                    raise
                leaf = refused.exceptions[0]
                raise leaf from leaf.__cause__

    run_event_loop(main)
    return 0


def _shims_off_path(workspace: Path) -> None:
    """Take the workspace's shims off ``PATH``, so leanrig's Lean is the real one."""
    from .edit_workspace import SHIM_VAR, shim_dir

    shims = {shim_dir(workspace.absolute()).resolve()}
    if os.environ.get(SHIM_VAR):
        shims.add(Path(os.environ[SHIM_VAR]).resolve())
    entries = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(
        e for e in entries if not e or Path(e).absolute().resolve() not in shims
    )


class DetachableStderr:
    """``sys.stderr`` that moves fd 2 to ``fallback`` (appended) once a write fails."""

    def __init__(self, stream: IO[str], fallback: Path) -> None:
        self._stream = stream
        self._fallback = fallback
        self._moved = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            self._move()
            return self._stream.write(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self._move()

    def _move(self) -> None:
        if self._moved:
            raise OSError("stderr: the fallback failed too")
        self._moved = True
        self._fallback.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._fallback, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
        self._stream = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
