"""The layering: imports point one way (agent_tools → repl_pool → lsp_bridge), and each
package's public names are what its __all__ says."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "lsp_bridge": {"repl_pool", "agent_tools"},
    "repl_pool": {"agent_tools"},
    "agent_tools": set(),
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    for path in (ROOT / package).glob("*.py"):
        bad = imported_packages(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("package", ["lsp_bridge", "repl_pool"])
def test_public_names_are_exactly_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = set(module.__all__)
    public = {n for n in vars(module) if not n.startswith("_")} - {
        name for name in vars(module) if isinstance(vars(module)[name], type(module))
    }
    assert exported == public
    for name in exported:
        assert getattr(module, name) is not None
