"""`tools/call` on MCP's line transports (stdio, a Unix socket) answered without the SDK's
request pipeline, when all the SDK would do is call `LeanrigMCP.call_tool` and write its result.

Why: the SDK's pipeline (pydantic parse of the message, the era relay's task hop, the
dispatcher's task, the runner's context, middleware and request validation, the result's
models and their serialization) is ~0.3 ms of server CPU before our tool starts and ~0.15 ms
after it ends, on every proof step (bench/step_stamps.py); the step is ~4-5 ms of Lean. This
keeps the protocol the SDK speaks and only takes the requests whose answer is ours alone.

Taken here, and only then: a line that orjson reads as a JSON object with exactly the keys
``jsonrpc`` ("2.0"), ``id`` (a string, or an integer within 64 bits), ``method``
("tools/call") and ``params`` — ``name`` a tool this server serves, ``arguments`` an object,
and ``_meta``: on a connection the SDK opened in the 2026-07-28 era, the request envelope the
SDK's own ladder and request validation accept (`classify_inbound_request`,
`validate_client_request`: checked once per envelope) and no other key; on a handshake-era
connection none, and only once the SDK has answered ``initialize`` with its result. Everything
else goes to the SDK as before: the connection's first request (it decides the era), progress
tokens, any other shape of id or params, unknown tools, lines orjson cannot read, an id already
in flight here — and every call while a `tools/call` the SDK took is unanswered, so calls
reach the tools in the order they were sent (the SDK reads a message ahead of its dispatcher).

Kept as the SDK keeps them (tests/test_mcp_direct.py holds each against the SDK's answer):
the reply (the same `CallToolResult`; on 2026-era results ``resultType`` and the server's
``serverInfo`` stamp), `notifications/cancelled` (the call is cancelled and never answered),
the end of the input (calls in flight cancelled and answered "Connection closed"), a crash or
a result that cannot be written (-32603, logged; never the session's end), an id sent again
while its call runs (the newest request owns it), the call's ledger line (`call_tool` writes
it), one whole line per reply (`LineReplies`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import orjson
import structlog
from anyio.abc import TaskGroup
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
    JSONRPCMessage,
    JSONRPCRequest,
    JSONRPCResponse,
)
from mcp_types import methods as mcp_methods

from ..sessions import ToolError
from .tools import call_tool, failure, service_tool

if TYPE_CHECKING:
    from .mcp_server import LeanrigMCP, LineReplies

log = structlog.get_logger("leanrig.mcp")

# The per-request envelope's keys (2026-07-28): a `_meta` holding anything else (a progress
# token) goes to the SDK.
ENVELOPE_KEYS = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY}
)
REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
PARAMS_KEYS = frozenset({"name", "arguments", "_meta"})
CRASHED = "internal error; see server log"  # a crash, on both paths

INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


def has_envelope(params: Any) -> bool:
    """As the SDK decides a connection's era from its first request: the envelope's
    protocol-version key in ``params._meta``."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


