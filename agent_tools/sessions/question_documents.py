"""The throwaway documents the question tools put to Lean, and the reading of Lean's answers.

Pure text: nothing here talks to Lean, holds a session or writes the ledger."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import lsprotocol.types as lsp

from lsp_bridge import LeanDiagnostic, LineIndex, LspPos, Severity, utf16_len

from ..tasks import Task, declaration_head
from ..verdict import escape_name
from .prefix import TaskView

CHECK_NAME = "leanrig_check"


@dataclass(frozen=True, slots=True)
class QuestionDoc:
    """A Lean document asking one question."""

    text: str
    at: LspPos  # where the answer is: the ``#check`` keyword, or the name to hover
    first_line: int  # 0-based document lines of the question's own text
    last_line: int


def command_start(task: Task, view: TaskView) -> int:
    """Offset of the target command in the task file (doc comment included, wrappers not)."""
    start = declaration_head(task.text, task.span.decl_start)[0]
    return max(start, view.cut) if view.prefixed else start


def _before_target(task: Task, view: TaskView) -> str:
    """The Lean document up to the target command, ending with a line break."""
    head = view.to_lean(task.text[: command_start(task, view)])
    return head if head.endswith("\n") or not head else head + "\n"


def check_document(task: Task, view: TaskView, term: str) -> QuestionDoc:
    """``#check (term)`` just before the target; ``term`` must be ``brackets_balanced``."""
    head = _before_target(task, view)
    line = head.count("\n")
    text = f"{head}#check (\n{term}\n)\n"
    return QuestionDoc(text, LspPos(line, 0), line + 1, line + 1 + term.count("\n"))


def context_document(task: Task, view: TaskView, term: str) -> QuestionDoc:
    """The target with body ``let leanrig_check := (term)`` + placeholder: hover reads its type."""
    head = view.to_lean(task.text[: task.span.start])
    line = head.count("\n") + 1
    # The placeholder on its own line, else ` := sorryAx …` would continue the term.
    text = f"{head}\n  let {CHECK_NAME} := (\n{term}\n  )\n  {task.body.lstrip()}\n"
    return QuestionDoc(text, LspPos(line, 6), line + 1, line + 1 + term.count("\n"))


def statement_document(task: Task, view: TaskView) -> QuestionDoc:
    """``#check @target`` just after the target theorem: its statement as Lean prints it."""
    head = view.to_lean(task.text[: task.span.end])
    line = head.count("\n") + 1
    text = f"{head}\n#check @{escape_name(task.spec.theorem)}\n"
    return QuestionDoc(text, LspPos(line, 0), line, line)


def declaration_document(task: Task, view: TaskView, name: str) -> QuestionDoc:
    """``#check @name`` (hovered) and ``#print name`` (its kind) just before the target."""
    head = _before_target(task, view)
    line = head.count("\n")
    text = f"{head}#check @{name}\nset_option pp.proofs false in\n#print {name}\n"
    return QuestionDoc(text, LspPos(line, len("#check @")), line, line + 2)


def prefix_document(task: Task, view: TaskView, prefix: str) -> QuestionDoc:
    """``#check prefix`` just before the target, completed at its end."""
    head = _before_target(task, view)
    line = head.count("\n")
    text = f"{head}#check {prefix}\n"
    return QuestionDoc(text, LspPos(line, len("#check ") + utf16_len(prefix)), line, line)


PROFILE_OPTIONS = "set_option trace.profiler true in set_option trace.profiler.threshold 0 in "


def profile_document(task: Task, view: TaskView, text: str) -> tuple[str, int]:
    """``text`` profiled for the target alone (no line moves), and the target's first line."""
    start = command_start(task, view)
    profiled = text[:start] + PROFILE_OPTIONS + text[start:]
    return view.to_lean(task.unwrapped(profiled)), task.text.count("\n", 0, start)


@dataclass(frozen=True, slots=True)
class HoverText:
    signature: str | None  # the first ```lean block
    docstring: str | None
    module: str | None  # `*import M*`


def read_hover(hover: lsp.Hover | None) -> HoverText | None:
    """Read Lean's hover markdown: the ```lean block, the docstring, the module."""
    if hover is None:
        return None
    contents = hover.contents
    value = contents.value if isinstance(contents, lsp.MarkupContent) else str(contents)
    signature = None
    rest = value
    if value.startswith("```lean\n"):
        end = value.find("\n```", 8)
        signature = value[8 : end if end >= 0 else len(value)].strip() or None
        rest = value[end + 4 :] if end >= 0 else ""
    parts = [p.strip() for p in rest.split("***")]
    module = None
    docs = []
    for part in parts:
        m = re.fullmatch(r"\*import (\S+)\*", part)
        if m:
            module = m.group(1)
        elif part:
            docs.append(part)
    return HoverText(signature, "\n\n".join(docs) or None, module)


