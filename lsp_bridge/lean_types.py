"""Typed models of Lean's LSP extensions (diagnostics with Lean fields, goals, progress, RPC goals).

Hand-parsed: on every step's hot path, with Lean-only fields lsprotocol's types would drop."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

from .positions import LspPos


class Severity(IntEnum):
    ERROR = 1
    WARNING = 2
    INFORMATION = 3
    HINT = 4


class LeanTag(IntEnum):
    UNSOLVED_GOALS = 1
    GOALS_ACCOMPLISHED = 2


@dataclass(frozen=True, slots=True)
class LspRange:
    start: LspPos
    end: LspPos

    @staticmethod
    def from_json(data: dict[str, Any]) -> LspRange:
        return LspRange(LspPos.from_json(data["start"]), LspPos.from_json(data["end"]))

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start.to_json(), "end": self.end.to_json()}


@dataclass(frozen=True, slots=True)
class LeanDiagnostic:
    range: LspRange
    severity: Severity
    message: str
    full_range: LspRange | None = None
    source: str | None = None
    code: str | int | None = None
    is_silent: bool = False
    lean_tags: tuple[int, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity == Severity.ERROR

    @property
    def is_setup_artefact(self) -> bool:
        """An "internal exception #N" from async elaboration: it says nothing about the proof."""
        return self.is_error and _SETUP_ARTEFACT.fullmatch(self.message.strip()) is not None

    @property
    def is_problem(self) -> bool:
        """An error or a warning: a version with one is not clean."""
        return self.severity == Severity.ERROR or self.severity == Severity.WARNING

    @staticmethod
    def from_json(data: dict[str, Any]) -> LeanDiagnostic:
        full = data.get("fullRange")
        return LeanDiagnostic(
            range=LspRange.from_json(data["range"]),
            severity=Severity(int(data.get("severity") or 1)),
            message=_message_text(data.get("message", "")),
            full_range=LspRange.from_json(full) if full else None,
            source=data.get("source"),
            code=data.get("code"),
            is_silent=bool(data.get("isSilent", False)),
            lean_tags=tuple(int(t) for t in data.get("leanTags") or ()),
        )


_SETUP_ARTEFACT = re.compile(r"internal exception #\d+")

# Said beside a setup artefact that is all Lean reported.
SETUP_ARTEFACT_NOTE = (
    "the proof failed to elaborate and Lean said no more (on the prelude-only bootstrap Lean "
    "this is its 'internal exception #3'; `sorry` is one such proof: it needs Init — write "
    "`sorryAx T Bool.false` for a placeholder)"
)


def without_setup_artefacts(diagnostics: Sequence[LeanDiagnostic]) -> list[LeanDiagnostic]:
    """``diagnostics`` without setup artefacts, unless they are the only errors."""
    if any(d.is_error and not d.is_setup_artefact for d in diagnostics):
        return [d for d in diagnostics if not d.is_setup_artefact]
    return list(diagnostics)


def _message_text(message: Any) -> str:
    # Lean sends plain strings; with widget support it may send TaggedText-like objects.
    if isinstance(message, str):
        return message
    return tagged_text_to_str(message)


@dataclass(frozen=True, slots=True)
class ProcessingRange:
    range: LspRange
    kind: int  # 1 = processing, 2 = fatal error

    @property
    def fatal(self) -> bool:
        return self.kind == 2


@dataclass(frozen=True, slots=True)
class FileProgress:
    uri: str
    version: int | None
    processing: tuple[ProcessingRange, ...]

    @property
    def done(self) -> bool:
        return not self.processing

    @staticmethod
    def from_json(params: dict[str, Any]) -> FileProgress:
        doc = params.get("textDocument", {})
        return FileProgress(
            uri=doc.get("uri", ""),
            version=doc.get("version"),
            processing=tuple(
                ProcessingRange(LspRange.from_json(p["range"]), int(p.get("kind", 1)))
                for p in params.get("processing", ())
            ),
        )


ReportStatus = Literal["done", "superseded", "fatal"]


@dataclass(frozen=True, slots=True)
class DocumentReport:
    """Diagnostics of exactly one fully elaborated version of a document.

    ``status``: ``done``; ``superseded`` (``version`` is the newer one); ``fatal`` (bad header…)."""

    uri: str
    version: int
    requested_version: int
    status: ReportStatus
    diagnostics: tuple[LeanDiagnostic, ...]
    elapsed_ms: float = 0.0

    @property
    def errors(self) -> tuple[LeanDiagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    @property
    def clean(self) -> bool:
        """Finished, without an error or a warning: nothing for goals to explain."""
        return self.status == "done" and not any(d.is_problem for d in self.diagnostics)


GoalStatus = Literal["goals", "complete", "no_goal"]


@dataclass(frozen=True, slots=True)
class PlainGoal:
    """``$/lean/plainGoal``: tactic goals at a position."""

    status: GoalStatus
    goals: tuple[str, ...] = ()
    rendered: str = ""

    @staticmethod
    def from_json(result: Any) -> PlainGoal:
        if result is None:
            return PlainGoal("no_goal")
        goals = tuple(str(g) for g in result.get("goals", ()))
        return PlainGoal("goals" if goals else "complete", goals, str(result.get("rendered", "")))


@dataclass(frozen=True, slots=True)
class PlainTermGoal:
    """``$/lean/plainTermGoal``: the expected type of the term at a position."""

    status: Literal["goal", "no_goal"]
    goal: str = ""
    range: LspRange | None = None

    @staticmethod
    def from_json(result: Any) -> PlainTermGoal:
        if result is None:
            return PlainTermGoal("no_goal")
        return PlainTermGoal(
            "goal", str(result.get("goal", "")), LspRange.from_json(result["range"])
        )


@dataclass(frozen=True, slots=True)
class Hypothesis:
    names: tuple[str, ...]
    type: str
    value: str | None = None


@dataclass(frozen=True, slots=True)
class InteractiveGoal:
    """One goal of ``Lean.Widget.getInteractiveGoals``, flattened from TaggedText."""

    hypotheses: tuple[Hypothesis, ...]
    target: str
    user_name: str | None = None
    goal_prefix: str = "⊢ "

    @staticmethod
    def from_json(data: dict[str, Any]) -> InteractiveGoal:
        return InteractiveGoal(
            hypotheses=tuple(
                Hypothesis(
                    names=tuple(str(n) for n in h.get("names", ())),
                    type=tagged_text_to_str(h.get("type")),
                    value=tagged_text_to_str(h["val"]) if h.get("val") is not None else None,
                )
                for h in data.get("hyps", ())
            ),
            target=tagged_text_to_str(data.get("type")),
            user_name=data.get("userName"),
            goal_prefix=str(data.get("goalPrefix", "⊢ ")),
        )


def tagged_text_to_str(node: Any) -> str:
    """Flatten Lean's ``TaggedText`` (``{text}``, ``{append: [...]}``, ``{tag: [info, sub]}``)."""
    parts: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if item is None:
            continue
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, dict):
            if "text" in item:
                parts.append(str(item["text"]))
            elif "append" in item:
                stack.extend(reversed(item["append"]))
            elif "tag" in item:
                tag = item["tag"]
                stack.append(tag[1] if isinstance(tag, list) and len(tag) > 1 else None)
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return "".join(parts)


def collect_rpc_refs(node: Any, out: list[Any] | None = None) -> list[Any]:
    """Every RPC object reference (``{"p": ...}``) inside a JSON value, to release them."""
    refs = out if out is not None else []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if len(item) == 1 and "p" in item:
                refs.append(item)
            else:
                stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return refs
