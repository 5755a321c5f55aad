"""A pool slot: one warm Lean server process with one document whose header is elaborated.

The slot interface is what callers (sessions, checkers) use, and it is backend-neutral:
``elaborate(text)``, goal queries by position, ``alive``. Today's backend is the LSP server
(`lean --server` / `lake serve`) through lsp_bridge; a REPL backend would implement the same.

A slot marks itself broken when its process misbehaves (died, protocol error, deadline passed);
the pool then kills and replaces it when the holder releases it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Literal

import anyio
from lsprotocol.types import DocumentSymbol

from lsp_bridge import (
    DocumentReport,
    InteractiveGoal,
    LeanClient,
    LspPos,
    PlainGoal,
    PlainTermGoal,
    ServerCommand,
    ServerError,
    WorkerCrashed,
    WorkerExited,
)

from .errors import SlotBroken
from .oneshot import tree_rss

SlotState = Literal["starting", "idle", "busy", "stopping"]


@dataclass(frozen=True, slots=True)
class PoolKey:
    """What makes two slots interchangeable: the Lean environment and the normalized header."""

    environment: str  # lean executable + version + project root (+ sandbox/env variant)
    header: str  # normalized module header (see header.py)

    def short(self) -> str:
        header = self.header.replace("\n", " ")
        return header if len(header) <= 60 else header[:57] + "..."


class Slot:
    def __init__(self, number: int, key: PoolKey, command: ServerCommand, header_text: str) -> None:
        self.number = number
        self.key = key
        self.command = command
        self.header_text = header_text
        self.uri = (command.cwd / f"_leanrig_slot_{number}.lean").as_uri()
        self.state: SlotState = "starting"
        self.uses = 0
        self.started_at = time.monotonic()
        self.last_used = self.started_at
        self.broken: str | None = None  # why the slot must not be reused
        self.client: LeanClient | None = None
        self.stop_requested = anyio.Event()
        self.last_holder: str | None = None  # affinity: the session that used it last
        self._rss_checked_at = 0.0
        self._rss_cache = 0

    # -- identity and health ---------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.client.pid if self.client is not None else None

    @property
    def alive(self) -> bool:
        return self.client is not None and self.client.alive and self.broken is None

    def age(self) -> float:
        return time.monotonic() - self.started_at

    def rss_bytes(self, max_age: float = 0.0) -> int:
        """Resident memory of the server and all its workers (cached for ``max_age`` s)."""
        now = time.monotonic()
        if max_age and now - self._rss_checked_at < max_age:
            return self._rss_cache
        total = 0
        if self.client is not None:
            total = tree_rss(self.client.pid)
        self._rss_checked_at, self._rss_cache = now, total
        return total

    def mark_broken(self, reason: str) -> None:
        if self.broken is None:
            self.broken = reason

    def kill(self, reason: str) -> None:
        """Kill the process tree now (hung or over cap); the pool replaces it."""
        self.mark_broken(reason)
        if self.client is not None:
            self.client.transport.kill()
        self.stop_requested.set()

    # -- operations --------------------------------------------------------------------------

    def _client(self) -> LeanClient:
        if self.client is None or self.broken is not None:
            raise SlotBroken(f"slot {self.number} is not usable: {self.broken or 'not started'}")
        return self.client

    @asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        try:
            yield
        except (WorkerCrashed, WorkerExited):
            raise  # the server is fine; the next change restarts the worker
        except ServerError as exc:
            self.mark_broken(f"{type(exc).__name__}: {exc.message}")
            raise

    async def elaborate(self, text: str, *, timeout: float) -> DocumentReport:
        """Make ``text`` the slot document's content and wait until it is fully elaborated."""
        await self.send(text)
        return await self.wait(timeout=timeout)

    async def send(self, text: str) -> None:
        """Make ``text`` the document's content without waiting (queries may follow at once:
        Lean answers them for this version)."""
        client = self._client()
        async with self._guard():
            if client.is_open(self.uri):
                await client.change(self.uri, text)
            else:
                await client.open(self.uri, text)

    async def wait(self, *, timeout: float) -> DocumentReport:
        """The barrier: the current version fully elaborated, with its diagnostics."""
        async with self._guard():
            return await self._client().wait_for(self.uri, timeout=timeout)

    def text(self) -> str:
        return self._client().text(self.uri)

    async def plain_goal(self, pos: LspPos, *, timeout: float) -> PlainGoal:
        async with self._guard():
            return await self._client().plain_goal(self.uri, pos, timeout=timeout)

    async def plain_term_goal(self, pos: LspPos, *, timeout: float) -> PlainTermGoal:
        async with self._guard():
            return await self._client().plain_term_goal(self.uri, pos, timeout=timeout)

    async def document_symbols(self, *, timeout: float) -> list[DocumentSymbol]:
        async with self._guard():
            return await self._client().document_symbols(self.uri, timeout=timeout)

    async def interactive_goals(self, pos: LspPos, *, timeout: float) -> list[InteractiveGoal]:
        async with self._guard():
            return await self._client().interactive_goals(self.uri, pos, timeout=timeout)
