"""Package names that load on first use (PEP 562): a package ``__init__`` sets
``__getattr__ = lazy_attributes(__name__, globals(), {name: (submodule, attribute)})`` and lists
the same imports under ``TYPE_CHECKING`` for type checkers, so importing one light part of a
package does not import its heavy parts (the MCP SDK, lsprotocol's types)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, namespace: dict[str, Any], table: Mapping[str, tuple[str, str]]
) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package`` (whose module dict is ``namespace``): ``name`` is
    ``table[name]``'s attribute of that submodule, imported when first asked, then kept."""

    def __getattr__(name: str) -> Any:
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{where[0]}", package), where[1])
        namespace[name] = value
        return value

    return __getattr__
