"""LSP base-protocol framing: ``Content-Length`` headers around JSON bodies. Pure; no I/O.

The reader side works on an anyio ``BufferedByteReceiveStream`` so a frame is read with two
bounded calls (header up to the blank line, then exactly the body).
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
