"""The frame rule (tasks.body_bounds): the verdict and the editor proxy read a body alike, and an
editor's save trimming or adding whitespace outside the body changes neither. No Lean."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_tools.editor import TaskScope
from agent_tools.tasks import body_bounds, editor_trimmed

from .test_verifier import SAVED_BY_EDITORS, SPACED_TASK, STRING_TASK, SYMM, exploit_suite_with


def vscode_save(text: str) -> str:
    """vscode-lean4's default save: trim line-end whitespace (strings too) and final newlines,
    then insert one."""
    lines = [line.rstrip(" \t") for line in text.split("\n")]
    return "\n".join(lines).rstrip("\n") + "\n"


SAVES: dict[str, Callable[[str], str]] = {**SAVED_BY_EDITORS, "vscode-lean4 save": vscode_save}


@pytest.mark.parametrize("saved", sorted(SAVES))
def test_the_editor_scope_keeps_a_body_across_a_save(tmp_path: Path, saved: str) -> None:
    _, task = exploit_suite_with(tmp_path, "saved", SPACED_TASK)
    scope = TaskScope(task)
    proved = task.with_body("\n  " + SYMM)
    text = SAVES[saved](proved)
    decision = scope.decide(text)
    assert decision.outcome == "ok", decision
    assert scope.final_body(text) == "\n  " + SYMM
    assert scope.submission(text) == proved
    rng = scope.body_range(text)
    assert rng["start"] == scope.body_range(proved)["start"]


def test_a_save_inside_a_string_of_the_frame_is_a_change(tmp_path: Path) -> None:
    """Line-end spaces inside a string literal are its value: a save trimming them is a change."""
    _, task = exploit_suite_with(tmp_path, "string", STRING_TASK)
    scope = TaskScope(task)
    text = vscode_save(task.with_body("\n  " + SYMM))
    assert scope.decide(text).outcome == "outside"


def test_a_real_change_beside_saved_whitespace_is_outside(tmp_path: Path) -> None:
    _, task = exploit_suite_with(tmp_path, "mixed", SPACED_TASK)
    scope = TaskScope(task)
    text = vscode_save(task.with_body("\n  " + SYMM)).replace("namespace", "namespace  X")
    assert scope.decide(text).outcome == "outside"
    joined = vscode_save(task.with_body("\n  " + SYMM)).replace("\nend Exploit", " end Exploit")
    assert scope.decide(joined).outcome == "outside"  # the next command left its line


_WORDS = st.sampled_from(["theorem", "x", ":=", "(h : p)", "--  c", '"s  "', "/- b -/", "«a b»"])
_LINE = st.lists(_WORDS, min_size=1, max_size=4).map(" ".join)
_SPACES = st.sampled_from(["", " ", "  ", "   "])


@st.composite
def framed(draw: st.DrawFn) -> tuple[str, str, str, str]:
    """(prefix, body, suffix, the file saved with other line-end spaces and final breaks)."""
    before = draw(st.lists(_LINE, min_size=1, max_size=5))
    after = draw(st.lists(_LINE, min_size=1, max_size=4))
    body = "\n  " + draw(_LINE)
    prefix = "\n".join(before) + " :="
    suffix = "\n\n" + "\n".join(after) + "\n"

    def respaced(text: str) -> str:
        *lines, last = text.split("\n")
        return "\n".join([*(line.rstrip(" \t") + draw(_SPACES) for line in lines), last])

    saved = (
        respaced(prefix)
        + draw(_SPACES)
        + body
        + respaced(suffix).rstrip("\n")
        + draw(st.sampled_from(["", "\n", "\n\n", " \n"]))
    )
    return prefix, body, suffix, saved


@settings(max_examples=300, deadline=None)
@given(framed())
def test_line_end_spaces_and_final_breaks_keep_the_body(case: tuple[str, str, str, str]) -> None:
    prefix, body, suffix, saved = case
    bounds = body_bounds(saved, prefix, suffix)
    assert bounds is not None
    start, end = bounds
    # The body is where it was; spaces after the `:=` that ends the frame go to the body.
    assert editor_trimmed(saved[start:end]) == body
    assert editor_trimmed(saved[:start], end=False) == editor_trimmed(prefix, end=False)


@settings(max_examples=300, deadline=None)
@given(framed(), st.integers(min_value=0), st.sampled_from(["x", "(", "-", '"', " ", "\n"]))
def test_whatever_the_frame_reads_as_kept_is_the_task_s_up_to_saved_whitespace(
    case: tuple[str, str, str, str], at: int, char: str
) -> None:
    """A text read as keeping the frame has the task's prefix and suffix up to saved whitespace,
    and a visible character typed anywhere lands in the body or breaks the frame."""
    prefix, _, suffix, saved = case
    i = at % (len(saved) + 1)
    changed = saved[:i] + char + saved[i:]
    bounds = body_bounds(changed, prefix, suffix)
    if bounds is None:
        return
    start, end = bounds
    assert editor_trimmed(changed[:start], end=False) == editor_trimmed(prefix, end=False)
    assert editor_trimmed(changed[end:]) == editor_trimmed(suffix)
    if char.strip():
        assert start <= i <= end


def test_only_blanks_lean_does_not_read_are_dropped(tmp_path: Path) -> None:
    """A tab at a line end of code, or a Unicode space or form feed at the end, is a change; a
    tab in a comment is not."""
    _, task = exploit_suite_with(tmp_path, "blanks", SPACED_TASK)
    scope = TaskScope(task)
    proved = task.with_body("\n  " + SYMM)
    for lean_refuses in [
        proved.replace("namespace Exploit.Ünï   \n", "namespace Exploit.Ünï\t\n"),
        proved + "\u00a0",
        proved + "\x0c\n",
        proved + "\u3000",
    ]:
        assert scope.decide(lean_refuses).outcome == "outside", repr(lean_refuses[-30:])
    in_comment = SPACED_TASK.replace("/-- A name", "-- a note\t\n/-- A name")
    _, noted = exploit_suite_with(tmp_path / "noted", "noted", in_comment)
    saved = vscode_save(noted.with_body("\n  " + SYMM))
    assert "\t" not in saved and TaskScope(noted).decide(saved).outcome == "ok"


def test_an_unfinished_string_in_the_body_does_not_change_how_the_rest_reads(
    tmp_path: Path,
) -> None:
    """An unfinished string or comment in the body is held, even with a final line break added."""
    text = SPACED_TASK.replace(
        "\nend Exploit.Ünï\n", "\n-- next:  \ntheorem u : True := True.intro\n\nend Exploit.Ünï"
    )
    _, task = exploit_suite_with(tmp_path, "typing", text)
    scope = TaskScope(task)
    for unfinished in ['\n  trivial "wip', "\n  trivial /- wip"]:
        assert scope.decide(task.with_body(unfinished) + "\n").outcome == "held"
