"""The agent tools over MCP (the SDK's low-level `Server`): stdio, Unix-socket lines, HTTP.

`tools/call` runs through tools.call_tool, so results and errors match the JSON-RPC wire:
an expected failure is an `is_error` result ``[code] message. Next: hint``."""

from __future__ import annotations

import functools
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import structlog
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolRequestParams,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from mcp_types import Tool as MCPTool
from pydantic import ValidationError

from lsp_bridge import TRACE_EVENT

from ..sessions import (
    InvalidArguments,
    ProofService,
    ToolDef,
    ToolError,
    input_schema,
    output_schema,
)
from .asgi import serve_asgi, socket_url
from .fdstreams import FdReceive, FdSend, Wire, claimed_stdio
from .jsonrpc_server import TCP_WRITE_TIMEOUT, lenient_json, request_id
from .textlines import MAX_MCP_LINE, TextLines, TextWriter
from .tools import call_tool, failure, service_tool, service_tools
from .version import package_version

log = structlog.get_logger("leanrig.mcp")

# Seconds a reply may wait for its peer to read it before the peer counts as gone (LineReplies).
REPLY_WRITE_SECONDS = TCP_WRITE_TIMEOUT
CLOSING_WRITE_SECONDS = 1.0
CRASHED = "internal error; see server log"

INSTRUCTIONS = (
    "Prove Lean theorems by editing only the proof body. open_task, then set_proof / "
    "replace_in_proof and read diagnostics and goals; check_proof gives the final verdict."
)
LIBRARY_INSTRUCTIONS = (
    " search_library and read_library consult a verified library; tasks do not import it, so "
    "adapt a lemma's proof (read_library) rather than naming the lemma."
)


@functools.cache  # once per process: every connection's server lists the same tools
def describe(tool: ToolDef) -> MCPTool:
    return MCPTool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=input_schema(tool),
        output_schema=output_schema(tool),
        annotations=ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.read_only,
            destructive_hint=False,
            open_world_hint=False,
        ),
    )


class LeanrigMCP(Server[Any]):
    """The SDK's server with leanrig's tools; ``client`` names the caller's sessions."""

    def __init__(self, service: ProofService, client: str) -> None:
        instructions = INSTRUCTIONS + (LIBRARY_INSTRUCTIONS if service.library is not None else "")
        super().__init__(
            "leanrig",
            version=package_version(),
            instructions=instructions,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            get_tool_input_schema=self._input_schema,
        )
        self.service = service
        self.client = client
        # No exporter is installed, so its spans are pure cost; removal is the SDK's opt-out.
        self.middleware[:] = [
            m for m in self.middleware if type(m).__name__ != "OpenTelemetryMiddleware"
        ] + [ExplainedParams(self)]
        self._listed = ListToolsResult(tools=[describe(t) for t in service_tools(service)])
        self._input_schemas = {t.name: t.input_schema for t in self._listed.tools}

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """A served tool's inputSchema, for the SDK's `Mcp-Param-*` header check on HTTP calls."""
        return self._input_schemas.get(name)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return self._listed

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return await self.call_tool(params.name, params.arguments or {})

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """One `tools/call`: a `ToolError` becomes an ``is_error`` result; other failures raise."""
        spec = service_tool(self.service, name)
        if spec is None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown tool {name!r}",
                data={"tools": sorted(t.name for t in service_tools(self.service))},
            )
        sys.audit(TRACE_EVENT, "tool starts")
        try:
            try:
                result = await call_tool(self.service, spec, arguments, self.client)
                sys.audit(TRACE_EVENT, "tool ends")
            except ToolError as exc:
                text = failure(exc).render()
                text.encode()  # a lone surrogate cannot be written: treat as a crash
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
            text = orjson.dumps(result).decode()
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content=result
            )
        except Exception as exc:
            # Includes unwritable results, which would otherwise end a line connection.
            log.exception("mcp.tool_crashed", tool=name)
            raise MCPError(code=INTERNAL_ERROR, message=CRASHED) from exc

    async def run_stdio_async(self, wire: Wire | None = None) -> None:
        """MCP on this process's stdin/stdout (``wire``: already claimed by the caller)."""
        async with fd_stdio(wire) as (stdin, stdout):
            await self.serve_lines(stdin, stdout)

    async def run_http_async(
        self,
        listener: socket.socket,
        stop: anyio.Event,
        ready: Callable[[str], None] | None = None,
    ) -> None:
        """MCP over streamable HTTP at ``/mcp`` until ``stop`` is set; ``ready(url)`` on listening.

        Set ``stop`` on SIGTERM/SIGINT rather than cancel: uvicorn would log a traceback."""
        url = f"{socket_url(listener)}/mcp"
        await serve_asgi(
            self.streamable_http_app(),
            listener,
            stop,
            (lambda: ready(url)) if ready is not None else None,
            lifespan="auto",
        )

    async def serve_lines(self, lines: TextLines, writer: TextWriter) -> None:
        """MCP over newline-delimited messages; ends when the input ends or the peer is gone."""
        with anyio.CancelScope() as connection:
            replies = LineReplies(writer, peer_gone=connection.cancel)
            await self.run(
                LineMessages(lines, replies), replies, self.create_initialization_options()
            )
        if connection.cancelled_caught:
            log.info("mcp.peer_gone", detail="its replies could not be written; connection ended")


