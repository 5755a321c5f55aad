"""authoring: `leanrig suite import`, `check` and `lint`, on sandboxed one-shot Lean processes.

Names load on first use (PEP 562)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .checker import CheckReport as CheckReport
    from .checker import check_suite as check_suite
    from .importer import ImportReport as ImportReport
    from .importer import import_suite as import_suite
    from .linter import Finding as Finding
    from .linter import LintReport as LintReport
    from .linter import lint_suite as lint_suite
    from .one_shot_lean import AuthoringError as AuthoringError

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
