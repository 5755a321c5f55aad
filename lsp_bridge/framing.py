"""LSP base-protocol framing: ``Content-Length`` headers around JSON bodies. Pure; no I/O.

Two readers: ``FrameDecoder`` takes whatever bytes arrived and returns every frame they
complete (the LSP client's hot path: Lean sends ~10 messages per edit, often several per
read), and ``read_message`` reads one frame from an anyio ``BufferedByteReceiveStream`` with
two bounded calls (header up to the blank line, then exactly the body).
"""

from __future__ import annotations

from typing import Any

import orjson
from anyio.streams.buffered import BufferedByteReceiveStream

from .errors import ProtocolError

MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 512 * 1024 * 1024  # Lean can send very large diagnostics/info trees


def encode_message(message: dict[str, Any]) -> bytes:
    """One framed LSP message."""
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


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"LSP body is not JSON: {body[:80]!r}") from exc
    if not isinstance(message, dict):
        raise ProtocolError(f"LSP body is not a JSON object: {body[:80]!r}")
    return message


class FrameDecoder:
    """Frames from a byte stream fed in arbitrary pieces: ``feed`` returns the bodies of the
    frames completed so far, in order. The same rules as ``read_message``: a header ends
    within ``MAX_HEADER_BYTES``, a body is at most ``MAX_BODY_BYTES``."""

    __slots__ = ("_buffer", "_length")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None  # the current frame's body length, once its header is in

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
        """The stream ended: an unfinished body is a protocol error (an unfinished header is
        an end like any other, as in ``read_message``)."""
        if self._length is not None:
            raise ProtocolError(f"stream ended inside a {self._length}-byte LSP body")


async def read_message(stream: BufferedByteReceiveStream) -> dict[str, Any]:
    """Read one framed message; raises ``anyio.EndOfStream`` at a clean end of input."""
    from anyio import DelimiterNotFound, IncompleteRead

    try:
        header = await stream.receive_until(b"\r\n\r\n", MAX_HEADER_BYTES)
    except DelimiterNotFound as exc:
        raise ProtocolError("LSP header longer than 8 KiB or unterminated") from exc
    except IncompleteRead as exc:
        # The peer closed mid-header: the same as an end of stream for the caller.
        from anyio import EndOfStream

        raise EndOfStream from exc
    length = parse_content_length(header)
    try:
        body = await stream.receive_exactly(length)
    except IncompleteRead as exc:
        raise ProtocolError(f"stream ended inside a {length}-byte LSP body") from exc
    return decode_body(body)
