"""How the client reaches the Lean process serving a document (``DocumentChannels``), and the
watchdog's side of it: one ``lean --server`` carrying every document (``WatchdogServer``),
with the LSP handshake every Lean process gets (``initialize_params``, ``initialize``).

Must not track documents or decide retries: a channel says which connection carries a
document's messages and what a failure on it means; the direct file workers' channel is
``file_workers.py``.
"""

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
        """True for direct file workers (one process per document, no watchdog)."""
        ...

    @property
    def alive(self) -> bool: ...

    def pids(self) -> tuple[int, ...]:
        """The Lean processes of the channels: the server, or each document's live worker."""
        ...

    def kill(self) -> None: ...

    def conn(self, uri: str) -> LspTransport:
        """Where messages about ``uri`` go (raising what a request meets when it is gone)."""
        ...

    def connection_of(self, uri: str) -> LspTransport | None:
        """``uri``'s connection, alive or not, to fail its requests on (None: it has none)."""
        ...

    def error(self, uri: str, error: LeanrigError, conn: LspTransport) -> LeanrigError:
        """``error`` from ``conn`` about ``uri``, as Lean's watchdog would report it."""
        ...

    async def settled(self, uri: str, timeout: float, method: str) -> None:
        """Return once no start of ``uri``'s process is under way (within ``timeout``)."""
        ...


class WatchdogServer:
    """Lean's watchdog (``lean --server``, ``lake serve``): one connection for every document;
    its errors are its own (it reports a worker's crash itself). ``info``: its ``serverInfo``."""

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
        """The server ``command`` starts, after the handshake (``initialize`` with ``params``);
        killed with its workers when the context ends."""
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
        return  # nothing starts per document (no checkpoint: the caller goes on at once)


def initialize_params(command: ServerCommand, root_uri: str) -> dict[str, Any]:
    """``initialize``'s parameters for a Lean started by ``command`` in ``root_uri`` (a
    direct file worker reads the same and never answers them)."""
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
    """``initialize`` and ``initialized`` with the watchdog at ``transport``; its
    ``serverInfo``. A server that does not answer is ``ServerStartFailed`` (its stderr)."""
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
