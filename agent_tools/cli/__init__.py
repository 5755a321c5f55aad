"""cli: the `leanrig` command (serve, check, doctor, demo, report, bootstrap) and logging
setup. The outermost layer: it may use every other part of agent_tools."""

from __future__ import annotations

from lsp_bridge import exports as _exports

from .logs import configure_logging as configure_logging
from .main import main as main

__all__, _getattr = _exports(__name__)
