"""The agent tools over MCP (the official SDK's server, `mcp.server.Server`): stdio, a Unix
socket's lines (socket_server.py) or streamable HTTP. Every message goes through the SDK.

`tools/list` publishes the catalogue's own schemas (inputSchema, outputSchema, annotations)
for the tools the service serves (the library tools only in the LAD condition: tools.py);
`tools/call` runs through tools.call_tool — the same validation, results and errors as
JSON-RPC — and its result is built here, once. The SDK's per-function tools (`MCPServer`'s)
are not used: their argument models coerce ("8" → 8), ignore unknown keys, pre-parse JSON
strings and prefix every error with "Error executing tool", so the two wires would disagree.
So the server is the SDK's public low-level `Server` with our two handlers; `MCPServer` adds
only what leanrig does not serve (its tool manager, empty resources and prompts) and has no
public way to run on the streams below. Expected failures are `is_error` results whose text
is ``[code] message. Next: hint`` (never a raw exception text); a crash is a protocol error.

Lines (stdio, Unix sockets) run on the event loop, not on the SDK's stdio transport: that one
does every line read, write and flush in a worker thread (the profile of a step showed the
hops as the largest share of the server's own time), hands every message in and out through
a task of its own (two task switches per call), and passes a line it cannot read on as an
exception its server drops (the client waits for ever). The SDK's server runs on two small
streams of our own instead (`LineMessages`, `LineReplies`: its documented ReadStream and
WriteStream protocols), which read and write a line on the task that asks, answer unreadable
lines, keep each reply a whole line and end the session when the peer is gone. The process's
descriptors are claimed as the SDK claims them (fdstreams.claimed_stdio).

HTTP serves the SDK's app as the SDK answers by default: a call whose client closes its
connection is then cancelled by the SDK itself on the 2026-07-28 revision's requests (where
closing is the only cancellation); a handshake-era session's client cancels with
`notifications/cancelled`, since that revision says a disconnection is not a cancellation.

The SDK's OpenTelemetry middleware is dropped (its documented opt-out): leanrig installs no
exporter, and a span per message is work on every call. One middleware of our own
(`ExplainedParams`) says what is wrong with a `tools/call` whose params the SDK cannot read.
"""

from __future__ import annotations

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

# How long a reply may wait for its peer to read it (``LineReplies``): a stdio client that
# has not taken a whole reply in this time is gone (the patience the JSON-RPC server gives its
# TCP clients); once the session is closing, as long as the SDK gives its closing replies.
REPLY_WRITE_SECONDS = TCP_WRITE_TIMEOUT
CLOSING_WRITE_SECONDS = 1.0
CRASHED = "internal error; see server log"  # a tool's crash, as the agent reads it

INSTRUCTIONS = (
    "Prove Lean theorems by editing only the proof body. open_task, then set_proof / "
    "replace_in_proof and read diagnostics and goals; check_proof gives the final verdict."
)
LIBRARY_INSTRUCTIONS = (
    " search_library and read_library consult a verified library; tasks do not import it, so "
    "adapt a lemma's proof (read_library) rather than naming the lemma."
)


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
    """The SDK's server with leanrig's tools: ``tools/list`` and ``tools/call`` answered from
    the service (module docstring); ``client`` names the caller's sessions in the service."""

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
        # The SDK's default OpenTelemetry middleware opens a span per message (no exporter is
        # installed here, so nobody reads them): ~30-60 µs per call. The SDK documents
        # dropping it from the list as the way to opt out.
        self.middleware[:] = [
            m for m in self.middleware if type(m).__name__ != "OpenTelemetryMiddleware"
        ] + [ExplainedParams(self)]
        # The service's tools: the library tools only in the LAD condition.
        self._listed = ListToolsResult(tools=[describe(t) for t in service_tools(service)])
        self._input_schemas = {t.name: t.input_schema for t in self._listed.tools}

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """A served tool's inputSchema, for the SDK's `Mcp-Param-*` header check on 2026-07-28
        HTTP calls (without it, the SDK runs the whole `tools/list` to find it, per call: ~1-2 ms
        of a step over HTTP)."""
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
        """One `tools/call`: the tool's result, or its `ToolError` as an ``is_error`` result;
        an unknown tool or a crash is a protocol error."""
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
                text.encode()  # (a lone surrogate cannot be written: a crash, below)
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
            # Built with the models' constructors: pydantic's ``model_construct`` (no
            # validation) runs in Python and was ~3x slower for this result (17 vs 5 µs).
            text = orjson.dumps(result).decode()
            return CallToolResult(
                content=[TextContent(type="text", text=text)], structured_content=result
            )
        except Exception as exc:
            # A result that cannot be written too: the SDK would fail writing it, after the
            # call (a session-ending error on a line transport).
            log.exception("mcp.tool_crashed", tool=name)
            raise MCPError(code=INTERNAL_ERROR, message=CRASHED) from exc

    async def run_stdio_async(self, wire: Wire | None = None) -> None:
        """MCP on this process's stdin/stdout (``wire``: already claimed by the caller), read
        and written on the event loop."""
        async with fd_stdio(wire) as (stdin, stdout):
            await self.serve_lines(stdin, stdout)

    async def run_http_async(
        self,
        listener: socket.socket,
        stop: anyio.Event,
        ready: Callable[[str], None] | None = None,
    ) -> None:
        """MCP over streamable HTTP at ``http://127.0.0.1:PORT/mcp`` on ``listener``
        (``listen.listen_local``; the SDK's app with its defaults, as its
        ``run_streamable_http_async`` serves it) until ``stop`` is set, then a graceful
        shutdown; ``ready(url)`` once it listens. uvicorn's own signal handlers are left out:
        the caller's handle SIGTERM/SIGINT and set ``stop`` (cancelled instead, uvicorn logged
        its lifespan's ``CancelledError`` as an ERROR traceback on every Ctrl-C)."""
        url = f"{socket_url(listener)}/mcp"
        await serve_asgi(
            self.streamable_http_app(), listener, stop,
            (lambda: ready(url)) if ready is not None else None, lifespan="auto",
        )  # fmt: skip

    async def serve_lines(self, lines: TextLines, writer: TextWriter) -> None:
        """MCP over newline-delimited messages (stdio, a Unix-socket connection), the lines
        it cannot read answered (``LineMessages``). Ends when the input ends (the SDK cancels
        the calls in flight and answers them), or when the peer is gone from the output
        (``LineReplies``)."""
        with anyio.CancelScope() as session:
            replies = LineReplies(writer, peer_gone=session.cancel)
            await self.run(
                LineMessages(lines, replies), replies, self.create_initialization_options()
            )
        if session.cancelled_caught:
            log.info("mcp.peer_gone", detail="its replies could not be written; session ended")