class ExplainedParams:
    """Middleware answering a `tools/call` whose name or arguments the SDK cannot read."""

    def __init__(self, server: LeanrigMCP) -> None:
        self._server = server

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "tools/call" and ctx.request_id is not None:
            params: Mapping[str, Any] = ctx.params if isinstance(ctx.params, Mapping) else {}
            name, arguments = params.get("name"), params.get("arguments")
            if not isinstance(name, str):
                self._refuse(name, arguments, "`name` must be the tool's name, a string")
            if arguments is not None and not isinstance(arguments, dict):
                self._refuse(name, arguments, "the arguments must be a JSON object")
        return await call_next(ctx)

    def _refuse(self, name: object, arguments: object, message: str) -> None:
        service = self._server.service
        if isinstance(name, str) and service_tool(service, name) is not None:
            error = InvalidArguments(message, field=None)
            service.record_invalid(name, arguments, self._server.client, error)
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"invalid tools/call params: {message}; send "
            '`{"name": "<tool>", "arguments": {...}}` with the arguments its inputSchema '
            "lists (see tools/list)",
            data={"tool": name} if isinstance(name, str) else None,
        )


class LineReplies:
    """The SDK's write stream over lines, written one whole line at a time by the sending task.

    A line begun is finished even if cancelled. A reply not written within its bound means the
    peer is gone: ``peer_gone`` is called and every send raises `anyio.BrokenResourceError`."""

    def __init__(self, writer: TextWriter, peer_gone: Callable[[], None]) -> None:
        self._writer = writer
        self._peer_gone = peer_gone
        self._lock = anyio.Lock(fast_acquire=True)
        self._closed = False
        self._gone = False
        self._closing = False
        self._writing: anyio.CancelScope | None = None  # the reply being written

    def input_ended(self) -> None:
        """Bound the current and later replies by ``CLOSING_WRITE_SECONDS``: closing."""
        self._closing = True
        if self._writing is not None:
            closing_by = anyio.current_time() + CLOSING_WRITE_SECONDS
            self._writing.deadline = min(self._writing.deadline, closing_by)

    async def send(self, message: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        line = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        async with self._lock:  # a message longer than a pipe write must not interleave
            if self._gone:
                raise anyio.BrokenResourceError
            bound = CLOSING_WRITE_SECONDS if self._closing else REPLY_WRITE_SECONDS
            with anyio.move_on_after(bound, shield=True) as writing:
                self._writing = writing
                try:
                    await self._writer.write(line)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    self._gone_now()
                    raise
                finally:
                    self._writing = None
            if writing.cancelled_caught:
                self._gone_now()
                raise anyio.BrokenResourceError

    def _gone_now(self) -> None:
        if not self._gone:
            self._gone = True
            self._peer_gone()

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> LineReplies:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class LineMessages:
    """The SDK's read stream over lines, read and parsed on the task that asks.

    A line the SDK cannot read is answered here and skipped: the SDK would leave it unanswered."""

    def __init__(self, lines: TextLines, replies: LineReplies) -> None:
        self._lines = lines
        self._replies = replies

    async def receive(self) -> SessionMessage:
        while True:
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                self._replies.input_ended()
                raise anyio.EndOfStream from None
            except anyio.get_cancelled_exc_class():
                self._replies.input_ended()
                raise
            if self._lines.last_invalid:
                await self._answer(line, "the line is not valid UTF-8", parse=True)
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError as exc:
                await self._answer(line, _why(exc))
                continue
            if isinstance(message, JSONRPCNotification) and '"id"' in line:
                # The SDK reads a request with an unusable id as a notification and drops it.
                raw = lenient_json(line)
                if isinstance(raw, dict) and "id" in raw:
                    await self._answer(line, "the id must be a string or an integer")
                    continue
            return SessionMessage(message)

    def __aiter__(self) -> LineMessages:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        pass

    async def __aenter__(self) -> LineMessages:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _answer(self, line: str, why: str, *, parse: bool = False) -> None:
        """Reply -32700 to a ``line`` that is not JSON, else -32600 with the line's id if usable."""
        message = lenient_json(line)
        rid = request_id(message)
        log.warning("mcp.unreadable_message", id=rid, error=why[:200])
        if isinstance(message, dict) and "method" in message and "id" not in message:
            return  # a notification: JSON-RPC never answers one
        if parse or not _strict_json(line):
            error = ErrorData(
                code=PARSE_ERROR,
                message=f"parse error: not a JSON-RPC message this server can read ({why[:200]})"
                "; send one JSON object per line, strings of valid Unicode",
            )
        else:
            error = ErrorData(
                code=INVALID_REQUEST,
                message=f"invalid request: {why[:200]}; send a JSON-RPC 2.0 request "
                '(`"jsonrpc": "2.0"`, a string or integer `id`, a `method`, object `params`)',
            )
        reply = SessionMessage(JSONRPCError(jsonrpc="2.0", id=rid, error=error))
        try:
            await self._replies.send(reply)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


def _why(exc: ValueError) -> str:
    """Why the SDK could not read a line (pydantic's first error)."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        return f"{where}: {first.get('msg', exc)}" if where else str(first.get("msg", exc))
    return str(exc)


def _strict_json(line: str) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


@asynccontextmanager
async def fd_stdio(wire: Wire | None = None) -> AsyncIterator[tuple[TextLines, TextWriter]]:
    """The process's stdin and stdout as line streams, claimed here unless ``wire`` is given."""
    with claimed_stdio(wire) as (stdin_fd, stdout_fd):
        yield TextLines(FdReceive(stdin_fd), MAX_MCP_LINE), TextWriter(FdSend(stdout_fd))


def build_mcp(service: ProofService, client: str = "mcp") -> LeanrigMCP:
    return LeanrigMCP(service, client)