_UNIVERSES = re.compile(r"^\S*?\.\{([^}]*)\}")


def universe_params(signature: str) -> list[str]:
    """``A.b.{u, v} …`` → ``["u", "v"]``."""
    m = _UNIVERSES.match(signature)
    return [u.strip() for u in m.group(1).split(",") if u.strip()] if m else []


def signature_name(signature: str) -> str:
    """The constant's name at the start of a signature, without universe parameters."""
    head = signature.split(maxsplit=1)[0] if signature.split() else ""
    return head.split(".{", 1)[0]


KINDS = (
    "theorem",
    "def",
    "axiom",
    "inductive",
    "structure",
    "class",
    "constructor",
    "recursor",
    "opaque",
    "instance",
    "abbrev",
    "quot",
)


def printed_kind(printed: str) -> str:
    """The kind ``#print`` names first (after modifiers and attributes)."""
    words: list[str] = re.findall(r"[A-Za-z_]+", printed.split("\n", 1)[0])
    return next((word for word in words if word in KINDS), "declaration")


def messages_on(
    diagnostics: tuple[LeanDiagnostic, ...], first_line: int, last_line: int
) -> list[LeanDiagnostic]:
    return [d for d in diagnostics if first_line <= d.range.start.line <= last_line]


def info_at(diagnostics: tuple[LeanDiagnostic, ...], line: int) -> str | None:
    """The first information message starting on ``line``."""
    for d in diagnostics:
        if d.range.start.line == line and d.severity == Severity.INFORMATION:
            return d.message
    return None


_TRACE_LINE = re.compile(r"^(\s*)\[([^\]]+)\] \[([\d.]+)\] (?:\S+ )?(.*)$")


@dataclass(slots=True)
class TraceNode:
    depth: int
    category: str
    seconds: float
    text: str
    detail: str = ""  # the first line under it: the syntax elaborated, when shown


def trace_nodes(message: str) -> list[TraceNode]:
    """The nodes of one ``trace.profiler`` message (``[cat] [secs] ✅️ text``, 2 spaces a level)."""
    nodes: list[TraceNode] = []
    for raw in message.splitlines():
        m = _TRACE_LINE.match(raw)
        if m:
            nodes.append(
                TraceNode(len(m.group(1)) // 2, m.group(2), float(m.group(3)), m.group(4).strip())
            )
        elif nodes and not nodes[-1].detail and raw.strip():
            nodes[-1].detail = raw.strip()
    return nodes


def body_line_of(text: str, body_start: int, body_end: int, snippet: str) -> int | None:
    """The 1-based line where ``snippet`` occurs once in the body, any whitespace matching."""
    words = snippet.split()
    if not words or len(" ".join(words)) < 2:
        return None
    pattern = r"\s+".join(re.escape(w) for w in words)
    found = list(re.compile(pattern).finditer(text, body_start, body_end))
    if len(found) != 1:
        return None
    return text.count("\n", 0, found[0].start()) + 1


@dataclass(frozen=True, slots=True)
class BodyEdit:
    title: str
    old: str
    new: str
    body: str


def body_edit(
    title: str, edits: list[Any], text: str, index: LineIndex, body_start: int, body_end: int
) -> BodyEdit | None:
    """A code action's edits as one replace_in_proof edit (``old`` unique in the body); None
    if an edit reaches outside the body or edits overlap."""
    spans = []
    for e in edits:
        r = e.get("range") if isinstance(e, dict) else None
        if r is None or not isinstance(e.get("newText"), str):
            return None
        start = index.offset_of_lsp(LspPos.from_json(r["start"]))
        end = index.offset_of_lsp(LspPos.from_json(r["end"]))
        if not body_start <= start <= end <= body_end:
            return None
        spans.append((start, end, e["newText"]))
    if not spans:
        return None
    spans.sort()
    body = text[body_start:body_end]
    pieces, pos = [], body_start
    for start, end, new in spans:
        if start < pos:
            return None
        pieces += [text[pos:start], new]
        pos = end
    new_body = "".join(pieces) + text[pos:body_end]
    lo, hi = spans[0][0] - body_start, spans[-1][1] - body_start
    while not (body[lo:hi] and body.count(body[lo:hi]) == 1) and (lo, hi) != (0, len(body)):
        lo, hi = max(0, lo - 1), min(len(body), hi + 1)
    new = new_body[lo : len(new_body) - (len(body) - hi)]
    return BodyEdit(title, body[lo:hi], new, new_body)
