"""A task's session document: the whole task file, or its prefix imported as a compiled module.

Prefix mode only if Lean confirms it changes nothing; agents only ever see task-file positions."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import orjson
import structlog

from lsp_bridge import DocumentReport, LspPos, LspRange, cache_root, replace_file
from repl_pool import LeanEnvironment, SandboxPolicy, one_shot, sandbox_wrapper

from ..tasks import (
    PrefixSplit,
    Symbol,
    Task,
    check_command,
    exit_after,
    insert_before_exit,
    split_prefix,
)
from ..verdict import Statement, parse_check

log = structlog.get_logger("leanrig.prefix")

Mode = Literal["file", "prefix"]
MIN_PREFIX_COMMANDS = 40
BUILD_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class TaskView:
    """How a task's session document maps to the task file."""

    mode: Mode
    reason: str
    environment: LeanEnvironment
    cut: int = 0  # task-file offset where the target command starts (prefix mode)
    head: str = ""  # the document before the target command (prefix mode)
    cut_line: int = 0  # 0-based task-file line of ``cut``
    line_shift: int = 0  # document line - task-file line, for lines from ``cut_line`` on

    @staticmethod
    def whole_file(environment: LeanEnvironment, reason: str) -> TaskView:
        return TaskView("file", reason, environment)

    @property
    def prefixed(self) -> bool:
        return self.mode == "prefix"

    def to_lean(self, text: str) -> str:
        """The Lean document for a task-file ``text`` (any body)."""
        return self.head + text[self.cut :] if self.prefixed else text

    def offset_from_lean(self, offset: int) -> int:
        if not self.prefixed:
            return offset
        return self.cut + max(0, offset - len(self.head))

    def lsp_to_lean(self, pos: LspPos) -> LspPos | None:
        """A task-file position in the document (None: before the target command)."""
        if not self.prefixed:
            return pos
        if pos.line < self.cut_line:
            return None
        return LspPos(pos.line + self.line_shift, pos.character)

    def lsp_from_lean(self, pos: LspPos) -> LspPos:
        if not self.prefixed:
            return pos
        line = pos.line - self.line_shift
        if line < self.cut_line:  # inside the head: clamp to the target command's start
            return LspPos(self.cut_line, 0)
        return LspPos(line, pos.character)

    def _range(self, r: LspRange) -> LspRange:
        return LspRange(self.lsp_from_lean(r.start), self.lsp_from_lean(r.end))

    def report_from_lean(self, report: DocumentReport) -> DocumentReport:
        if not self.prefixed:
            return report
        diagnostics = tuple(
            dataclasses.replace(
                d,
                range=self._range(d.range),
                full_range=self._range(d.full_range) if d.full_range is not None else None,
            )
            for d in report.diagnostics
        )
        return dataclasses.replace(report, diagnostics=diagnostics)

    def symbols_from_lean(self, symbols: list[Symbol]) -> list[Symbol]:
        """Flattened symbols (document offsets) → task-file offsets."""
        if not self.prefixed:
            return symbols
        return [
            dataclasses.replace(
                s, start=self.offset_from_lean(s.start), end=self.offset_from_lean(s.end)
            )
            for s in symbols
        ]


def prefixed_view(
    environment: LeanEnvironment, split: PrefixSplit, task: Task, reason: str
) -> TaskView:
    head = split.head(task.text, task.header)
    cut_line = task.text.count("\n", 0, split.cut)
    return TaskView(
        "prefix",
        reason,
        environment,
        cut=split.cut,
        head=head,
        cut_line=cut_line,
        line_shift=head.count("\n") - cut_line,
    )


def _with_lean_path(environment: LeanEnvironment, directory: Path) -> LeanEnvironment:
    env = dict(environment.env if environment.env is not None else os.environ)
    existing = env.get("LEAN_PATH")
    env["LEAN_PATH"] = str(directory) + (os.pathsep + existing if existing else "")
    return dataclasses.replace(environment, env=env)


