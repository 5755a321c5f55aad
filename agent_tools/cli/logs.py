"""structlog setup for leanrig processes: JSON lines on stderr (stdout may carry a protocol)."""

from __future__ import annotations

import logging
import sys

import orjson
import structlog


def _stderr_logger(*_args: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)


# Third-party loggers: shown at the debug level, else only their errors.
THIRD_PARTY_LOGGERS = ("ray", "httpx", "httpcore", "uvicorn", "mcp", "asyncio", "filelock")


def configure_logging(level: str = "warning") -> None:
    """leanrig's log lines at ``level`` and above; third parties' at debug, else errors only."""
    threshold = logging.getLevelNamesMapping().get(level.upper(), logging.WARNING)
    logging.getLogger("leanrig").setLevel(threshold)
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(
            logging.DEBUG if threshold <= logging.DEBUG else logging.ERROR
        )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=lambda o, **_: orjson.dumps(o).decode()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        # Resolved per logger, not cached: sys.stderr may be replaced (tests capture it).
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
