"""Test suites made from the demo suite: a copy with extra tasks (task files as real benchmark
files are: namespaces, unicode, CRLF, `#exit`, broken ones), or with more in its library."""

from __future__ import annotations

import shutil
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "demo"


def demo_with_tasks(root: Path, tasks: dict[str, tuple[str, str, str]]) -> Path:
    """A copy of the demo suite at ``root`` plus ``tasks``: id -> (file name under Demo/,
    theorem, text; written byte for byte, so CRLF stays)."""
    shutil.copytree(DEMO, root)
    with (root / "suite.toml").open("a", encoding="utf-8") as toml:
        for task_id, (name, theorem, text) in tasks.items():
            (root / "Demo" / name).write_bytes(text.encode())
            toml.write(f'\n[[tasks]]\nid = "{task_id}"\nfile = "Demo/{name}"\n'
                       f'theorem = "{theorem}"\ndifficulty = 1\n')  # fmt: skip
    return root


def demo_with_library(root: Path, extra: str) -> Path:
    """A copy of the demo suite at ``root`` whose library (``Demo/Basic.lean``) ends with
    ``extra`` (e.g. an axiom, or a lemma left with ``sorry``)."""
    shutil.copytree(DEMO, root)
    basic = root / "Demo" / "Basic.lean"
    basic.write_text(basic.read_text(encoding="utf-8") + "\n" + extra + "\n", encoding="utf-8")
    return root


# A user's demo suite cut to five tasks: some the search agent proves and some it does not
# (two only with the library), enough for what the runs over it assert.
SWEPT = ("refl_z", "and_swap", "add_zero", "eq_symm", "false_elim")


def cut_suite(suite: Path, tasks: tuple[str, ...]) -> None:
    """``suite``'s manifest cut to ``tasks`` (its files stay)."""
    head, *blocks = (suite / "suite.toml").read_text(encoding="utf-8").split("[[tasks]]")
    kept = [b for b in blocks if any(f'id = "{t}"' in b for t in tasks)]
    assert len(kept) == len(tasks)
    (suite / "suite.toml").write_text(head + "".join("[[tasks]]" + b for b in kept))
