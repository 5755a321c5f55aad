"""Reading a run's JSON-lines files: what cannot be read is skipped and counted, never fatal."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)
class LinesRead:
    """What reading skipped, and why."""

    skipped_version: int = 0
    skipped_invalid: int = 0
    truncated_tail: bool = False

    def skip_notes(self, kind: str) -> list[str]:
        notes = []
        if self.truncated_tail:
            notes.append(f"the last {kind} line was truncated (run killed mid-write?); skipped")
        if self.skipped_version:
            notes.append(f"{self.skipped_version} {kind} line(s) of another schema were skipped")
        if self.skipped_invalid:
            notes.append(f"{self.skipped_invalid} invalid {kind} line(s) were skipped")
        return notes


def records(data: bytes, schema: int, read: LinesRead) -> Iterator[dict[str, Any]]:
    """The objects on ``data``'s lines whose ``"v"`` is ``schema``; the rest counted in ``read``."""
    lines = data.split(b"\n")
    last = len(lines) - 1
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            if i == last:
                read.truncated_tail = True
            else:
                read.skipped_invalid += 1
            continue
        if not isinstance(record, dict):
            read.skipped_invalid += 1
        elif record.get("v") != schema:
            read.skipped_version += 1
        else:
            yield record
