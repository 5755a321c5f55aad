"""Every repository path, Python module, `leanrig` command and `--flag` that README.md, docs/*.md
and the packages' README.md files quote or link to exists."""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_tools.cli.main import build_parser
from agent_tools.editor import add_edit_arguments, add_lsp_arguments

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted(p for p in ROOT.glob("*/README.md") if (p.parent / "__init__.py").exists()),
]
LAYERS = sorted(p.parent.name for p in (ROOT / "agent_tools").glob("*/__init__.py"))
PACKAGES = ("agent_tools", "lsp_bridge", "repl_pool")
# Flags the docs quote of other programs, and names that look like paths but are not.
NOT_LEANRIG = {
    "--version": "Lean's and a harness's (`leanrig doctor` compares them)",
    "--die-with-parent": "bwrap's",
    "--size": "bwrap's (a tmpfs's)",
    "--message-limit": "`inspect eval`'s",
    "--token-limit": "`inspect eval`'s",
    "--cmd": "Neovim's",
    "leanrig/suite": "Inspect's name of the task leanrig registers (leanrig._registry)",
}
# `leanrig edit` and `leanrig lsp` parse their own arguments (main passes the rest on).
EDITOR_FLAGS = {"edit": add_edit_arguments, "lsp": add_lsp_arguments}


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser, name: str | None = None) -> set[str]:
    found = {o for a in parser._actions for o in a.option_strings}
    if name in EDITOR_FLAGS:
        own = argparse.ArgumentParser()
        EDITOR_FLAGS[name](own)
        found |= {o for a in own._actions for o in a.option_strings}
    return found


def _every_flag(parser: argparse.ArgumentParser, name: str | None = None) -> set[str]:
    found = _flags(parser, name)
    for sub, child in _subcommands(parser).items():
        found |= _every_flag(child, sub)
    return found


PARSER = build_parser()
EVERY_FLAG = _every_flag(PARSER)


def _command_problem(text: str) -> str | None:
    """What of ``leanrig WORDS…`` the CLI lacks (None: all there)."""
    parser, known = PARSER, _flags(PARSER)
    for word in text.split()[1:]:
        if word.startswith("--"):
            if word.split("=")[0] not in known:
                return f"no flag {word}"
        elif word in _subcommands(parser):
            parser = _subcommands(parser)[word]
            known |= _flags(parser, word)
        elif _subcommands(parser) and re.fullmatch(r"[a-z][a-z-]*", word):
            return f"no command {word}"
    return None


def _path_exists(name: str, doc: Path) -> bool:
    """Relative to the repository, the doc's folder or agent_tools/; a bare name anywhere."""
    if "/" not in name:
        return any(True for _ in ROOT.glob(f"[!.]*/**/{name}")) or (ROOT / name).exists()
    return any((base / name).exists() for base in (ROOT, doc.parent, ROOT / "agent_tools"))


def _module_exists(dotted: str) -> bool:
    """A module or a name in one; a dotted name starting with a layer is under agent_tools."""
    parts = dotted.split(".")
    if parts[0] in LAYERS:
        parts = ["agent_tools", *parts]
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True
    return False


def _links(text: str) -> Iterator[str]:
    """Link targets in the repository (not URLs, not anchors)."""
    for m in re.finditer(r"\]\(([^)\s#]+)", text):
        if ":" not in m.group(1):
            yield m.group(1)


def problems(doc: Path) -> list[str]:
    """The names ``doc`` gives that do not exist, each with what it is taken for."""
    tops = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")}
    folders = tops | {p.name for p in doc.parent.iterdir() if p.is_dir()} | set(LAYERS)
    module = re.compile(rf"(?:{'|'.join((*PACKAGES, *LAYERS))})(?:\.[A-Za-z_]\w*)+")
    text = doc.read_text(encoding="utf-8")
    found = [f"`{link}`: no such path" for link in _links(text) if not _path_exists(link, doc)]
    for span in (m.group(1).strip() for m in re.finditer(r"`([^`\n]+)`", text)):
        if span in NOT_LEANRIG or span.startswith(("http:", "https:", "/", "~")):
            continue
        if re.fullmatch(r"leanrig(?: [a-z-]+\b(?!:).*)?", span):
            problem = _command_problem(span)
            found += [f"`{span}`: {problem}"] if problem else []
        elif re.fullmatch(r"--[a-z][a-z0-9-]*", span):
            found += [] if span in EVERY_FLAG else [f"`{span}`: no such leanrig flag"]
        elif re.fullmatch(r"[\w.-]+(?:/[\w.-]+)*/?", span) and (
            span.removesuffix("/").split("/")[0] in folders if "/" in span else span.endswith(".py")
        ):
            name = span.removesuffix("/")
            dotted = name.removesuffix(".py").replace("/", ".")
            if not _path_exists(name, doc) and not _module_exists(dotted):
                found.append(f"`{span}`: no such path")
        elif module.fullmatch(span) and not _module_exists(span):
            found.append(f"`{span}`: no such module")
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_what_a_doc_names_exists(doc: Path) -> None:
    assert problems(doc) == []


def test_the_docs_checker_sees_what_is_gone(tmp_path: Path) -> None:
    doc = tmp_path / "probe.md"
    doc.write_text(
        "`agent_tools/runs/runner.py` `sessions/ledger.py` `runner.py` `tasks.body_bounds`\n"
        "`leanrig run --suite DIR --parallel N` `leanrig edit --workspace DIR` `--resume`\n"
        "`agent_tools/servers/clients.py` `mcp_direct.py` `tasks.frame` `lsp_bridge.nothing`\n"
        "[a link](../docs/gone.md) `leanrig serve --no-such-flag` `leanrig frobnicate`\n"
        "`--no-such-flag` `--version` `run.json` `tools/call`\n",
        encoding="utf-8",
    )
    (tmp_path / "docs").mkdir()
    assert problems(doc) == [
        "`../docs/gone.md`: no such path",
        "`agent_tools/servers/clients.py`: no such path",
        "`mcp_direct.py`: no such path",
        "`tasks.frame`: no such module",
        "`lsp_bridge.nothing`: no such module",
        "`leanrig serve --no-such-flag`: no flag --no-such-flag",
        "`leanrig frobnicate`: no command frobnicate",
        "`--no-such-flag`: no such leanrig flag",
    ]
