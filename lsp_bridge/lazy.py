"""A package's public names, read once from its ``__init__``'s ``name as name`` imports.

Names imported under ``if TYPE_CHECKING:`` load on first use (PEP 562); the ``__init__`` ends
with ``__all__, _getattr = exports(__name__)`` and ``__getattr__ = _getattr`` outside TYPE_CHECKING.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith(
        "TYPE_CHECKING"
    )


def exports(package: str) -> tuple[list[str], Callable[[str], Any]]:
    """``package``'s public names (sorted) and the ``__getattr__`` that loads its lazy ones."""
    module = sys.modules[package]
    tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
    public: set[str] = set()
    lazy: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            public.update(a.name for a in node.names if a.asname == a.name)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for inner in node.body:
                if isinstance(inner, ast.ImportFrom) and inner.level == 1 and inner.module:
                    for alias in inner.names:
                        name = alias.asname or alias.name
                        public.add(name)
                        lazy[name] = (inner.module, alias.name)
    namespace = vars(module)

    def __getattr__(name: str) -> Any:
        where = lazy.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{where[0]}", package), where[1])
        namespace[name] = value
        return value

    return sorted(public), __getattr__


__all__ = ["exports"]
