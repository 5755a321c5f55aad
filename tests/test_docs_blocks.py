"""Every shell block of README.md and docs/ runs as printed (bash -e, pipefail, in a checkout-like
directory with a fresh HOME), unless a `<!-- not run by tests/test_docs_blocks.py: WHY -->`
comment before its fence says why not."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from lsp_bridge import cache_root

from .test_as_typed import sandbox_or_skip

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!-- not run by tests/test_docs_blocks\.py: (?P<why>.+?) -->\n$")
BLOCK = re.compile(r"^```(?:sh|bash|shell)\n(?P<code>.*?)^```", re.MULTILINE | re.DOTALL)
BLOCK_SECONDS = 300


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    code: str
    not_run: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            before = text[: m.start()]
            previous = before[before.rstrip("\n").rfind("\n") + 1 :]
            mark = MARK.search(previous)
            found.append(
                Block(
                    str(page.relative_to(ROOT)),
                    before.count("\n") + 1,
                    m["code"],
                    mark["why"] if mark else None,
                )
            )
    return found


RUN = [b for b in blocks() if b.not_run is None]


def test_every_shell_block_runs_or_says_why_not() -> None:
    """Each block not run names existing test files in its reason, and some blocks run."""
    not_run = [b for b in blocks() if b.not_run is not None]
    for b in not_run:
        print(f"not run: {b.id}: {b.not_run}")
        named = re.findall(r"tests/(test_\w+)\.py", b.not_run or "")
        assert all((ROOT / "tests" / f"{n}.py").exists() for n in named), b
    assert RUN and all(b.not_run is None for b in RUN)


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_a_shell_block_runs_as_printed(block: Block, tmp_path: Path) -> None:
    sandbox_or_skip()
    work, home = tmp_path / "checkout", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    shutil.copytree(
        ROOT / "lean_project",
        work / "lean_project",
        ignore=shutil.ignore_patterns("*.olean", "*.ilean"),
    )
    (work / ".venv").symlink_to(ROOT / ".venv")
    # leanrig's cache (the bootstrap Lean, the harnesses) stays the user's.
    env = {**os.environ, "HOME": str(home), "LEANRIG_CACHE": str(cache_root())}
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"{block.id}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
