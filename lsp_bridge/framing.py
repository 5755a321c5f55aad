"""LSP base-protocol framing: ``Content-Length`` headers around JSON bodies.

Reads in large chunks and decodes every frame a read completes, without awaiting between them."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import orjson
from anyio import EndOfStream
from anyio.abc import ByteReceiveStream

from .errors import ProtocolError

MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 512 * 1024 * 1024  # Lean can send very large diagnostics/info trees
READ_CHUNK = 256 * 1024  # bytes per read (a pipe holds 64 KiB)


def encode_message(message: dict[str, Any]) -> bytes:
    body = orjson.dumps(message)
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def parse_content_length(header: bytes) -> int:
    """The body length from a header block (without the terminating blank line)."""
    length: int | None = None
    for raw in header.split(b"\r\n"):
        if not raw:
            continue
        name, sep, value = raw.partition(b":")
        if not sep:
            raise ProtocolError(f"malformed LSP header line {raw[:80]!r}")
        if name.strip().lower() == b"content-length":
            try:
                length = int(value.strip())
            except ValueError as exc:
                raise ProtocolError(f"bad Content-Length {value[:40]!r}") from exc
    if length is None:
        raise ProtocolError(f"LSP header without Content-Length: {header[:80]!r}")
    if length < 0 or length > MAX_BODY_BYTES:
        raise ProtocolError(f"Content-Length {length} out of range")
    return length


# Lean's references index (``$/lean/ilean…``), the largest traffic and never read, is dropped
# undecoded; a body with keys in another order is decoded and ignored by the handlers.
_UNREAD_PREFIX = b'{"jsonrpc":"2.0","method":"$/lean/ilean'


def unread_notification(body: bytes) -> bool:
    return body.startswith(_UNREAD_PREFIX)


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"LSP body is not JSON: {body[:80]!r}") from exc
    if not isinstance(message, dict):
        raise ProtocolError(f"LSP body is not a JSON object: {body[:80]!r}")
    return message


class FrameDecoder:
    """Frames from a byte stream fed in arbitrary pieces: ``feed`` returns the completed bodies."""

    __slots__ = ("_buffer", "_length")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None  # the current body's length, once its header is in

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        bodies: list[bytes] = []
        while True:
            if self._length is None:
                end = buffer.find(b"\r\n\r\n", 0, MAX_HEADER_BYTES + 4)
                if end < 0:
                    if len(buffer) >= MAX_HEADER_BYTES + 4:
                        raise ProtocolError("LSP header longer than 8 KiB or unterminated")
                    return bodies
                self._length = parse_content_length(bytes(buffer[:end]))
                del buffer[: end + 4]
            if len(buffer) < self._length:
                return bodies
            bodies.append(bytes(buffer[: self._length]))
            del buffer[: self._length]
            self._length = None

    def end(self) -> None:
        """The stream ended: raises ``ProtocolError`` inside a body (not inside a header)."""
        if self._length is not None:
            raise ProtocolError(f"stream ended inside a {self._length}-byte LSP body")


async def read_frames(
    stream: ByteReceiveStream, chunk: int = READ_CHUNK
) -> AsyncGenerator[bytes, None]:
    """The body of every frame on ``stream``; several per read are yielded without awaiting."""
    decoder = FrameDecoder()
    while True:
        try:
            data = await stream.receive(chunk)
        except EndOfStream:
            decoder.end()
            return
        for body in decoder.feed(data):
            yield body
