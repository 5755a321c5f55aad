"""The question tools' Lean side: questions on warm slots, answered in task-file terms.

Questions "at the target theorem" use throwaway documents, never the session's own."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import lsprotocol.types as lsp

from lsp_bridge import DocQuery, DocumentReport, LeanrigError, LineIndex, LspPos, LspRange, Pos
from repl_pool import PoolKey, Slot, ask_in

from ..library import LibraryError, LibraryIndex, declaration_kind, declarations_in, docstring
from ..tasks import DeclarationIndex, Suite, Task, declaration_index, declaration_source
from .elaborate import Elaborator, TaskMemo
from .ledger import StepTimer
from .question_documents import (
    HoverText,
    QuestionDoc,
    body_edit,
    command_start,
    info_at,
    printed_kind,
    read_hover,
    signature_name,
    universe_params,
)
from .tool_outputs import (
    CodeAction,
    CodeActionsResult,
    Completion,
    CompletionsResult,
    DeclarationResult,
    HoverResult,
    OutlineEntry,
    OutlineResult,
    ToolOutput,
)

T = TypeVar("T")

MAX_OUTLINE = 200  # declarations listed, the last ones before the target
MAX_COMPLETIONS = 50  # names listed (each resolved for its type)
COMPLETION_KINDS = {k.value: k.name.lower() for k in lsp.CompletionItemKind}


def question_holder(task: Task) -> str:
    """Who holds a task's throwaway question documents in the pool (one holder per task)."""
    return f"questions:{task.id}"


class AnswerCache:
    """LRU cache of answers asked "at the target theorem" (what precedes it never changes)."""

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._answers: OrderedDict[tuple[str, ...], ToolOutput] = OrderedDict()

    def get(self, key: tuple[str, ...]) -> ToolOutput | None:
        answer = self._answers.get(key)
        if answer is not None:
            self._answers.move_to_end(key)
        return answer

    def put(self, key: tuple[str, ...], answer: ToolOutput) -> None:
        self._answers[key] = answer
        self._answers.move_to_end(key)
        while len(self._answers) > self.size:
            self._answers.popitem(last=False)


class UnknownDeclaration(LeanrigError):
    hint = "check the name's spelling, or find it with get_completions"


