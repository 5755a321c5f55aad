"""cli: the `leanrig` command and logging setup; the outermost layer, may use all of agent_tools."""

from __future__ import annotations

from lsp_bridge import exports as _exports

from .logs import configure_logging as configure_logging
from .main import main as main

__all__, _getattr = _exports(__name__)
