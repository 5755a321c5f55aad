"""The one rule by which an edited file keeps a task's frame (the text around the body). Pure.

Byte for byte, or equal once both drop what editors trim on save and Lean does not read. The
verdict and the editor proxy share it, so a save never reads as tampering to one only."""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence

from lsp_bridge import COMMENT_KINDS, LeanToken, TokenKind, scan_text

# str.rstrip() would take any Unicode space, which Lean refuses.
END_BLANKS = " \t\r\n"
_LINE_END_BLANKS = re.compile(r"[ \t]+(?=\r?\n)")
_STRING_KINDS = frozenset({TokenKind.STRING, TokenKind.RAW_STRING})


def _line_end_runs(text: str) -> list[tuple[int, int]]:
    """Line-end blanks Lean does not read: spaces outside strings, tabs only inside comments."""
    scanned = scan_text(text)
    in_string = _Within(scanned.of(_STRING_KINDS))
    in_comment = _Within(scanned.of(COMMENT_KINDS))
    return [
        (m.start(), m.end())
        for m in _LINE_END_BLANKS.finditer(text)
        if not in_string(m.start()) and ("\t" not in m.group() or in_comment(m.start()))
    ]


class _Within:
    """Is an offset inside one of ``spans`` (in text order, disjoint)?"""

    def __init__(self, spans: Sequence[LeanToken]) -> None:
        self.spans = spans
        self.starts = [s.start for s in spans]

    def __call__(self, at: int) -> bool:
        k = bisect.bisect_right(self.starts, at) - 1
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
    """``text`` without the line-end blanks Lean does not read and (``end``) final blanks."""
    joined = _without(text, _line_end_runs(text))
    return joined.rstrip(END_BLANKS) if end else joined


def _in_text(runs: list[tuple[int, int]], at: int) -> int:
    """Offset in the text of trimmed offset ``at``; a run removed right there goes to the body."""
    removed = 0
    for start, end in runs:
        if start - removed >= at:
            break
        removed += end - start
    return at + removed


def _end_candidate(text: str, suffix: str) -> int | None:
    """Where the body ends if ``text`` ends with ``suffix`` up to blanks; unlexed, a candidate."""
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
    """The body's (start, end) if ``text`` keeps the frame ``prefix`` … ``suffix``, else None."""
    if len(text) >= len(prefix) + len(suffix) and text.startswith(prefix) and text.endswith(suffix):
        return len(prefix), len(text) - len(suffix)
    end = _end_candidate(text, suffix)
    if end is None:
        return None
    before, after = _trimmed_frame(prefix, suffix)
    # Lexed from the body's end: an unfinished string in the body must not change the frame.
    if editor_trimmed(text[end:]) != after:
        return None
    head = text[:end]
    runs = _line_end_runs(head)
    if not _without(head, runs).startswith(before):
        return None
    start = _in_text(runs, len(before))
    return (start, end) if start <= end else None


@functools.lru_cache(maxsize=16)
def _trimmed_frame(prefix: str, suffix: str) -> tuple[str, str]:
    return editor_trimmed(prefix, end=False), editor_trimmed(suffix)
