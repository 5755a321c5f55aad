"""Sandboxed Lean processes for one suite's verdicts; a failed run becomes a ``NotAccepted``.

Must not judge what Lean answers (the verifier does) or block the event loop."""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from lsp_bridge import LeanInstall, LeanrigError, ServerCommand
from repl_pool import Completed, SandboxPolicy, base_env, one_shot, sandbox_wrapper

from ..tasks import Suite
from .not_accepted import NotAccepted

# `lake env` may build dependencies.
LAKE_ENV_SECONDS = 600.0


def _absolute_temp_dir(prefix: str, root: Path | None) -> Path:
    return Path(os.path.abspath(tempfile.mkdtemp(prefix=prefix, dir=root)))


class SandboxedLean:
    """One-shot Lean processes for ``suite``'s verdicts under the caller's ``sandbox`` policy."""

    def __init__(
        self,
        suite: Suite,
        install: LeanInstall,
        library: Path | None,
        sandbox: SandboxPolicy,
        work_root: Path | None,
    ) -> None:
        self.suite = suite
        self.install = install
        self.library = library
        self.sandbox = sandbox
        self.work_root = work_root
        self._lake_path: list[Path] | None = None
        self._lake_lock = anyio.Lock()

    @asynccontextmanager
    async def scratch(self, prefix: str) -> AsyncIterator[Path]:
        """A fresh absolute directory under ``work_root``, removed afterwards, even if cancelled."""
        path = await anyio.to_thread.run_sync(_absolute_temp_dir, prefix, self.work_root)
        try:
            yield path
        finally:
            remove = functools.partial(shutil.rmtree, path, ignore_errors=True)
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await anyio.to_thread.run_sync(remove, abandon_on_cancel=True)

    async def env(self, *extra: Path) -> dict[str, str]:
        paths = [*extra]
        if self.library is not None:
            paths.append(self.library)
        paths.extend(await self.project_lean_path())
        return base_env(paths)

    async def project_lean_path(self) -> list[Path]:
        """A Lake suite's LEAN_PATH, asked once from ``lake env`` (empty for other suites)."""
        async with self._lake_lock:
            if self._lake_path is not None:
                return self._lake_path
            lake = self.install.lake
            root = anyio.Path(self.suite.root)
            has_lakefile = [await (root / f).exists() for f in ("lakefile.toml", "lakefile.lean")]
            if lake is None or not any(has_lakefile):
                self._lake_path = []
                return self._lake_path
            try:
                out = await one_shot(
                    [str(lake), "env", "printenv", "LEAN_PATH"],
                    cwd=self.suite.root,
                    env=base_env(),
                    timeout=LAKE_ENV_SECONDS,
                )
            except LeanrigError as exc:
                raise NotAccepted(f"crash: lake could not start: {exc.message}") from exc
            if out.returncode != 0:
                why = "timed out" if out.timed_out else f"exited with {out.returncode}"
                raise NotAccepted(
                    f"the suite's Lake project did not report its LEAN_PATH (`lake env` {why}):"
                    f" {out.stderr.strip()[-200:]}"
                )
            self._lake_path = [Path(p) for p in out.stdout.strip().split(":") if p]
            return self._lake_path

    def wrapped(self, argv: list[str], work: Path) -> list[str]:
        # Keep what the caller's policy hides: code run while elaborating must not show it.
        limits = self.suite.spec.limits
        policy = dataclasses.replace(self.sandbox, cpu_seconds=limits.cpu_seconds, writable=(work,))
        return [*sandbox_wrapper(policy), *argv]

    async def server_command(self, work: Path) -> ServerCommand:
        """A fresh sandboxed Lean language server in ``work``, never Lake's: each document gets
        its own ``lean --worker``, with no watchdog between (one Lean process per document)."""
        wrapper = tuple(self.wrapped([], work))
        command = self.install.server_command(
            work, env=await self.env(), use_lake=False, wrapper=wrapper
        )
        return dataclasses.replace(command, direct_workers=True)

    async def run(self, argv: list[str], work: Path, build: Path, timeout: float) -> Completed:
        try:
            result = await one_shot(
                self.wrapped(argv, work),
                cwd=work,
                env=await self.env(build),
                timeout=timeout,
                rss_limit_mb=self.suite.spec.limits.memory_mb,
            )
        except LeanrigError as exc:
            raise NotAccepted(f"crash: {exc.message}") from exc
        if result.over_memory:
            raise NotAccepted(
                f"memory: Lean exceeded {self.suite.spec.limits.memory_mb} MB resident memory"
            )
        if result.timed_out:
            raise NotAccepted(f"timeout: Lean did not finish within {timeout:g} s")
        if result.returncode is not None and result.returncode < 0:
            raise NotAccepted(f"crash: Lean was killed by signal {-result.returncode}")
        if result.returncode is not None and result.returncode >= 128 and not result.stdout:
            raise NotAccepted(f"crash: Lean exited with status {result.returncode}")
        return result
