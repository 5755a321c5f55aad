"""The question tools: hover, check_term, declarations, outline, completions, code actions, profile.

None edits the session; a question's text gets a proof body's refusals and must stay one term."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from lsp_bridge import (
    LeanDiagnostic,
    LeanrigError,
    LineIndex,
    LspPos,
    Pos,
    brackets_balanced,
    is_identifier,
)

from .body_text import as_lean_reads, refusal, short
from .errors import ToolError, agent_error
from .question_documents import (
    CHECK_NAME,
    body_line_of,
    check_document,
    context_document,
    declaration_document,
    info_at,
    messages_on,
    prefix_document,
    profile_document,
    trace_nodes,
)
from .question_lean import LeanQuestions, UnknownDeclaration
from .session import ProofSession
from .tool_calls import Call
from .tool_inputs import MAX_NAME_CHARS, MAX_TERM_CHARS
from .tool_outputs import (
    CheckTermResult,
    CodeActionsResult,
    CompletionsResult,
    DeclarationResult,
    Diagnostic,
    HoverResult,
    OutlineResult,
    ProfileEntry,
    ProfileResult,
    ToolOutput,
)

if TYPE_CHECKING:
    from ..library import LibraryIndex

MAX_PROFILE_ENTRIES = 20
PROFILE_DEPTH = 4  # trace levels listed (deeper ones are inside these)


def position_in(text: str, line: int, column: int) -> Pos:
    """``line``/``column`` (1-based, code points) checked against ``text``."""
    index = LineIndex(text)
    if not 1 <= line <= index.line_count:
        raise ToolError(
            f"line {line} is outside the file",
            code="invalid_argument",
            hint=f"lines are 1..{index.line_count}; columns are 1-based code points",
        )
    width = len(index.line(line - 1))
    if not 1 <= column <= width + 1:
        raise ToolError(
            f"column {column} is outside line {line}, which has {width} characters",
            code="invalid_argument",
            hint=f"columns of line {line} are 1..{width + 1}: 1-based code points, "
            f"{width + 1} is the line's end",
        )
    return Pos(line, column)


@contextmanager
def answering(what: str) -> Iterator[None]:
    """Lower-level failures as agent errors, with a timeout hint fit for a question."""
    try:
        yield
    except ToolError:
        raise
    except LeanrigError as exc:
        error = agent_error(exc)
        if error.code == "timeout":
            error = ToolError(
                f"{error.message}: no answer to {what}",
                code="timeout",
                hint="ask something smaller (a shorter term, a nearer position); the session "
                "is unchanged",
            )
        raise error from exc


def split_shown(shown: str) -> str | None:
    """The type in Lean's ``e : T`` line: after the first ``:`` outside brackets."""
    depth = 0
    for i, ch in enumerate(shown):
        if ch in "([{⟨⦃":
            depth += 1
        elif ch in ")]}⟩⦄":
            depth -= 1
        elif depth == 0 and shown.startswith(" : ", i):
            return shown[i + 3 :].strip()
    return None