class ExplainedParams:
    """The SDK answers a `tools/call` whose params it cannot read (arguments that are not an
    object, a name that is not a string) with -32602 "Invalid request parameters" and nothing
    more, and the call never reaches the tool, so the ledger did not hear of it either. This
    middleware (the SDK's documented place to see a request before its validation) answers
    such a call itself — what is wrong and what to send instead, as the JSON-RPC wire does —
    and records its ledger line when it names a tool this server serves. Only these two shapes
    are judged here, before the SDK runs: an error after them (the tool's own, or the result's)
    is none of this middleware's business."""

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
    """The SDK's write stream over newline-delimited messages: each message serialized and
    written by the task that sends it (the SDK's stdio transport hands it to a writer task
    instead), one message at a time.

    A line begun is finished even when its task is cancelled (the SDK cancels the handlers in
    flight when the input ends): cut short, it would run into the next line. A peer that stopped
    reading is backpressure, for at most ``REPLY_WRITE_SECONDS`` per reply — once the input has
    ended (``input_ended``: the session is closing), ``CLOSING_WRITE_SECONDS``, the SDK's own
    bound for its closing replies. A reply not written whole within its bound, or one whose
    peer closed its end, means the peer is gone: the send fails (``anyio.BrokenResourceError``,
    which the SDK drops with a log line), every later one too, and ``peer_gone`` is called
    (``serve_lines`` ends the session, as the SDK's transport did when its writer failed)."""

    def __init__(self, writer: TextWriter, peer_gone: Callable[[], None]) -> None:
        self._writer = writer
        self._peer_gone = peer_gone
        # fast_acquire: an uncontended send (the usual case) does not yield to the loop first.
        self._lock = anyio.Lock(fast_acquire=True)
        self._closed = False
        self._gone = False
        self._closing = False
        self._writing: anyio.CancelScope | None = None  # the reply being written

    def input_ended(self) -> None:
        """The session is closing: a reply still being written gets at most
        ``CLOSING_WRITE_SECONDS`` more, and so does each later one (a peer that does not read
        must not hold the server's exit for ``REPLY_WRITE_SECONDS``)."""
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
    """The SDK's read stream over newline-delimited messages: the next line read and parsed
    when the SDK's dispatcher asks for it, on its task (the SDK's stdio transport reads in a
    task of its own and passes each message on).

    A line that is no message the SDK can read is answered here and skipped. (The SDK's
    transport passes such a line on as an exception, and its server drops it: a client whose
    request held, say, an escaped lone surrogate (``"\\ud800"``: valid JSON syntax, refused by
    the SDK's parser) got no reply and waited forever.) A request gets the JSON-RPC error
    reply, with its id when a lenient decode finds one (else null, as the spec says); a
    notification is only logged."""

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
                self._replies.input_ended()  # the session is being cancelled (e.g. SIGTERM)
                raise
            if self._lines.last_invalid:
                await self._answer(line, "the line is not valid UTF-8", parse=True)
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError as exc:  # (pydantic's ValidationError is one)
                await self._answer(line, _why(exc))
                continue
            if isinstance(message, JSONRPCNotification) and '"id"' in line:
                # An id the SDK cannot take (an object, a boolean, an array, 1.5) made the
                # request read as a notification, which it drops: the client waited forever.
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
        """The error reply to a ``line`` the SDK cannot take: -32700 when it is no JSON,
        -32600 when it is JSON but no message the SDK reads (with the line's id when it has
        one a reply can carry: a client matching replies by id would wait forever for null)."""
        message = lenient_json(line)
        rid = request_id(message)
        log.warning("mcp.unreadable_message", id=rid, error=why[:200])
        if isinstance(message, dict) and "method" in message and "id" not in message:
            return  # a notification: JSON-RPC never answers one
        if parse or not _strict_json(line):  # (as the JSON-RPC wire judges it: orjson)
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
            pass  # the peer is gone: the session is ending (LineReplies)


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
    """The process's stdin and stdout (claimed here unless ``wire`` is given) as the SDK's stdio
    streams, without threads."""
    with claimed_stdio(wire) as (stdin_fd, stdout_fd):
        yield TextLines(FdReceive(stdin_fd), MAX_MCP_LINE), TextWriter(FdSend(stdout_fd))


def build_mcp(service: ProofService, client: str = "mcp") -> LeanrigMCP:
    return LeanrigMCP(service, client)
