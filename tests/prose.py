"""Count the prose of product code: docstring lines, comment lines, and timing figures in them.

Run `python -m tests.prose [PATH ...]` for a per-file table (largest first) and the timing
figures found; tests/test_prose.py holds the budget.
"""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("lsp_bridge", "repl_pool", "agent_tools", "leanrig")
# Directives to tools, not prose.
DIRECTIVES = ("fmt: skip", "type: ignore", "noqa", "pragma")
# A duration written as a measurement: "4 ms", "~20 µs", "0.3-0.6 ms", "1.5 s per call".
TIMING = re.compile(r"\d(\.\d+)?\s?(ms|µs|us)\b|~\d+(\.\d+)?\s?s\b")


@dataclass(frozen=True)
class FileProse:
    path: Path
    docstring_lines: int
    comment_lines: int
    code_lines: int
    timings: tuple[tuple[int, str], ...]  # (line number, line) of prose quoting a duration

    @property
    def prose_lines(self) -> int:
        return self.docstring_lines + self.comment_lines


def docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.walk(tree):
        if not isinstance(node, kinds) or not node.body:
            continue
        first = node.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
        ):
            lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def comment_lines(source: str) -> set[int]:
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and not any(d in token.string for d in DIRECTIVES):
            lines.add(token.start[0])
    return lines


def measure(path: Path) -> FileProse:
    source = path.read_text(encoding="utf-8")
    docs = docstring_lines(ast.parse(source))
    comments = comment_lines(source) - docs
    text = source.splitlines()
    prose = docs | comments
    code = sum(1 for n, line in enumerate(text, 1) if line.strip() and n not in prose)
    timings = tuple((n, text[n - 1].strip()) for n in sorted(prose) if TIMING.search(text[n - 1]))
    return FileProse(path, len(docs), len(comments), code, timings)


def product_files(roots: tuple[str, ...] = PRODUCT) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        base = ROOT / root
        files.extend([base] if base.is_file() else sorted(base.rglob("*.py")))
    return files


def main(argv: list[str]) -> None:
    measured = [measure(path) for path in product_files(tuple(argv) or PRODUCT)]
    measured.sort(key=lambda m: -m.prose_lines)
    for m in measured:
        counts = f"{m.prose_lines:5} {m.docstring_lines:5} {m.comment_lines:5} {m.code_lines:6}"
        print(f"{counts}  {m.path.relative_to(ROOT)}")
    docs = sum(m.docstring_lines for m in measured)
    comments = sum(m.comment_lines for m in measured)
    code = sum(m.code_lines for m in measured)
    print(f"prose {docs + comments} (docstrings {docs}, comments {comments}), code {code}")
    for m in measured:
        for n, line in m.timings:
            print(f"timing: {m.path.relative_to(ROOT)}:{n}: {line}")


if __name__ == "__main__":
    main(sys.argv[1:])