class PrefixModules:
    """Builds, checks and caches prefix modules; one ``TaskView`` per task."""

    def __init__(
        self,
        environment: LeanEnvironment,
        *,
        min_commands: int = MIN_PREFIX_COMMANDS,
        cache: Path | None = None,
        sandbox: bool = True,
    ) -> None:
        self.environment = environment
        self.min_commands = min_commands
        env_digest = hashlib.sha256(environment.id.encode()).hexdigest()[:16]
        self.directory = (cache or cache_root() / "prefixes") / env_digest
        self.prefix_environment = _with_lean_path(environment, self.directory)
        self.sandbox = sandbox
        self._views: dict[str, TaskView] = {}
        self._locks: dict[str, anyio.Lock] = {}

    async def view(self, task: Task) -> TaskView:
        cached = self._views.get(task.id)
        if cached is not None:
            return cached
        lock = self._locks.setdefault(task.id, anyio.Lock())
        async with lock:
            cached = self._views.get(task.id)
            if cached is None:
                cached = self._views[task.id] = await self._decide(task)
                log.info("prefix.mode", task=task.id, mode=cached.mode, reason=cached.reason)
            return cached

    async def _decide(self, task: Task) -> TaskView:
        split = split_prefix(task.text, task.header, task.span.decl_start)
        if split is None or split.commands == 0:
            return TaskView.whole_file(self.environment, "no commands before the target")
        if split.commands < self.min_commands:
            return TaskView.whole_file(
                self.environment,
                f"{split.commands} command{'' if split.commands == 1 else 's'} before the target "
                "(a prefix module pays off from "
                f"{self.min_commands})",
            )
        if split.module_local:
            # Lean's check sees only the placeholder body, which need not use them.
            shown = "; ".join(split.module_local[:2])
            more = "; …" if len(split.module_local) > 2 else ""
            return TaskView.whole_file(
                self.environment,
                f"the prefix has module-local commands (not kept by an import): {shown}{more}",
            )
        if split.unscoped:
            return TaskView.whole_file(
                self.environment,
                "the prefix has scoping commands inside other commands (the context is "
                f"re-established command by command): {split.unscoped[0]}",
            )
        # One decision per (task, prefix content, environment).
        key = hashlib.sha256(f"{task.spec.theorem}\0{task.text}".encode()).hexdigest()[:16]
        decision = self.directory / f"{split.module}.{key}.json"
        try:
            saved = orjson.loads(await anyio.Path(decision).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            saved = None
        if saved is None:
            mode, reason = await self._build_and_check(task, split)
            data = orjson.dumps({"mode": mode, "reason": reason})
            await anyio.to_thread.run_sync(replace_file, decision, data)
        else:
            mode, reason = saved["mode"], saved["reason"]
        if mode == "prefix":
            return prefixed_view(self.prefix_environment, split, task, reason)
        return TaskView.whole_file(self.environment, reason)

    def _argv(self, *argv: str) -> list[str]:
        if not self.sandbox:
            return list(argv)
        return [*sandbox_wrapper(SandboxPolicy(writable=(self.directory,))), *argv]

    async def _run(self, *argv: str) -> tuple[int | None, list[dict[str, Any]], str]:
        env = dict(self.prefix_environment.env or {})
        done = await one_shot(self._argv(*argv), cwd=self.directory, env=env, timeout=BUILD_SECONDS)
        return done.returncode, _messages(done.stdout), done.stderr

    async def _build_and_check(self, task: Task, split: PrefixSplit) -> tuple[Mode, str]:
        await anyio.Path(self.directory).mkdir(parents=True, exist_ok=True)
        lean = str(self.environment.install.lean)
        olean = self.directory / f"{split.module}.olean"
        if not await anyio.Path(olean).exists():
            src = self.directory / f"{split.module}.lean"
            await anyio.Path(src).write_text(split.module_text, encoding="utf-8")
            tmp = self.directory / f"{split.module}.{os.getpid()}.olean.tmp"
            code, messages, stderr = await self._run(
                lean, "--json", "-R", str(self.directory), "-o", str(tmp), str(src)
            )
            errors = [m for m in messages if m.get("severity") == "error"]
            if code != 0 or errors:
                await anyio.Path(tmp).unlink(missing_ok=True)
                first = str(errors[0].get("data", "")) if errors else stderr.strip()[-200:]
                return "file", f"the prefix does not compile as a module: {first[:200]}"
            os.replace(tmp, olean)
        return await self._check(task, split)

    async def _check(self, task: Task, split: PrefixSplit) -> tuple[Mode, str]:
        """Prefix mode if the target's statement and the errors from it on match the file's."""
        lean = str(self.environment.install.lean)
        probe = check_command(task.spec.theorem)
        view = prefixed_view(self.prefix_environment, split, task, "")
        work = self.directory / f"check-{split.digest}-{os.getpid()}-{id(task)}"
        await anyio.Path(work).mkdir(exist_ok=True)
        try:
            # Unwrapped in both, so a difference is the prefix module's doing.
            unwrapped = task.unwrapped(task.text)
            exit_at = exit_after(task.text, task.span.end)

            def probed(document: str) -> str:
                if exit_at is None:
                    return document + probe
                return insert_before_exit(document, task.text, exit_at, probe)[0]

            texts = {"file": probed(unwrapped), "prefix": probed(view.to_lean(unwrapped))}
            answers: dict[str, tuple[int | None, list[dict[str, Any]], str]] = {}

            async def one(name: str) -> None:
                path = work / f"Check{name.title()}.lean"
                await anyio.Path(path).write_text(texts[name], encoding="utf-8")
                answers[name] = await self._run(lean, "--json", str(path))

            async with anyio.create_task_group() as tg:
                for name in texts:
                    tg.start_soon(one, name)
        finally:
            await anyio.to_thread.run_sync(shutil.rmtree, work, True)
        statements: dict[str, Statement | None] = {}
        errors: dict[str, list[tuple[int, int, str]]] = {}
        for name, (_, messages, _) in answers.items():
            found = [
                s
                for m in messages
                if m.get("severity") == "information"
                and (s := parse_check(str(m.get("data", "")), task.spec.theorem)) is not None
            ]
            statements[name] = found[-1] if len(found) == 1 else None
            shift = view.line_shift if name == "prefix" else 0
            errors[name] = _errors_from(messages, shift, view.cut_line)
        if statements["file"] is None:
            return "file", "the task file's statement could not be read back from Lean"
        if statements["prefix"] is None:
            return "file", "the target's statement does not elaborate with the prefix imported"
        if statements["prefix"] != statements["file"]:
            return "file", "the target's statement elaborates differently with the prefix imported"
        if errors["prefix"] != errors["file"]:
            return "file", "the file from the target on elaborates differently with the prefix"
        return "prefix", f"{split.commands} commands before the target, compiled as {split.module}"


def _errors_from(
    messages: list[dict[str, Any]], shift: int, cut_line: int
) -> list[tuple[int, int, str]]:
    """Errors at task-file lines from ``cut_line`` on (a prefixed head's errors never match)."""

    out = []
    for m in messages:
        if m.get("severity") != "error":
            continue
        pos = m.get("pos") or {}
        line = int(pos.get("line", 1)) - 1 - shift
        if shift == 0 and line < cut_line:
            continue
        out.append((line, int(pos.get("column", 0)), str(m.get("data", ""))))
    return sorted(out)


def _messages(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(message, dict):
                out.append(message)
    return out
