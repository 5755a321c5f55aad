"""The layering: imports point one way (agent_tools → repl_pool → lsp_bridge); inside
agent_tools the folders are layers (tasks → verdict → library → sessions → servers → runs →
cli, outer using inner, never the reverse, and only through a folder's public __init__); each
package's public names are what its __all__ says."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "lsp_bridge": {"repl_pool", "agent_tools"},
    "repl_pool": {"agent_tools"},
    "agent_tools": set(),
}
# Inner to outer. A layer may import layers of lower or equal rank only (equal: siblings that
# never import each other in practice, e.g. runs and editor).
AGENT_LAYERS = {
    "tasks": 0,
    "verdict": 1,
    "library": 2,
    "sessions": 3,
    "servers": 4,
    "models": 5,
    "runs": 6,
    "agents": 7,
    "editor": 7,
    "cli": 8,
}


def python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def agent_tools_imports(path: Path) -> list[tuple[str, str]]:
    """(layer, full module) for every import of another agent_tools folder from `path`."""
    rel = path.relative_to(ROOT / "agent_tools").parts
    own = rel[0] if len(rel) > 1 else None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        modules: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module and node.module.startswith("agent_tools."):
                modules.append(node.module.removeprefix("agent_tools."))
            elif (node.level == 2 and own is not None and node.module) or (
                node.level == 1 and own is None and node.module
            ):
                modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules += [
                a.name.removeprefix("agent_tools.")
                for a in node.names
                if a.name.startswith("agent_tools.")
            ]
        found += [(m.split(".")[0], m) for m in modules]
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    for path in python_files(package):
        bad = imported_packages(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_agent_tools_is_folders_by_job() -> None:
    flat = [p.name for p in (ROOT / "agent_tools").glob("*.py") if p.name != "__init__.py"]
    assert flat == [], f"agent_tools modules belong in a layer folder: {flat}"
    folders = {p.name for p in (ROOT / "agent_tools").iterdir() if (p / "__init__.py").exists()}
    assert folders == set(AGENT_LAYERS)


def test_agent_tools_layers_point_inward() -> None:
    for path in python_files("agent_tools"):
        rel = path.relative_to(ROOT / "agent_tools").parts
        if len(rel) == 1:
            continue
        own = rel[0]
        for layer, module in agent_tools_imports(path):
            if layer == own:
                continue
            assert layer in AGENT_LAYERS, f"{path.relative_to(ROOT)} imports unknown {module}"
            assert AGENT_LAYERS[layer] <= AGENT_LAYERS[own], (
                f"{path.relative_to(ROOT)} ({own}) imports outer layer {module}"
            )
            assert module == layer, (
                f"{path.relative_to(ROOT)} reaches into {module}; import from agent_tools.{layer}"
            )


def test_layer_checker_sees_a_violation(tmp_path: Path) -> None:
    """The checker itself can fail: an inner layer importing an outer one is reported."""
    src = "from ..servers import TOOLS\nfrom ..sessions.ledger import Ledger\n"
    probe = ROOT / "agent_tools" / "tasks" / "_probe_for_test.py"
    probe.write_text(src, encoding="utf-8")
    try:
        assert agent_tools_imports(probe) == [
            ("servers", "servers"),
            ("sessions", "sessions.ledger"),
        ]
    finally:
        probe.unlink()


@pytest.mark.parametrize(
    "package",
    ["lsp_bridge", "repl_pool", *(f"agent_tools.{layer}" for layer in AGENT_LAYERS)],
)
def test_public_names_are_exactly_all(package: str) -> None:
    module = importlib.import_module(package)
    exported = set(module.__all__)
    for name in exported:  # (also loads the names a package loads on first use, PEP 562)
        assert getattr(module, name) is not None
    lazy_machinery = {"TYPE_CHECKING", "Any", "annotations"}
    public = (
        {n for n in vars(module) if not n.startswith("_")}
        - lazy_machinery
        - {name for name in vars(module) if isinstance(vars(module)[name], type(module))}
    )
    assert exported == public


def _absolute_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", ["agent_tools", "bench"])
def test_the_next_layer_uses_only_public_apis(package: str) -> None:
    """agent_tools and bench use lsp_bridge and repl_pool through their `__init__` (the public
    API, exact `__all__`), and bench does not reach into the test suite."""
    for path in python_files(package):
        if ".peers" in path.parts:
            continue
        for module in _absolute_imports(path):
            top, _, rest = module.partition(".")
            assert not (top in {"lsp_bridge", "repl_pool"} and rest), (
                f"{path.relative_to(ROOT)} imports {module}; use the package's public names"
            )
            assert top != "tests", f"{path.relative_to(ROOT)} imports the test suite ({module})"


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("agent_tools.cli.main", ("mcp", "lsprotocol")),  # `leanrig --help`, every command
        ("agent_tools.runs.runreport", ("mcp", "lsprotocol")),  # `leanrig report`, `compare`
        ("agent_tools.editor.lsp", ("mcp",)),  # `leanrig lsp`: no MCP at all
        ("agent_tools.agents.search_agent", ("lsprotocol",)),  # an agent: an MCP client only
    ],
)
def test_a_command_imports_only_what_it_uses(module: str, absent: tuple[str, ...]) -> None:
    """Package `__init__`s load their names on first use: `leanrig --help` took 2.4 s here,
    importing the MCP SDK (~1 s) and lsprotocol's types (~0.5 s) it never used; `leanrig lsp`
    and every agent process paid for the MCP SDK or Lean's LSP types they do not need."""
    code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout
