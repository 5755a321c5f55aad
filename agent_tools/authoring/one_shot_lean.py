"""One-shot Lean processes for suite authoring, each fresh and sandboxed, under a deadline.

Must not judge what Lean says (importer, checker and linter do) nor block the event loop."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from lsp_bridge import LeanInstall, LeanrigError, LineIndex
from repl_pool import SandboxPolicy, base_env, one_shot, sandbox_wrapper

from ..verdict import parse_json_messages


class AuthoringError(LeanrigError):
    hint = "see docs/suite-format.md, section 'From your files to a suite'"


@dataclass(frozen=True, slots=True)
class Message:
    """One message Lean printed: severity, 1-based line, 0-based column, text."""

    severity: str
    line: int
    column: int
    text: str

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Message:
        pos = raw.get("pos") or {}
        return cls(
            str(raw.get("severity", "")),
            int(pos.get("line", 0)),
            int(pos.get("column", 0)),
            str(raw.get("data", "")),
        )

    @property
    def uses_sorry(self) -> bool:
        return (
            self.severity == "warning"
            and "declaration uses" in self.text
            and ("sorry" in self.text)
        )


@dataclass(frozen=True, slots=True)
class LeanAnswer:
    """A Lean run's outcome: its messages, whether it finished in time and without errors."""

    messages: tuple[Message, ...]
    returncode: int | None
    stderr: str

    @property
    def errors(self) -> list[Message]:
        return [m for m in self.messages if m.severity == "error"]

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.errors

    def at_lines(self, first: int, last: int) -> list[Message]:
        """Messages whose position is on lines ``first..last`` (1-based, inclusive)."""
        return [m for m in self.messages if first <= m.line <= last]

    def why(self) -> str:
        """The first error, or what stopped Lean."""
        if self.returncode is None:
            return "Lean did not finish in time"
        if self.errors:
            first = self.errors[0]
            return f"{first.line}:{first.column}: {first.text.splitlines()[0][:200]}"
        return f"Lean exited with {self.returncode}: {self.stderr.strip()[-200:]}"


LAKE_ENV_SECONDS = 600.0  # `lake env` may build the project's dependencies first


async def lake_lean_path(root: Path, install: LeanInstall) -> list[Path]:
    """A Lake project's ``LEAN_PATH`` from ``lake env`` in ``root``; empty without Lake."""
    lakefiles = [await anyio.Path(root / f).exists() for f in ("lakefile.toml", "lakefile.lean")]
    if install.lake is None or not any(lakefiles):
        return []
    try:
        done = await one_shot(
            [str(install.lake), "env", "printenv", "LEAN_PATH"],
            cwd=root,
            env=base_env(),
            timeout=LAKE_ENV_SECONDS,
        )
    except LeanrigError as exc:
        raise AuthoringError(f"lake could not start: {exc.message}") from exc
    if done.returncode != 0:
        raise AuthoringError(f"`lake env` failed in {root}: {done.stderr.strip()[-300:]}")
    return [Path(p) for p in done.stdout.strip().split(os.pathsep) if p]


def _fresh_dir() -> Path:
    work = Path(os.path.abspath(tempfile.mkdtemp(prefix="leanrig-suite-")))
    (work / "build").mkdir()
    (work / "src").mkdir()
    return work


def line_of(text: str, offset: int) -> int:
    """The 1-based line of ``offset`` in ``text`` (as Lean numbers lines)."""
    return LineIndex(text).pos_of(offset).line


class OneShotLean:
    """Sandboxed one-shot Lean processes sharing one scratch build directory, ``wall`` s each."""

    def __init__(
        self, install: LeanInstall, work: Path, lean_path: list[Path], wall: float
    ) -> None:
        self.install = install
        self.work = work
        self.build = work / "build"
        self.src = work / "src"
        self.lean_path = lean_path
        self.wall = wall

    @classmethod
    @asynccontextmanager
    async def scratch(
        cls, install: LeanInstall, lean_path: list[Path], wall: float
    ) -> AsyncIterator[OneShotLean]:
        """Runs in a fresh temporary directory, removed afterwards (in a thread, shielded)."""
        work = await anyio.to_thread.run_sync(_fresh_dir)
        try:
            yield cls(install, work, lean_path, wall)
        finally:
            remove = functools.partial(shutil.rmtree, work, ignore_errors=True)
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await anyio.to_thread.run_sync(remove, abandon_on_cancel=True)

    async def _run(self, argv: list[str]) -> LeanAnswer:
        wrapper = list(sandbox_wrapper(SandboxPolicy(writable=(self.work,))))
        try:
            done = await one_shot(
                [*wrapper, *argv],
                cwd=self.work,
                env=base_env([self.build, *self.lean_path]),
                timeout=self.wall,
            )
        except LeanrigError as exc:
            raise AuthoringError(f"Lean could not start: {exc.message}") from exc
        messages = tuple(Message.of(m) for m in parse_json_messages(done.stdout))
        return LeanAnswer(messages, done.returncode, done.stderr)

    async def compile(self, module: str, text: str) -> LeanAnswer:
        """Compile ``text`` as ``module`` to an ``.olean`` that later runs can import."""
        rel = Path(*module.split("."))
        src = self.src / rel.with_suffix(".lean")
        olean = self.build / rel.with_suffix(".olean")
        await anyio.Path(src.parent).mkdir(parents=True, exist_ok=True)
        await anyio.Path(olean.parent).mkdir(parents=True, exist_ok=True)
        await anyio.Path(src).write_text(text, encoding="utf-8")
        lean = str(self.install.lean)
        return await self._run([lean, "--json", "-R", str(self.src), "-o", str(olean), str(src)])

    async def elaborate(self, name: str, text: str) -> LeanAnswer:
        """Elaborate ``text`` (a file nothing imports) and return what Lean says."""
        path = self.work / f"{name}.lean"
        await anyio.Path(path).write_text(text, encoding="utf-8")
        return await self._run([str(self.install.lean), "--json", str(path)])
