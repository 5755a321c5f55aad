"""The line reader and text writer the MCP SDK's stdio transport accepts, over any byte
stream: used for the process's stdio (file descriptors, no threads) and for Unix-socket
connections. One message per line; the last line may lack its newline."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import structlog
from anyio.abc import ByteReceiveStream

log = structlog.get_logger("leanrig.lines")

# The longest MCP message a peer may send (tool arguments are at most ~1 MB of proof text,
# JSON-escaped): a longer line ends its peer's session rather than grow the server.
MAX_MCP_LINE = 64 * 2**20


class TextLines:
    """Text lines (with their newline) from ``receive``. With ``max_line``, a longer line
    ends the iteration (its peer's session), so one peer cannot grow the server unbounded."""

    def __init__(self, receive: ByteReceiveStream, max_line: int | None = None) -> None:
        self._receive = receive
        self._max = max_line
        self._buf = bytearray()
        self._scanned = 0
        self._eof = False

    def __aiter__(self) -> TextLines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buf.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buf[: end + 1])
                del self._buf[: end + 1]
                self._scanned = 0
                return line.decode("utf-8", "replace")
            self._scanned = len(self._buf)
            if self._eof:
                break
            if self._max is not None and len(self._buf) > self._max:
                log.warning("lines.too_long", bytes=len(self._buf))
                self._buf.clear()
                raise StopAsyncIteration
            try:
                self._buf += await self._receive.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._eof = True
        if self._buf:  # a last line without its newline
            line = bytes(self._buf)
            self._buf.clear()
            return line.decode("utf-8", "replace")
        raise StopAsyncIteration


class TextWriter:
    """``write``/``flush`` of text through ``send`` (one send per message: a peer that does
    not read is backpressure, never a blocked thread)."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send

    async def write(self, text: str) -> int:
        await self._send(text.encode("utf-8"))
        return len(text)

    async def flush(self) -> None:
        pass
