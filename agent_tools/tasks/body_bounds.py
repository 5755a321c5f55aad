"""A task file's frame — its text before and after the proof body — and the one rule by which
an edited file keeps it. Pure.

A file keeps the frame when the text before its body and the text after it are the task's byte
for byte, or are once both sides drop what editors add or trim on save and Lean does not read:
spaces at line ends outside string literals (inside one they are part of a value; a tab, which
Lean refuses in code, only inside a comment), and line breaks, spaces and tabs at the end of
the file (no other Unicode space: Lean refuses those). vscode-lean4 turns on
``files.trimTrailingWhitespace``, ``insertFinalNewline`` and ``trimFinalNewlines`` for Lean
files, so a task file with a space at a line end, or without its final line break, changes
outside its body at every save. The verdict and the editor proxy read a body by this rule
(``body_bounds``), so an editor's save never reads as tampering to one and as a proof to the
other.

The text after the body is lexed on its own, from where the body ends: an unfinished string or
comment in the body (a human mid-typing) must not change how the frame after it reads.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence

from lsp_bridge import COMMENT_KINDS, LeanToken, TokenKind, scan_text

# What may end a file without changing it for Lean (str.rstrip() would take any Unicode space).
END_BLANKS = " \t\r\n"
_LINE_END_BLANKS = re.compile(r"[ \t]+(?=\r?\n)")
_STRING_KINDS = frozenset({TokenKind.STRING, TokenKind.RAW_STRING})


def _line_end_runs(text: str) -> list[tuple[int, int]]:
    """The runs of blanks that end lines of ``text`` and that Lean does not read: spaces outside
    string literals, tabs only inside comments."""
    scanned = scan_text(text)
    in_string = _Within(scanned.of(_STRING_KINDS))
    in_comment = _Within(scanned.of(COMMENT_KINDS))
    return [
        (m.start(), m.end())
        for m in _LINE_END_BLANKS.finditer(text)
        if not in_string(m.start()) and ("\t" not in m.group() or in_comment(m.start()))
    ]


class _Within:
    """Is an offset inside one of ``spans`` (in text order, disjoint)? A bisection: only the
    few line ends with blanks are asked, not every character (``mask`` would build a list the
    length of the file)."""

    def __init__(self, spans: Sequence[LeanToken]) -> None:
        self.spans = spans
        self.starts = [s.start for s in spans]

    def __call__(self, at: int) -> bool:
        k = bisect.bisect_right(self.starts, at) - 1  # the last span starting at or before
        return k >= 0 and at < self.spans[k].end


def _without(text: str, runs: list[tuple[int, int]]) -> str:
    out: list[str] = []
    pos = 0
    for start, end in runs:
        out.append(text[pos:start])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def editor_trimmed(text: str, end: bool = True) -> str:
    """``text`` without the blanks at its line ends that Lean does not read, and (``end``)
    without the blanks at its end."""
    joined = _without(text, _line_end_runs(text))
    return joined.rstrip(END_BLANKS) if end else joined


def _in_text(runs: list[tuple[int, int]], at: int) -> int:
    """The offset in the text of offset ``at`` of its trimmed form (``runs`` removed): before
    a run removed right there, so spaces after the frame's last character go to the body."""
    removed = 0
    for start, end in runs:
        if start - removed >= at:
            break
        removed += end - start
    return at + removed


def _end_candidate(text: str, suffix: str) -> int | None:
    """Where the body of ``text`` ends if ``text`` ends with ``suffix`` up to blanks: as many
    lines from the end as the suffix has, minus the suffix's part of that first line. A
    candidate, read without lexing; ``body_bounds`` confirms it."""
    tail = suffix.rstrip(END_BLANKS)
    stop = len(text.rstrip(END_BLANKS))
    line_end = stop
    for _ in range(tail.count("\n")):
        line_end = text.rfind("\n", 0, line_end)
        if line_end < 0:
            return None
    first = tail.split("\n", 1)[0].rstrip(" \t")
    line_stop = len(text[:line_end].rstrip(" \t\r"))
    if not text.startswith(first, line_stop - len(first)):
        return None
    return line_stop - len(first)


def body_bounds(text: str, prefix: str, suffix: str) -> tuple[int, int] | None:
    """Where the body of ``text`` is (start and end offsets in ``text``) if ``text`` keeps the
    frame ``prefix`` … ``suffix`` (the module's rule); None if it does not."""
    if len(text) >= len(prefix) + len(suffix) and text.startswith(prefix) and text.endswith(suffix):
        return len(prefix), len(text) - len(suffix)
    end = _end_candidate(text, suffix)
    if end is None:
        return None
    before, after = _trimmed_frame(prefix, suffix)
    if editor_trimmed(text[end:]) != after:  # (lexed from the body's end: see the module)
        return None
    head = text[:end]  # lexed from the start, as Lean does: the body cannot change it
    runs = _line_end_runs(head)
    if not _without(head, runs).startswith(before):
        return None
    start = _in_text(runs, len(before))
    return (start, end) if start <= end else None


@functools.lru_cache(maxsize=16)
def _trimmed_frame(prefix: str, suffix: str) -> tuple[str, str]:
    # A task's frame is read again at every keystroke of an editor whose save trimmed it.
    return editor_trimmed(prefix, end=False), editor_trimmed(suffix)
