"""What the service does to a body's text before Lean sees it. Pure: must not call Lean."""

from __future__ import annotations

from ..tasks import precheck_body
from ..verdict import effects_when_elaborated


def as_lean_reads(body: str) -> str:
    """``body`` with CRLF as LF, as Lean reads it (else range edits drift from Lean's copy)."""
    return body.replace("\r\n", "\n") if "\r" in body else body


def occurrences(text: str, part: str) -> int:
    """How often ``part`` occurs in ``text``, overlaps counted (unlike ``str.count``)."""
    count, at = 0, text.find(part)
    while at >= 0:
        count += 1
        at = text.find(part, at + 1)
    return count


def short(value: str, limit: int = 100) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def refusal(body: str) -> str | None:
    """Why a body must not reach Lean (None: it may): prechecks, and elaboration-time effects."""
    return precheck_body(body) or "; ".join(effects_when_elaborated(body)) or None
