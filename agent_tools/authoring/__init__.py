"""authoring: suites from a benchmark's own Lean files — `leanrig suite import` (``importer.py``,
reading the files: ``sources.py``), `leanrig suite check` (``checker.py``: every task loads,
elaborates with only its placeholder missing, reference solutions pass the verdict) and
`leanrig suite lint` (``linter.py``: statement defects, each a ``Finding``). Lean answers
through sandboxed one-shot runs (``lean_runs.py``). Uses tasks, verdict and the search agent's
candidate terms (agents); used by cli.

Names load on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .checker import CheckReport as CheckReport
    from .checker import check_suite as check_suite
    from .importer import ImportReport as ImportReport
    from .importer import import_suite as import_suite
    from .lean_runs import AuthoringError as AuthoringError
    from .linter import Finding as Finding
    from .linter import LintReport as LintReport
    from .linter import lint_suite as lint_suite

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
