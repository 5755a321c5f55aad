"""``NotAccepted``: a verdict stage's rejection, with its reasons.

Must not escape ``Verifier.verify``, which turns it into a ``Verdict``."""

from __future__ import annotations


class NotAccepted(Exception):
    def __init__(self, *reasons: str) -> None:
        self.reasons = reasons
