"""Layering: imports point inward (agent_tools → repl_pool → lsp_bridge, and AGENT_LAYERS inside
agent_tools) through public `__init__`s, with no import cycle; public names and exceptions."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import re
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
# Inner to outer: a layer may import layers of lower or equal rank only.
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
    "authoring": 8,
    "cli": 9,
}


def python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@functools.cache
def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once for all the module's tests (they only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imported_packages(path: Path) -> set[str]:
    tree = parsed(path)
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
    tree = parsed(path)
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
            elif (node.level == 2 and own is not None) or (node.level == 1 and own is None):
                # `from .. import servers`: the names are the layers themselves
                modules += [alias.name for alias in node.names]
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
    """An inner layer importing an outer one is reported, also as `from .. import LAYER`."""
    src = "from ..servers import bind\nfrom ..sessions.ledger import Ledger\nfrom .. import runs\n"
    probe = ROOT / "agent_tools" / "tasks" / "_probe_for_test.py"
    probe.write_text(src, encoding="utf-8")
    try:
        assert agent_tools_imports(probe) == [
            ("servers", "servers"),
            ("sessions", "sessions.ledger"),
            ("runs", "runs"),
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
    tree = parsed(path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", ["repl_pool", "agent_tools", "bench"])
def test_the_next_layer_uses_only_public_apis(package: str) -> None:
    """Imports of lsp_bridge and repl_pool go through names in their `__all__`; none of tests."""
    inner = {"lsp_bridge", "repl_pool"} - {package}
    for path in python_files(package):
        if ".peers" in path.parts:
            continue
        for module in _absolute_imports(path):
            top, _, rest = module.partition(".")
            assert not (top in inner and rest), (
                f"{path.relative_to(ROOT)} imports {module}; use the package's public names"
            )
            assert top != "tests", f"{path.relative_to(ROOT)} imports the test suite ({module})"
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in inner:
                public = set(importlib.import_module(node.module).__all__)
                hidden = [a.name for a in node.names if a.name not in public]
                assert not hidden, f"{path.relative_to(ROOT)} imports {node.module}.{hidden}"


@pytest.mark.parametrize(
    ("module", "absent"),
    [
        ("agent_tools.cli.main", ("mcp", "lsprotocol")),  # `leanrig --help`, every command
        ("agent_tools.runs.run_report", ("mcp", "lsprotocol")),  # `leanrig report`, `compare`
        ("agent_tools.editor.lsp", ("mcp",)),  # `leanrig lsp`: no MCP at all
        ("agent_tools.agents.search_agent", ("lsprotocol",)),  # an agent: an MCP client only
    ],
)
def test_a_command_imports_only_what_it_uses(module: str, absent: tuple[str, ...]) -> None:
    """Importing ``module`` in a fresh interpreter loads none of the ``absent`` packages."""
    code = f"import sys, {module}; print(sorted(m for m in {absent!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stdout


def _runtime_import_nodes(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import that can run, with whether it sits inside a function: all but those under
    ``if TYPE_CHECKING:`` (never executed)."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for branch in node.orelse:
                visit(branch, in_function)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append((node, in_function))
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, False)
    return found


def _runtime_imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` (dotted, e.g. ``agent_tools.runs.runner``) that ``path``
    imports, at load time or inside a function; not those under ``if TYPE_CHECKING:``."""
    tree = parsed(path)
    here = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    base = here.rsplit(".", 1)[0] if path.name != "__init__.py" else here.removesuffix(".__init__")
    found: set[str] = set()
    for node, _ in _runtime_import_nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            parts = base.split(".")
            anchor = ".".join(parts[: len(parts) - (node.level - 1)])
            target = f"{anchor}.{node.module}" if node.module else anchor
            names = [f"{target}.{a.name}" for a in node.names] if not node.module else []
            found.update(m for m in [target, *names] if m.startswith(package))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(package))
    return found


