"""Pure position conversions: LSP (UTF-16) <-> agent (code points), property-tested."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lsp_bridge import LineIndex, LspPos, Pos, apply_edit, minimal_edit
from lsp_bridge.positions import (
    codepoint_to_utf16,
    lsp_position,
    utf16_len,
    utf16_to_codepoint,
)

# Text mixing ASCII, BMP math and non-BMP math letters (𝔽, 𝓗 are 2 UTF-16 units each).
alphabet = st.sampled_from(list("ab :=\n∀→ℕλ𝔽𝓗𝕜\r"))
texts = st.text(alphabet=alphabet, max_size=60)


def test_non_bmp_characters_count_two_utf16_units() -> None:
    line = "𝔽 x := 𝓗"
    assert utf16_len("𝔽") == 2
    assert codepoint_to_utf16(line, 1) == 2  # after 𝔽
    assert utf16_to_codepoint(line, 2) == 1
    index = LineIndex("theorem t : 𝔽 = 𝓗 := by\n  rfl\n")
    # Agent column 17 (1-based code points) is the `𝓗`; in UTF-16 it is character 17.
    assert index.to_lsp(Pos(1, 17)) == LspPos(0, 17)
    assert index.from_lsp(LspPos(0, 17)) == Pos(1, 17)


@given(texts, st.data())
def test_offset_position_round_trip(text: str, data: st.DataObject) -> None:
    index = LineIndex(text)
    offset = data.draw(st.integers(0, len(text)))
    pos = index.pos_of(offset)
    assert index.offset_of(pos) == offset
    lsp = index.lsp_of_offset(offset)
    assert index.offset_of_lsp(lsp) == offset
    assert index.from_lsp(index.to_lsp(pos)) == pos


@given(texts)
def test_every_lsp_character_maps_to_a_code_point_boundary(text: str) -> None:
    index = LineIndex(text)
    for line0 in range(index.line_count):
        line = index.line(line0)
        for unit in range(utf16_len(line) + 2):
            col = utf16_to_codepoint(line, unit)
            assert 0 <= col <= len(line)
            assert codepoint_to_utf16(line, col) <= max(unit, 0) or unit > utf16_len(line)


@given(texts, texts)
def test_minimal_edit_reproduces_the_new_text(old: str, new: str) -> None:
    edit = minimal_edit(old, new)
    assert apply_edit(old, edit) == new
    assert 0 <= edit.start <= edit.end <= len(old)


def test_positions_past_the_end_clamp() -> None:
    index = LineIndex("ab\ncd")
    assert index.to_lsp(Pos(9, 9)) == LspPos(1, 2)
    assert index.offset_of_lsp(LspPos(5, 0)) == 5


@given(texts, st.data())
def test_an_index_sharing_a_prefix_equals_a_fresh_one(base: str, data: st.DataObject) -> None:
    upto = data.draw(st.integers(0, len(base)), label="upto")
    rest = data.draw(texts, label="rest")
    text = base[:upto] + rest
    shared = LineIndex.sharing(LineIndex(base), upto, text)
    fresh = LineIndex(text)
    assert shared.line_count == fresh.line_count
    for offset in range(len(text) + 1):
        assert shared.pos_of(offset) == fresh.pos_of(offset)
        assert shared.lsp_of_offset(offset) == fresh.lsp_of_offset(offset)


@given(texts, st.data())
def test_an_lsp_position_without_an_index_equals_the_index_s(
    text: str, data: st.DataObject
) -> None:
    offset = data.draw(st.integers(-2, len(text) + 2), label="offset")
    assert lsp_position(text, offset) == LineIndex(text).lsp_of_offset(offset)
