"""``NotAccepted``: how a stage of the verdict says no, with the reasons the verdict reports.

Control flow inside the verdict only: must not escape ``Verifier.verify``, where a rejection
becomes a ``Verdict`` (never an exception to the caller).
"""

from __future__ import annotations


class NotAccepted(Exception):
    def __init__(self, *reasons: str) -> None:
        self.reasons = reasons