def _import_cycles(package_dir: Path) -> list[list[str]]:
    """Cycles among the modules of one folder (each module's imports, also in functions)."""
    package = ".".join(package_dir.relative_to(ROOT).parts)
    modules = {
        f"{package}.{p.stem}": p for p in package_dir.glob("*.py") if p.name != "__init__.py"
    }
    graph = {m: sorted(_runtime_imports(p, package) & set(modules)) for m, p in modules.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in graph[m]:
            if state.get(n) == 1:
                cycles.append([*stack[stack.index(n) :], n])
            elif n not in state:
                walk(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            walk(m)
    return cycles


PACKAGE_DIRS = sorted(
    p.parent for p in ROOT.glob("*/__init__.py") if p.parent.name in {"lsp_bridge", "repl_pool"}
) + sorted(p.parent for p in (ROOT / "agent_tools").glob("*/__init__.py"))


@pytest.mark.parametrize("folder", PACKAGE_DIRS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_cycle_inside_a_folder(folder: Path) -> None:
    assert _import_cycles(folder) == []


def test_the_cycle_checker_sees_a_cycle(tmp_path: Path) -> None:
    """A cycle through an import inside a function is found too."""
    folder = ROOT / "agent_tools" / "tasks"
    a, b = folder / "_cycle_a_for_test.py", folder / "_cycle_b_for_test.py"
    a.write_text("def f() -> None:\n    from ._cycle_b_for_test import X\n", encoding="utf-8")
    b.write_text(
        "from typing import TYPE_CHECKING\nfrom . import _cycle_a_for_test\n", encoding="utf-8"
    )
    try:
        (cycle,) = _import_cycles(folder)
        assert {m.rsplit(".", 1)[1] for m in cycle} == {"_cycle_a_for_test", "_cycle_b_for_test"}
    finally:
        a.unlink()
        b.unlink()


LEANRIG_PACKAGES = ("lsp_bridge", "repl_pool", "agent_tools")
# Imported inside functions so leanrig works without them: the extras, pyseccomp (Linux only,
# needs libseccomp), uvicorn (for `serve --http` alone).
OPTIONAL_DEPENDENCIES = {"ray", "matplotlib", "inspect_ai", "pyseccomp", "uvicorn"}
# Where an import of leanrig's own modules may wait for a function, and why.
DEFERRING = {
    # A command's modules load when it runs (test_a_command_imports_only_what_it_uses).
    "agent_tools/cli": "command",
    "agent_tools/editor/cli_commands.py": "command",
    # inspect_log imports inspect_ai (an extra) when it loads.
    "agent_tools/runs/inspect_export.py": "extra",
}


def _deferred_imports(path: Path) -> list[str]:
    """The imports inside functions of ``path`` that are neither an optional dependency nor
    allowed there by DEFERRING."""
    rel = path.relative_to(ROOT).as_posix()
    if any(rel == where or rel.startswith(f"{where}/") for where in DEFERRING):
        return []
    found: list[str] = []
    for node, in_function in _runtime_import_nodes(parsed(path)):
        if not in_function:
            continue
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            modules = ["." * node.level + (node.module or "")]
        found += [m for m in modules if m.split(".")[0] not in OPTIONAL_DEPENDENCIES]
    return found


@pytest.mark.parametrize("package", LEANRIG_PACKAGES)
def test_only_optional_dependencies_wait_for_a_function(package: str) -> None:
    for path in python_files(package):
        assert _deferred_imports(path) == [], path.relative_to(ROOT)


def test_the_deferred_import_checker_sees_one(tmp_path: Path) -> None:
    probe = ROOT / "agent_tools" / "tasks" / "_deferred_for_test.py"
    probe.write_text(
        "import os\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import json\n"
        "def f() -> None:\n    import ray\n    from ..runs import runner\n"
        "    import psutil\n    x = lambda: __import__('os')\n",
        encoding="utf-8",
    )
    try:
        assert _deferred_imports(probe) == ["..runs", "psutil"]
    finally:
        probe.unlink()


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _reaches_past_public_api(path: Path) -> list[str]:
    """What ``path`` uses of leanrig past its public API: modules below an `__init__`, and
    private attributes (``_name``) of what it imported, also via ``setattr``/``getattr``."""
    tree = parsed(path)
    ours: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] in LEANRIG_PACKAGES:
                depth = 2 if parts[0] == "agent_tools" else 1
                if len(parts) > depth:
                    found.append(f"imports {node.module}")
                elif len(parts) == depth:
                    public = set(importlib.import_module(node.module).__all__)
                    found += [
                        f"imports {node.module}.{a.name}"
                        for a in node.names
                        if a.name not in public
                    ]
                ours.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in LEANRIG_PACKAGES:
                    depth = 2 if parts[0] == "agent_tools" else 1
                    if len(parts) > depth:
                        found.append(f"imports {alias.name}")
                    ours.add(alias.asname or parts[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and _root_name(node) in ours
        ):
            found.append(f"uses {ast.unparse(node)}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
            in {"setattr", "getattr"}
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in ours
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value.startswith("_")
        ):
            found.append(f"{ast.unparse(node.func)}s {node.args[0].id}.{node.args[1].value}")
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "bench").glob("*.py")), ids=lambda p: p.name)
def test_bench_uses_public_apis_only(path: Path) -> None:
    assert _reaches_past_public_api(path) == []


