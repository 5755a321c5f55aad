"""Edit scoping of the task file in an editor: which editor texts may reach Lean. Pure.

``ok``: forward; ``outside`` (text outside the body changed): revert the editor; ``held`` (the
body fails the prechecks): keep Lean on the last valid text. Must not do I/O or LSP framing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lsp_bridge import LineIndex, LspPos, minimal_edit

from ..tasks import END_BLANKS, Task, body_bounds, precheck_body

SOURCE = "leanrig"
OUTSIDE_MESSAGE = (
    "leanrig: only the proof body may change; this edit changed text outside it and was "
    "undone (Lean keeps the last valid text)"
)

Outcome = Literal["ok", "outside", "held"]


@dataclass(frozen=True, slots=True)
class Decision:
    outcome: Outcome
    reason: str | None = None
    body: str | None = None  # the body, when the text keeps prefix and suffix


class TaskScope:
    """The task file's fixed parts, and the decision for any editor text."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.prefix = task.text[: task.span.start]
        # The suffix starts at the next command, its indentation kept; the blank lines before
        # it are the body's, so retyping the proof's last line is no edit outside the body.
        rest = task.text[task.span.end :]
        first = len(rest) - len(rest.lstrip())
        if not rest.strip():
            self.suffix = ""
        elif "\n" in rest[:first]:
            self.suffix = rest[rest.rfind("\n", 0, first) + 1 :]
        else:
            self.suffix = rest

    def _bounds(self, text: str) -> tuple[int, int] | None:
        """The body's offsets in ``text`` (LF line ends), if it keeps the task's frame."""
        bounds = body_bounds(text, self.prefix, self.suffix)
        if bounds is None:
            return None
        if self.suffix and bounds[1] > 0 and text[bounds[1] - 1] != "\n":
            return None  # the next command no longer starts its line
        return bounds

    def body_of(self, text: str) -> str | None:
        """The body of ``text`` with its trailing blank lines; None if text outside it differs."""
        text = as_read(text)
        bounds = self._bounds(text)
        return None if bounds is None else text[bounds[0] : bounds[1]]

    def final_body(self, text: str) -> str:
        """The body of ``text`` as a submission has it: without trailing blank lines."""
        body = self.body_of(text)
        assert body is not None, "the text is outside the task's scope"
        return body.rstrip(END_BLANKS)

    def submission(self, text: str) -> str:
        """The task file the verdict checks for ``text`` (which must keep prefix and suffix)."""
        return self.task.with_body(self.final_body(text))

    def decide(self, text: str) -> Decision:
        body = self.body_of(text)
        if body is None:
            return Decision("outside", OUTSIDE_MESSAGE)
        reason = precheck_body(body)
        if reason is not None:
            return Decision("held", f"leanrig: not sent to Lean: {reason}", body)
        return Decision("ok", None, body)

    def body_range(self, text: str) -> dict[str, Any]:
        """The LSP range of the body in ``text`` (which must keep prefix and suffix)."""
        text = as_read(text)
        bounds = self._bounds(text)
        assert bounds is not None, "the text is outside the task's scope"
        return lsp_range(LineIndex(text), *bounds)


def as_read(text: str) -> str:
    """``text`` with CRLF line ends as LF, as the verdict reads a submission; a lone CR stays."""
    return text.replace("\r\n", "\n") if "\r" in text else text


def lsp_range(index: LineIndex, start: int, end: int) -> dict[str, Any]:
    return {
        "start": index.lsp_of_offset(start).to_json(),
        "end": index.lsp_of_offset(end).to_json(),
    }


def apply_changes(text: str, changes: Sequence[dict[str, Any]]) -> str:
    """Apply ``textDocument/didChange`` content changes (UTF-16 ranges or full text) in order."""
    for change in changes:
        rng = change.get("range")
        new = str(change.get("text", ""))
        if rng is None:
            text = new
            continue
        index = LineIndex(text)
        start = index.offset_of_lsp(LspPos.from_json(rng["start"]))
        end = index.offset_of_lsp(LspPos.from_json(rng["end"]))
        if end < start:
            start, end = end, start
        text = text[:start] + new + text[end:]
    return text


def changed_span(old: str, new: str) -> tuple[int, int, int]:
    """(start, end in ``old``, end in ``new``) of the smallest region where the texts differ."""
    edit = minimal_edit(old, new)
    return edit.start, edit.end, edit.start + len(edit.text)


def replace_edit(current: str, target: str) -> dict[str, Any]:
    """One LSP ``TextEdit`` (in ``current``'s coordinates) turning ``current`` into ``target``."""
    start, end_cur, end_tgt = changed_span(current, target)
    rng = lsp_range(LineIndex(current), start, end_cur)
    return {"range": rng, "newText": target[start:end_tgt]}


def diagnostic(
    message: str, rng: dict[str, Any], *, severity: int = 1, code: str = "scope"
) -> dict[str, Any]:
    return {
        "range": rng,
        "fullRange": rng,
        "severity": severity,
        "source": SOURCE,
        "code": f"leanrig.{code}",
        "message": message,
    }
