"""A task file's frame — its text before and after the proof body — and the one rule by which
an edited file keeps it. Pure.

A file keeps the frame when the text before its body and the text after it are the task's byte
for byte, or are once both sides drop what editors add or trim on save and Lean does not read:
spaces and tabs at line ends outside string literals (inside one they are part of a value),
and whitespace at the end of the file. vscode-lean4 turns on ``files.trimTrailingWhitespace``,
``insertFinalNewline`` and ``trimFinalNewlines`` for Lean files, so a task file with a space at
a line end, or without its final line break, changes outside its body at every save. The
verdict and the editor proxy read a body by this rule (``body_bounds``), so an editor's save
never reads as tampering to one and as a proof to the other.
"""

from __future__ import annotations

import bisect
import functools
import re

from lsp_bridge import TokenKind, scan_text

_LINE_END_SPACES = re.compile(r"[ \t]+(?=\r?\n)")
_STRING_KINDS = frozenset({TokenKind.STRING, TokenKind.RAW_STRING})


def _line_end_runs(text: str) -> list[tuple[int, int]]:
    """The runs of spaces and tabs that end lines of ``text`` outside string literals."""
    strings = scan_text(text).of(_STRING_KINDS)  # in text order, disjoint
    starts = [s.start for s in strings]
    runs = []
    for m in _LINE_END_SPACES.finditer(text):
        k = bisect.bisect_right(starts, m.start()) - 1  # the last string starting before
        if k < 0 or m.start() >= strings[k].end:
            runs.append((m.start(), m.end()))
    return runs


def _without(text: str, runs: list[tuple[int, int]]) -> str:
    out: list[str] = []
    pos = 0
    for start, end in runs:
        out.append(text[pos:start])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def editor_trimmed(text: str, end: bool = True) -> str:
    """``text`` without the spaces and tabs at its line ends outside string literals, and
    (``end``) without whitespace at its end."""
    joined = _without(text, _line_end_runs(text))
    return joined.rstrip() if end else joined


def _in_text(runs: list[tuple[int, int]], at: int) -> int:
    """The offset in the text of offset ``at`` of its trimmed form (``runs`` removed): before
    a run removed right there, so spaces after the frame's last character go to the body."""
    removed = 0
    for start, end in runs:
        if start - removed >= at:
            break
        removed += end - start
    return at + removed


def body_bounds(text: str, prefix: str, suffix: str) -> tuple[int, int] | None:
    """Where the body of ``text`` is (start and end offsets in ``text``) if ``text`` keeps the
    frame ``prefix`` … ``suffix`` (the module's rule); None if it does not."""
    if len(text) >= len(prefix) + len(suffix) and text.startswith(prefix) and text.endswith(suffix):
        return len(prefix), len(text) - len(suffix)
    runs = _line_end_runs(text)
    lean_reads = _without(text, runs).rstrip()
    before, after = _trimmed_frame(prefix, suffix)
    if not (
        len(lean_reads) >= len(before) + len(after)
        and lean_reads.startswith(before)
        and lean_reads.endswith(after)
    ):
        return None
    return _in_text(runs, len(before)), _in_text(runs, len(lean_reads) - len(after))


@functools.lru_cache(maxsize=16)
def _trimmed_frame(prefix: str, suffix: str) -> tuple[str, str]:
    # A task's frame is read again at every keystroke of an editor whose save trimmed it.
    return editor_trimmed(prefix, end=False), editor_trimmed(suffix)