def test_the_public_api_checker_sees_a_reach(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from agent_tools.sessions.elaborate import LeanStep\n"
        "from agent_tools.sessions import ProofService\n"
        "import lsp_bridge\n"
        "from lsp_bridge import transport\n"
        "transport.LspTransport._write = None\n"
        "ProofService._step = None\n"
        "setattr(ProofService, '_call', None)\n"
        "lsp_bridge._hidden\n",
        encoding="utf-8",
    )
    assert sorted(_reaches_past_public_api(probe)) == [
        "imports agent_tools.sessions.elaborate",
        "imports lsp_bridge.transport",
        "setattrs ProofService._call",
        "uses ProofService._step",
        "uses lsp_bridge._hidden",
        "uses transport.LspTransport._write",
    ]


def test_a_package_s_names_are_written_once_and_unknown_ones_fail() -> None:
    """No `__init__` has a lazy table or a literal `__all__`; an unknown name raises."""
    import agent_tools.runs as runs

    for path in [
        ROOT / "lsp_bridge" / "__init__.py",
        ROOT / "repl_pool" / "__init__.py",
        *sorted((ROOT / "agent_tools").glob("*/__init__.py")),
    ]:
        text = path.read_text(encoding="utf-8")
        assert "_LAZY" not in text and "__all__ = [" not in text, path
    assert "run_benchmark" in runs.__all__ and runs.run_benchmark is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing_like_this'"):
        _ = runs.nothing_like_this  # type: ignore[attr-defined]


# Exception classes outside the LeanrigError tree, and why.
OUTSIDE_THE_TREE = {
    # A verdict stage's "no": caught inside verdict and reported as the verdict's reasons.
    "agent_tools.verdict.not_accepted.NotAccepted",
}


def _exception_classes() -> list[type[BaseException]]:
    """Every public exception class the product packages define (skipping missing extras)."""
    found: list[type[BaseException]] = []
    for package in LEANRIG_PACKAGES:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.endswith(".__main__"):  # (runs the CLI)
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError as exc:
                if (exc.name or "").split(".")[0] in OPTIONAL_DEPENDENCIES:
                    continue
                raise
            found += [
                value
                for name, value in vars(module).items()
                if inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")  # control flow inside one module
            ]
    return found


def test_every_exception_is_a_leanrig_error() -> None:
    from lsp_bridge import LeanrigError

    classes = _exception_classes()
    names = {f"{c.__module__}.{c.__qualname__}" for c in classes}
    assert {"agent_tools.tasks.locate.LocateError", "lsp_bridge.errors.ServerDied"} <= names
    outside = sorted(
        name
        for c, name in ((c, f"{c.__module__}.{c.__qualname__}") for c in classes)
        if not issubclass(c, LeanrigError) and name not in OUTSIDE_THE_TREE
    )
    assert outside == []


def test_the_set_proof_reading_path_is_eight_modules_that_call_each_other() -> None:
    """docs/architecture.md's reading path: at most 8 modules, each one's named entry point
    defined there and called from a module before it on the path (a real call chain)."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Reading one `set_proof`", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. `([\w/]+\.py)`: (?:`(\w+)\.(\w+)`)?", section, re.M)
    assert 2 <= len(steps) <= 8, steps
    # tools.py calls the service's method named by the tool (`bind`), not by a literal call.
    by_name = {"agent_tools/servers/tools.py"}
    for i, (path, owner, method) in enumerate(steps):
        text = (ROOT / path).read_text(encoding="utf-8")
        if not method:
            continue
        assert f"class {owner}" in text and f"def {method}(" in text, (path, method)
        callers = [p for p, _, _ in steps[:i]]
        if i and steps[i - 1][0] not in by_name:
            assert any(f".{method}(" in (ROOT / p).read_text(encoding="utf-8") for p in callers)
