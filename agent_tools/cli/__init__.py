"""cli: the `leanrig` command (serve, check, doctor, demo, report, bootstrap) and logging
setup. The outermost layer: it may use every other part of agent_tools."""

from .logs import configure_logging
from .main import main

__all__ = ["configure_logging", "main"]
