"""One message per line over a byte stream; the last line may lack its newline."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

import anyio
import structlog
from anyio.abc import ByteReceiveStream
from anyio.streams.buffered import BufferedByteReceiveStream

from lsp_bridge import TRACE_EVENT, LeanrigError

log = structlog.get_logger("leanrig.lines")

# Bytes of the longest MCP line a peer may send; a longer one ends its session.
MAX_MCP_LINE = 64 * 2**20


class LineTooLong(LeanrigError):
    hint = "send shorter messages: one JSON message per line, within the wire's limit"

    def __init__(self, message: str = "a line over the wire's limit") -> None:
        super().__init__(message)


async def receive_line(
    stream: BufferedByteReceiveStream, limit: int, *, skip_oversized: bool = True
) -> bytes | None:
    """The next line of ``stream`` without its newline, or None at the end of the stream.

    A line over ``limit`` bytes raises `LineTooLong`; ``skip_oversized`` first skips to its end."""
    too_long = False
    while True:
        try:
            # anyio's limit counts buffered bytes, newline included.
            line = await stream.receive_until(b"\n", limit + 1)
        except anyio.DelimiterNotFound:
            if not skip_oversized:
                raise LineTooLong from None
            too_long = True
            await stream.receive(len(stream.buffer))
            continue
        except anyio.IncompleteRead:
            line = stream.buffer
            if line:
                await stream.receive(len(line))
            if too_long or len(line) > limit:
                raise LineTooLong from None
            return line or None
        if too_long or len(line) > limit:
            raise LineTooLong
        return line


class TextLines:
    """Text lines from ``receive``; a line over ``max_line`` bytes ends the iteration."""

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
            line = None  # the peer reset its end
        if line is None:
            raise StopAsyncIteration
        sys.audit(TRACE_EVENT, "line read")
        try:
            self.last_invalid = False
            return line.decode("utf-8") + "\n"
        except UnicodeDecodeError:
            # Decoded as the SDK does, but flagged: a reader may refuse an altered message.
            self.last_invalid = True
            return line.decode("utf-8", "replace") + "\n"


class TextWriter:
    """``write``/``flush`` of text through ``send``, one send per message."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send

    async def write(self, text: str) -> int:
        sys.audit(TRACE_EVENT, "reply write")
        await self._send(text.encode("utf-8"))
        return len(text)

    async def flush(self) -> None:
        pass