class QuestionTools:
    """The question tools of `ProofService` (which provides the attributes below)."""

    questions: LeanQuestions
    library: LibraryIndex | None

    def _on_session(
        self,
        tool: str,
        session_id: str,
        client: str,
        *,
        lock: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[Call]:
        raise NotImplementedError  # ProofService's

    def _known(self, call: Call, key: tuple[str, ...]) -> ToolOutput | None:
        """The answer already given to this question about this task, or None."""
        known = self.questions.answers.get(key)
        if known is not None:
            call.extra["cached"] = True
        return known

    async def get_hover(
        self, session_id: str, line: int, column: int, client: str = "local"
    ) -> HoverResult:
        async with self._on_session("get_hover", session_id, client) as call:
            session = call.open_session
            at = position_in(session.text, line, column)
            with answering("the hover"):
                return await self.questions.hover(
                    session.task, session.text, at, call.timer, session.id
                )

    async def check_term(
        self, session_id: str, term: str, in_context: bool, client: str = "local"
    ) -> CheckTermResult:
        async with self._on_session("check_term", session_id, client, lock=False) as call:
            session = call.open_session
            term = as_lean_reads(term)
            call.extra["in_context"] = in_context
            _one_term(term)
            key = (session.task.key, "check_term", term, str(in_context))
            if (known := self._known(call, key)) is not None:
                return CheckTermResult.model_validate(known)
            memo = await self.questions.elaborator.memo(session.task)
            view = memo.view
            # A lone name as `@name`, as `#check name` shows a constant (not `?m.1 → …`).
            lean_term = f"@{term.strip()}" if is_identifier(term.strip()) else term
            make = context_document if in_context else check_document
            doc = make(session.task, view, lean_term)
            with answering("the term"):
                report, hover = await self.questions.check(
                    session.task, doc, in_context, call.timer
                )
            term_index = LineIndex(lean_term)
            errors = [
                _in_term(d, term_index, doc.first_line, len(lean_term) - len(term))
                for d in messages_on(report.diagnostics, doc.first_line, doc.last_line)
                if d.is_error
            ]
            if in_context:
                signature = hover.signature if hover is not None else None
                prefix = f"{CHECK_NAME} : "
                type_ = (
                    signature[len(prefix) :] if signature and signature.startswith(prefix) else None
                )
                shown = f"{term.strip()} : {type_}" if type_ is not None else None
            else:
                shown = info_at(report.diagnostics, doc.at.line)
                type_ = split_shown(shown) if shown is not None else None
            if errors:
                type_ = shown = None
            elif type_ is None:
                raise ToolError(
                    "Lean reported neither a type nor an error for the term",
                    code="lean_error",
                    hint="try `in_context: false`, or state the term's expected type with "
                    "`(term : T)`; the session is unchanged",
                )
            result = CheckTermResult(
                term=term, type=type_, shown=shown, in_context=in_context, errors=errors
            )
            self.questions.answers.put(key, result)
            return result

    async def get_declaration(
        self, session_id: str, name: str, client: str = "local"
    ) -> DeclarationResult:
        async with self._on_session("get_declaration", session_id, client, lock=False) as call:
            session = call.open_session
            _bounded("name", name, MAX_NAME_CHARS)
            name = name.strip()
            if not is_identifier(name):
                raise ToolError(
                    f"{short(name)!r} is not a Lean name",
                    code="invalid_argument",
                    hint="give one name, such as `And.intro` (no spaces, terms or commands)",
                )
            key = (session.task.key, "get_declaration", name)
            if (known := self._known(call, key)) is not None:
                return DeclarationResult.model_validate(known)
            memo = await self.questions.elaborator.memo(session.task)
            doc = declaration_document(session.task, memo.view, name)
            with answering("the declaration"):
                try:
                    result = await self.questions.declaration(
                        session.task, name, doc, call.timer, lad=self.library is not None
                    )
                except UnknownDeclaration as exc:
                    raise ToolError(exc.message, code="not_found", hint=exc.hint) from exc
            self.questions.answers.put(key, result)
            return result

    async def get_outline(self, session_id: str, client: str = "local") -> OutlineResult:
        async with self._on_session("get_outline", session_id, client, lock=False) as call:
            with answering("the outline"):
                return await self.questions.outline(call.open_session.task, call.timer)

    async def get_completions(
        self,
        session_id: str,
        line: int | None,
        column: int | None,
        prefix: str | None,
        client: str = "local",
    ) -> CompletionsResult:
        by_position = line is not None or column is not None
        if by_position == (prefix is not None) or (by_position and None in (line, column)):
            raise ToolError(
                "give either `line` and `column`, or `prefix` (the others null)",
                code="invalid_argument",
                hint='e.g. {"line": 7, "column": 12, "prefix": null} or '
                '{"line": null, "column": null, "prefix": "And.i"}',
            )
        async with self._on_session(
            "get_completions", session_id, client, lock=by_position
        ) as call:
            session = call.open_session
            task = session.task
            if prefix is not None:
                _bounded("prefix", prefix, MAX_NAME_CHARS)
                if not is_identifier(prefix.rstrip(".")):
                    raise ToolError(
                        f"{short(prefix)!r} is not the start of a name",
                        code="invalid_argument",
                        hint="give the first characters of a name, such as `And.i`",
                    )
                key = (task.key, "get_completions", prefix)
                if (known := self._known(call, key)) is not None:
                    return CompletionsResult.model_validate(known)
                memo = await self.questions.elaborator.memo(task)
                doc = prefix_document(task, memo.view, prefix)
                with answering("the completions"):
                    result = await self.questions.completions(
                        task, doc.text, doc.at, _qualifier(prefix), call.timer, None
                    )
                self.questions.answers.put(key, result)
                return result
            assert line is not None
            assert column is not None
            at = position_in(session.text, line, column)
            before = LineIndex(session.text).line(line - 1)[: column - 1]
            typed = re.search(r"[^\s()\[\]{}⟨⟩,@]*$", before)
            with answering("the completions"):
                text_doc, pos, owner, _ = await self.questions.document_at(
                    task, session.text, at, session.id
                )
                return await self.questions.completions(
                    task,
                    text_doc,
                    pos,
                    _qualifier(typed.group(0) if typed else ""),
                    call.timer,
                    owner,
                )

    async def get_code_actions(
        self, session_id: str, line: int, column: int, client: str = "local"
    ) -> CodeActionsResult:
        async with self._on_session("get_code_actions", session_id, client) as call:
            session = call.open_session
            at = position_in(session.text, line, column)
            with answering("the code actions"):
                return await self.questions.code_actions(
                    session.task,
                    session.text,
                    at,
                    (session.body_start, session.body_end),
                    call.timer,
                    session.id,
                )

    async def profile_proof(self, session_id: str, client: str = "local") -> ProfileResult:
        async with self._on_session("profile_proof", session_id, client, lock=False) as call:
            session = call.open_session
            return await self._profile(session, call)

    async def _profile(self, session: ProofSession, call: Call) -> ProfileResult:
        task = session.task
        memo = await self.questions.elaborator.memo(task)
        doc, first = profile_document(task, memo.view, session.text)
        with answering("the profile"):
            report = await self.questions.profiled(task, doc, call.timer)
        last = session.text.count("\n", 0, session.body_end)
        nodes = [
            node
            for d in report.diagnostics
            if first <= d.range.start.line <= last and not d.is_error
            for node in trace_nodes(d.message)
        ]
        total = sum(n.seconds for n in nodes if n.depth == 0) * 1000
        listed = sorted(
            (n for n in nodes if 0 < n.depth < PROFILE_DEPTH), key=lambda n: -n.seconds
        )[:MAX_PROFILE_ENTRIES]
        entries = [
            ProfileEntry(
                category=n.category,
                ms=round(n.seconds * 1000, 3),
                line=body_line_of(
                    session.text, session.body_start, session.body_end, n.detail or n.text
                ),
                text=short(f"{n.text}: {n.detail}" if n.detail else n.text, 200),
            )
            for n in listed
        ]
        errors = any(d.is_error and first <= d.range.start.line <= last for d in report.diagnostics)
        assert session.last is not None
        status = "error" if errors else session.last.status
        return ProfileResult(total_ms=round(total, 3), entries=entries, status=status)


def _qualifier(partial: str) -> str:
    """What Lean's completion labels follow: the typed name up to its last dot."""
    return partial[: partial.rfind(".") + 1]


def _bounded(what: str, value: str, limit: int) -> None:
    if not value.strip() or len(value) > limit:
        raise ToolError(
            f"`{what}` must have 1 to {limit} characters ({len(value)} given)",
            code="invalid_argument",
            hint=f"give a shorter {what}",
        )


def _one_term(term: str) -> None:
    """Refuse what set_proof refuses, and text that would not stay one term in parentheses."""
    _bounded("term", term, MAX_TERM_CHARS)
    reason = refusal(term)
    if reason is not None:
        raise ToolError(
            f"term refused: {reason}",
            code="rejected",
            hint="check_term takes what a proof body may contain",
        )
    if not term.strip() or not brackets_balanced(term):
        raise ToolError(
            "the term is not one term: its brackets do not balance, or a comment, string or "
            "«name» is not closed",
            code="rejected",
            hint="give one complete term, such as `@And.intro` or `fun (p : Prop) (h : p) => h`",
        )


def _in_term(d: LeanDiagnostic, index: LineIndex, first_line: int, added: int) -> Diagnostic:
    """An error positioned in the term as asked (``added``: characters put before it)."""

    def at(pos: LspPos) -> Pos:
        line = min(max(pos.line - first_line, 0), index.line_count - 1)
        found = index.from_lsp(LspPos(line, pos.character))
        return Pos(found.line, max(1, found.column - added)) if found.line == 1 else found

    start, end = at(d.range.start), at(d.range.end)
    return Diagnostic(
        severity="error",
        line=start.line,
        column=start.column,
        end_line=end.line,
        end_column=end.column,
        message=d.message,
    )
