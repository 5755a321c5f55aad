"""lsp_bridge.minimal_edit, the one minimal-edit computation every edit path uses."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_tools.editor.text_scope import changed_span
from lsp_bridge import apply_edit, minimal_edit

texts = st.text(alphabet=st.sampled_from("ab\n →𝔸"), max_size=40)


def naive(old: str, new: str) -> tuple[int, int, int]:
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return start, end_old, end_new


@given(texts, texts)
def test_the_edit_turns_old_into_new_and_is_the_smallest(old: str, new: str) -> None:
    edit = minimal_edit(old, new)
    assert apply_edit(old, edit) == new
    assert (edit.start, edit.end, edit.start + len(edit.text)) == naive(old, new)
    assert changed_span(old, new) == naive(old, new)


@given(texts, st.integers(0, 40), texts)
def test_an_insertion_is_found_where_it_was_made(base: str, at: int, inserted: str) -> None:
    at = min(at, len(base))
    edit = minimal_edit(base, base[:at] + inserted + base[at:])
    assert edit.end - edit.start == 0 and len(edit.text) == len(inserted)


@given(st.text(alphabet="abλ𝔸\n", max_size=30), st.text(alphabet="abλ𝔸\n", max_size=30))
def test_the_edit_is_right_for_astral_characters(old: str, new: str) -> None:
    assert apply_edit(old, minimal_edit(old, new)) == new
    assert changed_span(old, new) == naive(old, new)
