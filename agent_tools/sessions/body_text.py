"""What the service does to a body's text before Lean sees it: line ends as Lean reads them,
the text prechecks and constructs that act while Lean elaborates (a refusal), a replacement's
occurrences, short quotes for messages. Pure. Must not: call Lean.
"""

from __future__ import annotations

from ..tasks import precheck_body
from ..verdict import effects_when_elaborated


def as_lean_reads(body: str) -> str:
    """``body`` with CRLF line ends as LF: Lean converts them on its side, so a range edit
    computed on CRLF text would split a pair and leave Lean's copy out of step with ours."""
    return body.replace("\r\n", "\n") if "\r" in body else body


def occurrences(text: str, part: str) -> int:
    """How often ``part`` occurs in ``text``, overlapping ones counted (``str.count`` does not:
    "h h" is in "h h h" twice)."""
    count, at = 0, text.find(part)
    while at >= 0:
        count += 1
        at = text.find(part, at + 1)
    return count


def short(value: str, limit: int = 100) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def refusal(body: str) -> str | None:
    """Why a body does not go to Lean: the text prechecks, and constructs that act while Lean
    elaborates (a session's Lean reads more than its agent may: their effects would show it)."""
    return precheck_body(body) or "; ".join(effects_when_elaborated(body)) or None
