"""Server-sent events framed from a byte stream fed in chunks; a lone `\\r` is no line end here.

Hand-written: the proxy must see the bytes as they pass, which available parsers do not allow.
Must not interpret an event or hold more than one (over `max_event` bytes is dropped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

_BOM: Final = b"\xef\xbb\xbf"


class SseEvents:
    """Calls ``on_event(name, payload)`` for each whole event, ``notes(text)`` for each drop."""

    __slots__ = (
        "_data",
        "_data_size",
        "_dropping_event",
        "_event",
        "_first_line",
        "_max_event",
        "_notes",
        "_on_event",
        "_skipping_line",
        "_tail",
    )

    def __init__(
        self,
        on_event: Callable[[bytes, bytes], None],
        notes: Callable[[str], None],
        max_event: int,
    ) -> None:
        self._on_event = on_event
        self._notes = notes
        self._max_event = max_event
        self._tail = bytearray()  # the unfinished line
        self._skipping_line = False
        self._first_line = True
        self._event: bytes = b""  # the event being assembled
        self._data: list[bytes] = []
        self._data_size = 0
        self._dropping_event = False

    def feed(self, chunk: bytes, start: int = 0) -> None:
        self._feed_sse(chunk, start)

    def finish(self) -> None:
        """The stream ended: read its unfinished line and event as if terminated."""
        if self._tail and not self._skipping_line:
            self._line(bytes(self._tail))
        elif self._skipping_line:
            self._dropping_event = True
        self._tail.clear()
        self._dispatch()

    def _feed_sse(self, chunk: bytes, start: int) -> None:
        end = len(chunk)
        while start < end:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                self._keep_tail(chunk, start, end)
                return
            if self._skipping_line:
                self._skipping_line = False
            elif self._tail:
                self._tail += chunk[start:nl]
                line = bytes(self._tail)
                self._tail.clear()
                self._line(line)
            else:
                self._line(chunk[start:nl])
            start = nl + 1

    def _keep_tail(self, chunk: bytes, start: int, end: int) -> None:
        if self._skipping_line:
            return
        if len(self._tail) + (end - start) > self._max_event:
            self._drop_line()
            self._tail.clear()
            self._skipping_line = True
            return
        self._tail += chunk[start:end]

    def _drop_line(self) -> None:
        self._notes(f"an SSE line over {self._max_event} bytes was dropped, and its event")
        self._first_line = False
        self._dropping_event = True

    def _line(self, line: bytes) -> None:
        if len(line) > self._max_event:
            self._drop_line()
            return
        if line.endswith(b"\r"):
            line = line[:-1]
        if self._first_line:
            self._first_line = False
            if line.startswith(_BOM):
                line = line[3:]
        if not line:
            self._dispatch()
            return
        if line[0] == 0x3A:  # ":" a comment
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1 :]
            if value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            if self._dropping_event:
                return
            self._data_size += len(value) + 1
            if self._data_size > self._max_event:
                self._notes(f"an SSE event over {self._max_event} bytes was dropped")
                self._data.clear()
                self._dropping_event = True
                return
            self._data.append(value)
        elif name == b"event":
            self._event = value

    def _dispatch(self) -> None:
        data = self._data
        name = self._event
        dropped = self._dropping_event
        self._data = []
        self._data_size = 0
        self._event = b""
        self._dropping_event = False
        if dropped or not data:
            return
        self._on_event(name, data[0] if len(data) == 1 else b"\n".join(data))
