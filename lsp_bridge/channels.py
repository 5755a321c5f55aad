"""How the client reaches the Lean process serving a document, and the watchdog's channel.

Must not track documents or decide retries."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

from lsprotocol import types as lsp
from lsprotocol.converters import get_converter

from .errors import LeanrigError, ServerStartFailed
from .server_command import ServerCommand
from .timeouts import Timeouts
from .transport import LspTransport

_converter = get_converter()


class DocumentChannels(Protocol):
    """Which connection carries each document's messages, and what its failures mean."""

    @property
    def direct(self) -> bool:
        """True for direct file workers (no watchdog)."""
        ...

    @property
    def alive(self) -> bool: ...

    def pids(self) -> tuple[int, ...]:
        """The server's pid, or each document's live worker's."""
        ...

    def kill(self) -> None: ...

    def conn(self, uri: str) -> LspTransport:
        """Where messages about ``uri`` go; raises what a request would meet if it is gone."""
        ...

    def connection_of(self, uri: str) -> LspTransport | None:
        """``uri``'s connection, alive or not (None: it has none)."""
        ...

    def error(self, uri: str, error: LeanrigError, conn: LspTransport) -> LeanrigError:
        """``error`` from ``conn`` about ``uri``, as Lean's watchdog would report it."""
        ...

    async def settled(self, uri: str, timeout: float, method: str) -> None:
        """Return once no start of ``uri``'s process is under way (within ``timeout`` s)."""
        ...


class WatchdogServer:
    """Lean's watchdog (``lean --server``, ``lake serve``): one connection for every document."""

    direct = False

    def __init__(self, transport: LspTransport, info: dict[str, Any]) -> None:
        self.transport = transport
        self.info = info

    @classmethod
    @asynccontextmanager
    async def start(
        cls,
        command: ServerCommand,
        timeouts: Timeouts,
        params: dict[str, Any],
        on_notification: Callable[[str, Any], None],
    ) -> AsyncIterator[WatchdogServer]:
        """Start ``command`` and do the handshake; killed with its workers when the context ends."""
        async with LspTransport.spawn(
            command.full_argv(),
            cwd=command.cwd,
            env=command.env,
            on_notification=on_notification,
            shutdown_timeout=timeouts.shutdown,
            write_timeout=timeouts.request,
        ) as transport:
            yield cls(transport, await initialize(transport, command, params, timeouts.spawn))

    @property
    def alive(self) -> bool:
        return self.transport.alive

    def pids(self) -> tuple[int, ...]:
        return (self.transport.pid,)

    def kill(self) -> None:
        self.transport.kill()

    def conn(self, uri: str) -> LspTransport:
        return self.transport

    def connection_of(self, uri: str) -> LspTransport | None:
        return self.transport

    def error(self, uri: str, error: LeanrigError, conn: LspTransport) -> LeanrigError:
        return error

    async def settled(self, uri: str, timeout: float, method: str) -> None:
        return  # no checkpoint: the caller goes on at once


def initialize_params(command: ServerCommand, root_uri: str) -> dict[str, Any]:
    """``initialize``'s parameters for a Lean started by ``command`` in ``root_uri``."""
    params = lsp.InitializeParams(
        process_id=os.getpid(),
        root_uri=root_uri,
        capabilities=lsp.ClientCapabilities(
            text_document=lsp.TextDocumentClientCapabilities(
                publish_diagnostics=lsp.PublishDiagnosticsClientCapabilities(version_support=True),
                document_symbol=lsp.DocumentSymbolClientCapabilities(
                    hierarchical_document_symbol_support=True
                ),
                hover=lsp.HoverClientCapabilities(
                    content_format=[lsp.MarkupKind.Markdown, lsp.MarkupKind.PlainText]
                ),
            ),
        ),
    )
    raw: dict[str, Any] = _converter.unstructure(params)
    raw["capabilities"]["lean"] = {
        "silentDiagnosticSupport": True,
        "incrementalDiagnosticSupport": command.incremental_diagnostics,
    }
    raw["initializationOptions"] = {
        "editDelay": command.edit_delay_ms,
        "hasWidgets": False,
    }
    return raw


async def initialize(
    transport: LspTransport, command: ServerCommand, params: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """The handshake; returns ``serverInfo``, raises ``ServerStartFailed`` if it fails."""
    try:
        result = await transport.request("initialize", params, timeout=timeout)
        await transport.notify("initialized", {})
    except Exception as exc:
        failure = ServerStartFailed(
            f"Lean server {command.program} did not initialize: {exc}",
            stderr_tail=transport.stderr_tail(),
            returncode=transport.returncode,
        )
        raise failure from exc
    return dict(result.get("serverInfo") or {}) if isinstance(result, dict) else {}
