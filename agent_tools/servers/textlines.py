"""Reading and writing one message per line over any byte stream, on anyio's buffered reader
(`BufferedByteReceiveStream.receive_until`): `receive_line`, the servers' one line read
(JSON-RPC uses it directly), and the text lines and writer the MCP server's line streams use
(the process's stdio on file descriptors, no threads, and Unix-socket connections). The last
line may lack its newline."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import anyio
import structlog
from anyio.abc import ByteReceiveStream
from anyio.streams.buffered import BufferedByteReceiveStream

from lsp_bridge import TRACE_EVENT, LeanrigError

log = structlog.get_logger("leanrig.lines")

# The longest MCP message a peer may send (tool arguments are at most ~1 MB of proof text,
# JSON-escaped): a longer line ends its peer's session rather than grow the server.
MAX_MCP_LINE = 64 * 2**20


class LineTooLong(LeanrigError):
    """A line over the limit (``receive_line``)."""

    hint = "send shorter messages: one JSON message per line, within the wire's limit"

    def __init__(self, message: str = "a line over the wire's limit") -> None:
        super().__init__(message)


async def receive_line(
    stream: BufferedByteReceiveStream, limit: int, *, skip_oversized: bool = True
) -> bytes | None:
    """The next line of ``stream`` without its newline; None at the end of the stream (a
    stream that fails, e.g. a reset connection, raises as its ``receive`` does).

    A line over ``limit`` bytes is never buffered whole: `LineTooLong` is raised — with
    ``skip_oversized`` once its end has been read (its bytes dropped as they arrive), so the
    next call reads the next line (JSON-RPC answers it with an error and goes on); without,
    as soon as the limit is passed (MCP ends that peer's session)."""
    too_long = False
    while True:
        try:
            # (anyio's limit counts the bytes buffered: one more than a line may have)
            line = await stream.receive_until(b"\n", limit + 1)
        except anyio.DelimiterNotFound:
            if not skip_oversized:
                raise LineTooLong from None
            too_long = True
            await stream.receive(len(stream.buffer))  # dropped: only its end is awaited
            continue
        except anyio.IncompleteRead:  # the end of the stream: a last line without newline
            line = stream.buffer
            if line:
                await stream.receive(len(line))
            if too_long or len(line) > limit:
                raise LineTooLong from None
            return line or None
        # (a line over the limit whose newline came in the same read is returned whole)
        if too_long or len(line) > limit:
            raise LineTooLong
        return line


class TextLines:
    """Text lines from ``receive``, for the MCP server's line stream. With ``max_line``, a
    longer line ends the iteration (its peer's session), so one peer cannot grow the server
    unbounded."""

    def __init__(self, receive: ByteReceiveStream, max_line: int | None = None) -> None:
        self._stream = BufferedByteReceiveStream(receive)
        self._limit = max_line if max_line is not None else sys.maxsize
        self.last_invalid = False  # the last line was not valid UTF-8

    def __aiter__(self) -> TextLines:
        return self

    async def __anext__(self) -> str:
        try:
            line = await receive_line(self._stream, self._limit, skip_oversized=False)
        except LineTooLong:
            log.warning("lines.too_long")
            raise StopAsyncIteration from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            line = None  # (the peer reset its end: no more input)
        if line is None:
            raise StopAsyncIteration
        sys.audit(TRACE_EVENT, "line read")
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
        sys.audit(TRACE_EVENT, "reply write")
        await self._send(text.encode("utf-8"))
        return len(text)

    async def flush(self) -> None:
        pass