class LeanQuestions:
    def __init__(self, elaborator: Elaborator, suite: Suite, library: LibraryIndex | None) -> None:
        """``library``: the LAD index, read by get_declaration (its names are not in Lean's)."""
        self.elaborator = elaborator
        self.pool = elaborator.pool
        self.timeout = elaborator.step_timeout
        self.suite = suite
        self.library = library
        self._outlines: dict[str, OutlineResult] = {}
        self.answers = AnswerCache()
        # (task id or module, name, lad) -> where it is declared; suite files do not change
        self._sources: dict[tuple[str, str, bool], tuple[str | None, int | None, str | None]] = {}
        self._indexes: dict[str, tuple[str, DeclarationIndex]] = {}

    async def _run(
        self,
        key: PoolKey,
        holder: str | None,
        timer: StepTimer,
        work: Callable[[Slot], Awaitable[T]],
    ) -> T:
        entered = time.perf_counter()

        async def operation(slot: Slot) -> T:
            timer.queued(entered)
            with timer.lean():
                return await work(slot)

        return await self.pool.execute(key, operation, holder=holder)

    async def ask_about(
        self,
        task: Task,
        doc: str,
        queries: list[DocQuery],
        timer: StepTimer,
        holder: str | None = None,
        then: Callable[[Slot, list[Any]], Awaitable[Any]] | None = None,
        report: bool = False,
    ) -> tuple[DocumentReport | None, list[Any]]:
        """Ask ``queries`` about ``doc``, then ``then`` on the same slot and version; ``holder``
        None means the task's question holder; ``report`` also returns the version's report."""
        holder = holder or question_holder(task)
        memo = await self.elaborator.memo(task)
        key = self.pool.key_for(doc, memo.view.environment)
        wanted = report

        async def work(slot: Slot) -> tuple[DocumentReport | None, list[Any]]:
            report, answers = await ask_in(slot, doc, queries, timeout=self.timeout, report=wanted)
            if then is not None:
                answers = [*answers, await then(slot, answers)]
            return report, answers

        return await self._run(key, holder, timer, work)

    async def reported(
        self, task: Task, doc: str, queries: list[DocQuery], timer: StepTimer
    ) -> tuple[DocumentReport, list[Any]]:
        """``ask_about`` with the version's report (its diagnostics are the answer)."""
        report, answers = await self.ask_about(task, doc, queries, timer, report=True)
        assert report is not None
        return report, answers

    async def document_at(
        self, task: Task, text: str, at: Pos, holder: str
    ) -> tuple[str, LspPos, str | None, TaskMemo]:
        """The document for a position in ``text``: the session's, or in a prefix the whole file."""
        memo = await self.elaborator.memo(task)
        pos = LineIndex(text).to_lsp(at)
        in_lean = memo.view.lsp_to_lean(pos)
        if in_lean is None:
            return task.unwrapped(text), pos, None, memo
        return self.elaborator.lean_document(task, memo, text)[0], in_lean, holder, memo

    async def hover(
        self, task: Task, text: str, at: Pos, timer: StepTimer, holder: str
    ) -> HoverResult:
        doc, pos, owner, _ = await self.document_at(task, text, at, holder)
        _, (hover,) = await self.ask_about(task, doc, [DocQuery.hover(pos)], timer, owner)
        read = read_hover(hover)
        signature = read.signature if read else None
        name = None
        if signature is not None and read is not None and (read.docstring or read.module):
            name = signature_name(signature)  # a constant's signature, not `term : type`
        return HoverResult(
            line=at.line,
            column=at.column,
            name=name,
            signature=signature,
            docstring=read.docstring if read else None,
            module=read.module if read else None,
            found=read is not None and (signature is not None or read.docstring is not None),
        )

    async def check(
        self, task: Task, doc: QuestionDoc, in_context: bool, timer: StepTimer
    ) -> tuple[DocumentReport, HoverText | None]:
        """Lean's report for a check_term document, and in context the hover on its name."""
        queries = [DocQuery.hover(doc.at)] if in_context else []
        report, answers = await self.reported(task, doc.text, queries, timer)
        hover = read_hover(answers[0]) if answers else None
        return report, hover

    async def declaration(
        self, task: Task, name_asked: str, doc: QuestionDoc, timer: StepTimer, lad: bool
    ) -> DeclarationResult:
        report, (hover,) = await self.reported(task, doc.text, [DocQuery.hover(doc.at)], timer)
        read = read_hover(hover)
        errors = [
            d for d in report.diagnostics if d.is_error and d.range.start.line >= doc.first_line
        ]
        if errors or read is None or read.signature is None:
            if lad and self.library is not None:
                return await self._lad_declaration(name_asked)
            raise UnknownDeclaration(
                f"no declaration {name_asked!r} is known at the target theorem"
            )
        signature = read.signature
        name = signature_name(signature)
        kind = printed_kind(info_at(report.diagnostics, doc.last_line) or "")
        file, line, source = self._source(task, name, read.module, lad)
        return DeclarationResult(
            name=name,
            kind=kind,
            statement=signature,
            universe_params=universe_params(signature),
            docstring=read.docstring,
            module=read.module,
            file=file,
            line=line,
            source=source,
        )

    async def _lad_declaration(self, name: str) -> DeclarationResult:
        assert self.library is not None
        try:
            d = await self.library.read(name)
        except LibraryError as exc:
            raise UnknownDeclaration(exc.message) from exc
        statement = next(
            (h.statement for h in await self.library.search(d.name, 1) if h.name == d.name),
            d.name,
        )
        return DeclarationResult(
            name=d.name,
            kind=d.kind,
            statement=statement,
            universe_params=universe_params(statement),
            docstring=docstring(d.source),
            module=None,
            file=d.file,
            line=d.line,
            source=d.source,
        )

    def _readable(self, path: Path, lad: bool) -> bool:
        """May this session read ``path``: in the suite, not hidden, LAD files only in LAD?"""
        root = self.suite.root.resolve()
        path = path.resolve()
        if not path.is_relative_to(root) or not path.is_file():
            return False
        if any(path == h or path.is_relative_to(h) for h in self.suite.hidden_paths):
            return False
        return lad or path not in self.suite.lad_files

    def _source(
        self, task: Task, name: str, module: str | None, lad: bool
    ) -> tuple[str | None, int | None, str | None]:
        """(suite-relative file, 1-based line, source) of ``name``, if this session may read it."""
        key = (task.id if module is None else module, name, lad)
        known = self._sources.get(key)
        if known is None:
            if len(self._sources) >= 4096:  # bound an agent asking ever new names
                self._sources.clear()
            known = self._sources[key] = self._read_source(task, name, module, lad)
        return known

    def _read_source(
        self, task: Task, name: str, module: str | None, lad: bool
    ) -> tuple[str | None, int | None, str | None]:
        where = f"task:{task.id}" if module is None else module
        if module is None:
            path = task.path
        else:
            path = self.suite.root / (module.replace(".", "/") + ".lean")
            if not self._readable(path, lad):
                return None, None, None
        if where not in self._indexes:
            text = task.text[: task.span.decl_start] if module is None else path.read_text("utf-8")
            self._indexes[where] = (text, declaration_index(text))
        text, index = self._indexes[where]
        span = declaration_source(text, name, index)
        if span is None:
            return None, None, None
        rel = path.resolve().relative_to(self.suite.root.resolve()).as_posix()
        return rel, text.count("\n", 0, span[0]) + 1, text[span[0] : span[1]]

    async def outline(self, task: Task, timer: StepTimer) -> OutlineResult:
        """The task file's declarations above the target (asked once per task)."""
        known = self._outlines.get(task.id)
        if known is not None:
            return known
        memo = await self.elaborator.memo(task)
        text = task.unwrapped(task.text)[: command_start(task, memo.view)]
        index = LineIndex(text)
        found: list[tuple[lsp.DocumentSymbol, str]] = []

        async def hovers(slot: Slot, answers: list[Any]) -> list[Any]:
            for symbol, _ in declarations_in(answers[0] or [], ()):
                start = index.offset_of_lsp(
                    LspPos(symbol.range.start.line, symbol.range.start.character)
                )
                end = index.offset_of_lsp(LspPos(symbol.range.end.line, symbol.range.end.character))
                kind = declaration_kind(text[start:end])
                if kind != "example":
                    found.append((symbol, kind))
            del found[: max(0, len(found) - MAX_OUTLINE)]
            signs: list[Any] = [None] * len(found)

            async def sign(i: int, pos: lsp.Position) -> None:
                signs[i] = await slot.ask(
                    DocQuery.hover(LspPos(pos.line, pos.character)), timeout=self.timeout
                )

            async with anyio.create_task_group() as tg:
                for i, (symbol, _) in enumerate(found):
                    tg.start_soon(sign, i, symbol.selection_range.start)
            return signs

        key_doc = text
        _, (_, signs) = await self.ask_about(
            task, key_doc, [DocQuery.symbols()], timer, then=hovers
        )
        entries = []
        for (symbol, kind), hover in zip(found, signs, strict=True):
            read = read_hover(hover)
            signature = read.signature if read and read.signature else symbol.name
            entries.append(
                OutlineEntry(
                    name=signature_name(signature),
                    kind=kind,
                    signature=signature,
                    line=symbol.selection_range.start.line + 1,
                )
            )
        total = len(found)
        result = OutlineResult(declarations=entries, truncated=total >= MAX_OUTLINE)
        self._outlines[task.id] = result
        return result

    async def completions(
        self,
        task: Task,
        doc: str,
        pos: LspPos,
        qualifier: str,
        timer: StepTimer,
        holder: str | None,
    ) -> CompletionsResult:
        async def resolve(slot: Slot, answers: list[Any]) -> list[Any]:
            items = answers[0][:MAX_COMPLETIONS]
            resolved: list[Any] = list(items)

            async def one(i: int, item: Any) -> None:
                if isinstance(item, dict) and "data" in item and not item.get("detail"):
                    try:
                        resolved[i] = await slot.ask(
                            DocQuery.resolve("completionItem/resolve", item), timeout=self.timeout
                        )
                    except LeanrigError:
                        pass  # the item stands without its type

            async with anyio.create_task_group() as tg:
                for i, item in enumerate(items):
                    tg.start_soon(one, i, item)
            return resolved

        _, (items, resolved) = await self.ask_about(
            task, doc, [DocQuery.completion(pos)], timer, holder, then=resolve
        )
        out = []
        for item in resolved:
            if not isinstance(item, dict) or not isinstance(item.get("label"), str):
                continue
            kind = COMPLETION_KINDS.get(item.get("kind", 0), "name")
            detail = item.get("detail")
            typed = isinstance(detail, str) and kind != "module"
            out.append(
                Completion(
                    name=qualifier + item["label"], kind=kind, type=detail if typed else None
                )
            )
        return CompletionsResult(completions=out, truncated=len(items) > MAX_COMPLETIONS)

    async def code_actions(
        self, task: Task, text: str, at: Pos, body: tuple[int, int], timer: StepTimer, holder: str
    ) -> CodeActionsResult:
        doc, pos, owner, memo = await self.document_at(task, text, at, holder)
        query = DocQuery.code_actions(LspRange(pos, pos))

        async def resolve(slot: Slot, answers: list[Any]) -> list[Any]:
            actions = [a for a in answers[0] if isinstance(a, dict)]
            done: list[Any] = list(actions)

            async def one(i: int, action: Any) -> None:
                if "edit" not in action and "data" in action:
                    done[i] = await slot.ask(
                        DocQuery.resolve("codeAction/resolve", action), timeout=self.timeout
                    )

            async with anyio.create_task_group() as tg:
                for i, action in enumerate(actions):
                    tg.start_soon(one, i, action)
            return done

        _, (_, actions) = await self.ask_about(task, doc, [query], timer, owner, then=resolve)
        index = LineIndex(text)
        out, outside = [], 0
        for action in actions:
            edits = _document_edits(action.get("edit"))
            if memo.view.prefixed and owner is not None:
                edits = [_shifted(e, memo.view.line_shift) for e in edits]
            edit = body_edit(str(action.get("title", "")), edits, text, index, *body)
            if edit is None:
                outside += 1
            else:
                out.append(CodeAction(title=edit.title, old=edit.old, new=edit.new, body=edit.body))
        return CodeActionsResult(actions=out, outside_body=outside)

    async def profiled(self, task: Task, doc: str, timer: StepTimer) -> DocumentReport:
        """Lean's report of a profiled document, in task-file positions."""
        memo = await self.elaborator.memo(task)
        report, _ = await self.reported(task, doc, [], timer)
        return memo.view.report_from_lean(report)


def _document_edits(edit: Any) -> list[Any]:
    if not isinstance(edit, dict):
        return []
    out: list[Any] = []
    for edits in (edit.get("changes") or {}).values():
        out += edits
    for change in edit.get("documentChanges") or []:
        if isinstance(change, dict):
            out += change.get("edits") or []
    return out


def _shifted(edit: Any, line_shift: int) -> Any:
    """A text edit on the session's document (prefix mode) → on the task file."""
    r = edit["range"]
    return {
        **edit,
        "range": {
            "start": {**r["start"], "line": r["start"]["line"] - line_shift},
            "end": {**r["end"], "line": r["end"]["line"] - line_shift},
        },
    }