class DirectToolCalls:
    """The requests of one MCP session on a line transport that are answered here (module
    docstring); the rest are the SDK's. ``tasks``: where the calls run (``serve_lines``
    cancels them when the session ends); ``replies``: the session's reply lines."""

    def __init__(self, server: LeanrigMCP, replies: LineReplies, tasks: TaskGroup) -> None:
        self._server = server
        self._replies = replies
        self._tasks = tasks
        self._era: str | None = None  # "modern" | "legacy", as the SDK decided it
        self._initialize_id: str | int | None = None
        self._legacy_ready = False
        self._in_flight: dict[str | int, anyio.CancelScope] = {}
        self._peer_cancelled: set[str | int] = set()
        # The SDK's `tools/call`s not answered yet: while there is one, later calls are the
        # SDK's too (it reads a message ahead of its dispatcher, so a call taken here would
        # reach the service before the one sent first).
        self._sdk_calls: set[str | int] = set()
        self._envelope: dict[str, Any] | None = None  # the last envelope the SDK would accept
        self._stamp = server.server_info_stamp()

    # -- what the SDK sees ---------------------------------------------------------------

    def passed(self, message: JSONRPCMessage) -> bool:
        """A message read from the line is about to go to the SDK: learn the era from it, and
        take a `notifications/cancelled` for a call of ours (True: not the SDK's)."""
        if isinstance(message, JSONRPCRequest):
            if self._era is None:
                modern = message.method != "initialize" and has_envelope(message.params)
                self._era = "modern" if modern else "legacy"
            if self._era == "legacy" and message.method == "initialize":
                self._initialize_id = message.id
            key = coerce_request_id(message.id)
            if message.method == "tools/call":
                self._sdk_calls.add(key)
            # An id reused while a call of ours has it: the SDK's newest request owns it (a
            # cancel of it is the SDK's), as its own table does.
            self._in_flight.pop(key, None)
            return False
        if getattr(message, "method", None) == "notifications/cancelled":
            params = getattr(message, "params", None)
            rid = cancelled_request_id_from_params(params if isinstance(params, Mapping) else None)
            if rid is None:
                return False
            key = coerce_request_id(rid)
            self._sdk_calls.discard(key)  # (the SDK's, cancelled: it never answers it)
            scope = self._in_flight.get(key)
            if scope is not None:
                self._peer_cancelled.add(key)
                scope.cancel()
                return True
        return False

    def replied(self, message: JSONRPCMessage) -> None:
        """The SDK wrote ``message``: its result to ``initialize`` opens a handshake-era
        connection to direct calls (the SDK's own gate opens then); its answer to a
        `tools/call` ends that call's hold on the order of later ones."""
        rid = getattr(message, "id", None)
        if rid is None:
            return
        if self._sdk_calls:
            self._sdk_calls.discard(coerce_request_id(rid))
        if self._initialize_id is not None and rid == self._initialize_id:
            self._initialize_id = None
            # (an error, or another request's answer under the same id, opens nothing)
            result = message.result if isinstance(message, JSONRPCResponse) else None
            if isinstance(result, Mapping) and "protocolVersion" in result:
                self._legacy_ready = True

    # -- what is taken here --------------------------------------------------------------

    def take(self, line: str) -> bool:
        """Answer ``line`` here if it is a call this class takes (module docstring): the call
        is started and True returned; else False, and the line is the SDK's."""
        if self._era is None or self._sdk_calls or '"tools/call"' not in line:
            return False
        try:
            request = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False
        if not (isinstance(request, dict) and request.keys() == REQUEST_KEYS):
            return False
        rid, params = request["id"], request["params"]
        if (
            request["jsonrpc"] != "2.0"
            or request["method"] != "tools/call"
            or not isinstance(params, dict)
            or not params.keys() <= PARAMS_KEYS
            or not _plain_id(rid)
            or coerce_request_id(rid) in self._in_flight  # (the SDK's: "7" and 7 are one id)
        ):
            return False
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return False
        spec = service_tool(self._server.service, name)
        if spec is None:
            return False
        modern = self._era == "modern"
        if modern:
            meta = params.get("_meta")
            if not isinstance(meta, dict) or not meta.keys() <= ENVELOPE_KEYS:
                return False
            if meta != self._envelope and not self._accepted(params):
                return False
            self._envelope = meta  # (a client sends the same one with every call)
        elif "_meta" in params or not self._legacy_ready:
            return False
        scope = anyio.CancelScope()
        self._in_flight[coerce_request_id(rid)] = scope
        self._tasks.start_soon(self._answer, rid, spec, arguments, modern, scope)
        return True

    @staticmethod
    def _accepted(params: dict[str, Any]) -> bool:
        """Would the SDK take this 2026-era call to its tool: its envelope ladder, then the
        request's validation for the envelope's version (the shapes of clientInfo and
        clientCapabilities)?"""
        route = classify_inbound_request({"method": "tools/call", "params": params})
        if not isinstance(route, InboundModernRoute):
            return False
        try:
            mcp_methods.validate_client_request("tools/call", route.protocol_version, params)
        except (ValueError, KeyError):  # (pydantic's ValidationError is a ValueError)
            return False
        return True

    async def _answer(
        self, rid: str | int, spec: Any, arguments: dict[str, Any], modern: bool,
        scope: anyio.CancelScope,
    ) -> None:  # fmt: skip
        key = coerce_request_id(rid)
        line: str | None = None
        try:
            with scope:  # (cancelled by the peer: absorbed here, and never answered)
                line = await self._result_line(rid, spec, arguments, modern)
        except Exception:  # (not one: _result_line answers a crash; a session never ends so)
            log.exception("mcp.direct_call_failed", tool=spec.name)
            line = _error_line(rid, INTERNAL_ERROR, CRASHED)
        except anyio.get_cancelled_exc_class():
            # The session is ending: answered as the SDK answers its own calls then.
            if key not in self._peer_cancelled:
                with anyio.CancelScope(shield=True):
                    await self._send(_error_line(rid, CONNECTION_CLOSED, "Connection closed"))
            raise
        finally:
            if self._in_flight.get(key) is scope:  # (not a newer request's under the same id)
                del self._in_flight[key]
            peer_cancelled = key in self._peer_cancelled
            self._peer_cancelled.discard(key)
        if line is not None and not peer_cancelled:
            await self._send(line)

    async def _result_line(
        self, rid: str | int, spec: Any, arguments: dict[str, Any], modern: bool
    ) -> str:
        server = self._server
        # Any failure is this call's alone (a crash must not end the session: the SDK's
        # dispatcher contains its handlers' the same way).
        reply: dict[str, Any]
        try:
            try:
                result = await call_tool(server.service, spec, arguments, server.client)
            except ToolError as exc:
                text = failure(exc).render()
                reply = {"content": [{"type": "text", "text": text}], "isError": True}
            else:
                text = orjson.dumps(result).decode()
                reply = {"content": [{"type": "text", "text": text}], "isError": False,
                         "structuredContent": result}  # fmt: skip
            if modern:
                reply |= {"resultType": "complete", "_meta": {SERVER_INFO_META_KEY: self._stamp}}
            return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": reply}).decode() + "\n"
        except Exception:
            log.exception("mcp.tool_crashed", tool=spec.name)
            return _error_line(rid, INTERNAL_ERROR, CRASHED)

    async def _send(self, line: str) -> None:
        try:
            await self._replies.send_line(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the peer is gone: the session is ending (LineReplies)


def _plain_id(rid: Any) -> bool:
    """An id this class answers: a string, or an integer orjson writes back exactly."""
    if isinstance(rid, str):
        return True
    return isinstance(rid, int) and not isinstance(rid, bool) and INT64_MIN <= rid <= UINT64_MAX


def _error_line(rid: str | int, code: int, message: str) -> str:
    error = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    return orjson.dumps(error).decode() + "\n"
