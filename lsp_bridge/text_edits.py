"""Text edits of a document, in code points: the minimal single replacement, and applying one.

Pure, no LSP. Must not scan characters one by one: every step diffs the whole document."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TextEdit:
    """Replace the code point range ``[start, end)`` of the current text with ``text``."""

    start: int
    end: int
    text: str


def apply_edit(text: str, edit: TextEdit) -> str:
    return text[: edit.start] + edit.text + text[edit.end :]


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (binary search over slices)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:  # a[:lo] == b[:lo], a[:hi] != b[:hi]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    lo, hi = 0, max(0, min(len(a), len(b), limit))
    if a[len(a) - hi :] == b[len(b) - hi :]:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def minimal_edit(old: str, new: str) -> TextEdit:
    """The smallest single replacement turning ``old`` into ``new`` (prefix, then suffix)."""
    start = common_prefix(old, new)
    tail = common_suffix(old, new, min(len(old), len(new)) - start)
    return TextEdit(start, len(old) - tail, new[start : len(new) - tail])
