"""structlog setup for leanrig processes: JSON lines on stderr (stdout may carry a protocol)."""

from __future__ import annotations

import logging
import sys

import orjson
import structlog


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)


def configure_logging(level: str = "warning") -> None:
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=lambda o, **_: orjson.dumps(o).decode()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.WARNING)
        ),
        # Resolve sys.stderr when a logger is made, not at configuration time: it may be
        # replaced (tests capture it). Loggers are not cached for the same reason; leanrig
        # logs rarely (warnings and lifecycle events), so this costs nothing measurable.
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
