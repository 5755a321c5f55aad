"""Reading and writing one message per line, over any byte stream: `LineReader`, the servers'
one line reader (JSON-RPC reads it directly), and the text lines and writer the MCP SDK's
stdio transport accepts (the process's stdio on file descriptors, no threads, and Unix-socket
connections). The last line may lack its newline."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import anyio
import structlog
from anyio.abc import ByteReceiveStream

log = structlog.get_logger("leanrig.lines")

# The longest MCP message a peer may send (tool arguments are at most ~1 MB of proof text,
# JSON-escaped): a longer line ends its peer's session rather than grow the server.
MAX_MCP_LINE = 64 * 2**20


class LineTooLong(Exception):
    """A line over the limit (``LineReader``)."""


class LineReader:
    """Newline-delimited lines of at most ``limit`` bytes from a byte stream: the one line
    reader of the servers (JSON-RPC reads it directly, MCP through ``TextLines``).

    An oversized line is never buffered whole. With ``skip_oversized`` its bytes are dropped
    as they arrive and `LineTooLong` is raised once its end is seen, so the next call reads the
    next line (JSON-RPC answers it with an error and goes on); without, `LineTooLong` is
    raised as soon as the limit is passed (MCP ends that peer's session).
    """

    def __init__(
        self, stream: ByteReceiveStream, limit: int, *, skip_oversized: bool = True
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._skip = skip_oversized
        self._buf = bytearray()
        self._scanned = 0  # bytes of _buf known to hold no newline
        self._eof = False
        # The stream ended in an error (a connection reset), not a clean end: the peer can
        # read no more replies either.
        self.broken = False

    async def receive_line(self) -> bytes | None:
        """The next line without its newline; None at the end of the stream."""
        skipping = False
        while True:
            end = self._buf.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 1]
                self._scanned = 0
                if skipping or len(line) > self._limit:
                    raise LineTooLong
                return line
            if len(self._buf) > self._limit:
                self._buf.clear()
                if not self._skip:
                    self._scanned = 0
                    raise LineTooLong
                skipping = True
            self._scanned = len(self._buf)
            if self._eof:
                break
            try:
                self._buf += await self._stream.receive()
            except anyio.EndOfStream:
                self._eof = True
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._eof = self.broken = True
        # the end of the stream: a last line without its newline still counts
        line, skipping_last = bytes(self._buf), skipping
        self._buf.clear()
        self._scanned = 0
        if skipping_last:
            raise LineTooLong
        return line or None


class TextLines:
    """Text lines from ``receive``, as the MCP SDK's stdio transport reads them. With
    ``max_line``, a longer line ends the iteration (its peer's session), so one peer cannot
    grow the server unbounded."""

    def __init__(self, receive: ByteReceiveStream, max_line: int | None = None) -> None:
        limit = max_line if max_line is not None else sys.maxsize
        self._lines = LineReader(receive, limit, skip_oversized=False)
        self.last_invalid = False  # the last line was not valid UTF-8

    def __aiter__(self) -> TextLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._lines.receive_line()
        except LineTooLong:
            log.warning("lines.too_long")
            raise StopAsyncIteration from None
        if line is None:
            raise StopAsyncIteration
        try:
            self.last_invalid = False
            return line.decode("utf-8") + "\n"
        except UnicodeDecodeError:
            # As the SDK decodes (replacement characters), and said: a reader that must not
            # serve an altered message (MCP: a body with U+FFFD where bytes were) refuses it.
            self.last_invalid = True
            return line.decode("utf-8", "replace") + "\n"


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
