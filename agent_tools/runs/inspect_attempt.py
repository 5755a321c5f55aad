"""What one attempt left beside its results line, as the Inspect export reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .results import AttemptResult


@dataclass(slots=True)
class AttemptRecord:
    result: AttemptResult
    root: Path | None  # RUN_DIR/attempts/<task>/<k>[-retry]; None when it is gone
    prompt: str = ""
    body: str | None = None  # the final body (the service's submission record)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)  # an agent's own
    exchanges: list[dict[str, Any]] = field(default_factory=list)  # model_io.jsonl lines
    session_log: tuple[str, list[dict[str, Any]]] | None = None  # (harness, its lines)
    notes: list[str] = field(default_factory=list)
