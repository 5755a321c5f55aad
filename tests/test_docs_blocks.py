"""Every shell block of README.md and docs/ runs as printed, or says in the text why not.

A block runs with bash from a directory laid out as the checkout the text implies
(`lean_project/`, and `.venv/` as `make setup` made it), `HOME` a fresh directory (`~/…` paths
stay in the test), `-e` and `pipefail`: its last command's failure or any earlier one's fails
it. A block that cannot run here (several machines, a vendor's key, a human at an editor, or
the minutes `make bench` takes) has a comment right before its fence,
`<!-- not run by tests/test_docs_blocks.py: WHY -->`, naming where else it is exercised; the
first test lists those and holds every other block to running.
"""

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
    not_run: str | None  # why, as the text says

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
            found.append(Block(str(page.relative_to(ROOT)), before.count("\n") + 1,
                               m["code"], mark["why"] if mark else None))  # fmt: skip
    return found


RUN = [b for b in blocks() if b.not_run is None]


def test_every_shell_block_runs_or_says_why_not() -> None:
    """The blocks not run here, each with its reason (printed: `pytest -s`), and some run."""
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
    shutil.copytree(ROOT / "lean_project", work / "lean_project",
                    ignore=shutil.ignore_patterns("*.olean", "*.ilean"))  # fmt: skip
    (work / ".venv").symlink_to(ROOT / ".venv")
    # leanrig's cache stays the user's (the bootstrap Lean, the pinned harnesses).
    env = {**os.environ, "HOME": str(home), "LEANRIG_CACHE": str(cache_root())}
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=work, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=BLOCK_SECONDS,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.id}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
