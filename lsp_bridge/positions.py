"""Positions between LSP (0-based line, UTF-16 units) and agents (1-based line and code point).

Lines split on ``\\n`` only, as Lean's ``FileMap``. Past a line's end clamps to its end; inside
a surrogate pair rounds down to the character's start."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True, slots=True, order=True)
class Pos:
    """An agent-facing position: 1-based line, 1-based code point column."""

    line: int
    column: int


@dataclass(frozen=True, slots=True, order=True)
class LspPos:
    """An LSP position: 0-based line, 0-based UTF-16 code unit offset."""

    line: int
    character: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "character": self.character}

    @staticmethod
    def from_json(data: dict[str, int]) -> LspPos:
        return LspPos(int(data["line"]), int(data["character"]))


def _bmp_only(text: str) -> bool:
    """No character outside the BMP, so code points = UTF-16 units (decided at C speed)."""
    return text.isascii() or max(text) <= "\uffff"


def utf16_len(text: str) -> int:
    if _bmp_only(text):
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def codepoint_to_utf16(line: str, column: int) -> int:
    """UTF-16 offset of code point offset ``column`` (0-based) in ``line``; clamps to the end."""
    column = max(0, min(column, len(line)))
    return utf16_len(line[:column])


def utf16_to_codepoint(line: str, character: int) -> int:
    """Code point offset (0-based) of UTF-16 offset ``character`` in ``line``; clamps to the end."""
    if character <= 0:
        return 0
    if _bmp_only(line):
        return min(character, len(line))
    units = 0
    for index, ch in enumerate(line):
        width = 2 if ord(ch) > 0xFFFF else 1
        if units + width > character:
            return index
        units += width
    return len(line)


def lsp_position(text: str, offset: int) -> LspPos:
    """``LineIndex(text).lsp_of_offset(offset)`` without indexing every line."""
    offset = max(0, min(offset, len(text)))
    start = text.rfind("\n", 0, offset) + 1
    return LspPos(text.count("\n", 0, offset), utf16_len(text[start:offset]))


class LineIndex:
    """Line starts of one text, for conversions between offsets and both kinds of position."""

    def __init__(self, text: str) -> None:
        self.text = text

    @classmethod
    def sharing(cls, base: LineIndex, upto: int, text: str) -> LineIndex:
        """The index of ``text``, equal to ``base.text`` up to ``upto``, reusing its line starts."""
        starts = base._starts
        kept = starts[: bisect.bisect_right(starts, upto)]
        # Every line break before ``upto`` is in ``kept``: the next is after its last start.
        find = text.find
        index = find("\n", kept[-1])
        while index != -1:
            kept.append(index + 1)
            index = find("\n", index + 1)
        shared = cls(text)
        shared.__dict__["_starts"] = kept
        return shared

    @cached_property
    def _starts(self) -> list[int]:
        starts = [0]
        find = self.text.find
        index = find("\n")
        while index != -1:
            starts.append(index + 1)
            index = find("\n", index + 1)
        return starts

    @property
    def line_count(self) -> int:
        return len(self._starts)

    def line(self, line0: int) -> str:
        starts = self._starts
        start = starts[line0]
        end = starts[line0 + 1] - 1 if line0 + 1 < len(starts) else len(self.text)
        return self.text[start:end]

    def _clamp_line(self, line0: int) -> int:
        return max(0, min(line0, len(self._starts) - 1))

    def offset_of(self, pos: Pos) -> int:
        line0 = self._clamp_line(pos.line - 1)
        return self._starts[line0] + max(0, min(pos.column - 1, len(self.line(line0))))

    def pos_of(self, offset: int) -> Pos:
        offset = max(0, min(offset, len(self.text)))
        line0 = bisect.bisect_right(self._starts, offset) - 1
        return Pos(line0 + 1, offset - self._starts[line0] + 1)

    def lsp_of_offset(self, offset: int) -> LspPos:
        pos = self.pos_of(offset)
        return LspPos(pos.line - 1, codepoint_to_utf16(self.line(pos.line - 1), pos.column - 1))

    def offset_of_lsp(self, lsp: LspPos) -> int:
        line0 = self._clamp_line(lsp.line)
        if lsp.line >= len(self._starts):
            return len(self.text)
        return self._starts[line0] + utf16_to_codepoint(self.line(line0), lsp.character)

    def to_lsp(self, pos: Pos) -> LspPos:
        line0 = self._clamp_line(pos.line - 1)
        return LspPos(line0, codepoint_to_utf16(self.line(line0), pos.column - 1))

    def from_lsp(self, lsp: LspPos) -> Pos:
        return self.pos_of(self.offset_of_lsp(lsp))
