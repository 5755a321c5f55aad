"""`python -m agent_tools.editor lsp|edit ...` (the same as `leanrig lsp|edit ...`)."""

from __future__ import annotations

import argparse
import logging
import sys

import orjson
import structlog

from lsp_bridge import LeanrigError

from .cli_commands import add_edit_arguments, add_lsp_arguments, cmd_edit, cmd_lsp


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)  # stdout is the LSP channel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_tools.editor")
    parser.add_argument("--log-level", default="warning")
    sub = parser.add_subparsers(dest="command", required=True)
    lsp = sub.add_parser("lsp", help="serve one task to an editor over LSP on stdio")
    add_lsp_arguments(lsp)
    lsp.set_defaults(func=cmd_lsp)
    edit = sub.add_parser("edit", help="prepare an editor workspace for one task")
    add_edit_arguments(edit)
    edit.set_defaults(func=cmd_edit)
    args = parser.parse_args(argv)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=lambda o, **_: orjson.dumps(o).decode()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(args.log_level.upper(), logging.WARNING)
        ),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
    try:
        return int(args.func(args))
    except LeanrigError as exc:  # a refusal: no traceback
        print(f"leanrig: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
