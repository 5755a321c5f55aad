"""This process's stdin and stdout as a server's wire, read and written on the event loop.

``claimed_stdio()`` moves the wire to private close-on-exec descriptors, so no child inherits it
and no stray print reaches it; fd 0 then reads the null device and fd 1 writes to stderr."""

from __future__ import annotations

import fcntl
import os
import select
import selectors
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import anyio
import anyio.lowlevel
import structlog
from anyio.abc import ByteReceiveStream

log = structlog.get_logger("leanrig.stdio")

PIPE_CHUNK = 4096  # PIPE_BUF: a write this size on a writable pipe does not block


class FdReceive(ByteReceiveStream):
    """Bytes from a file descriptor on the event loop."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pollable = _pollable(fd, selectors.EVENT_READ)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._pollable:
                await anyio.wait_readable(self._fd)
            else:
                await anyio.lowlevel.checkpoint()  # a regular file never blocks
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        pass


class FdSend:
    """Writes to a file descriptor on the event loop; ``timeout``: seconds to wait for room."""

    def __init__(self, fd: int, timeout: float | None = None) -> None:
        self._fd = fd
        self._timeout = timeout
        self._pollable = _pollable(fd, selectors.EVENT_WRITE)
        self._room = select.poll()
        self._room.register(fd, select.POLLOUT)

    async def __call__(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._pollable and not self._room.poll(0):
                await self._wait_for_room()
            try:
                written = os.write(self._fd, view[:PIPE_CHUNK])
            except BlockingIOError:  # another writer took the room
                await self._wait_for_room()
                continue
            except OSError as exc:  # EPIPE: the reader has gone
                raise anyio.BrokenResourceError from exc
            view = view[written:]

    async def _wait_for_room(self) -> None:
        with anyio.fail_after(self._timeout) if self._timeout is not None else nullcontext():
            await anyio.wait_writable(self._fd)

    def hung_up(self) -> bool:
        """The reading end is closed (a pipe reports POLLERR; a socket POLLHUP)."""
        if not self._pollable:
            return False
        poller = select.poll()
        poller.register(self._fd, 0)
        return any(ev & (select.POLLERR | select.POLLHUP) for _fd, ev in poller.poll(0))


def _pollable(fd: int, events: int) -> bool:
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, events)
        except (PermissionError, ValueError, OSError):  # regular files: epoll says EPERM
            return False
    return True


@contextmanager
def claimed(fd: int, stream: Any, mode: int) -> Iterator[int]:
    """A close-on-exec copy of ``fd`` while ``fd`` is diverted; ``stream`` is flushed at exit."""
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # not open: nothing to claim
        yield fd
        return
    try:
        diversion = _diversion(mode)
    except OSError as exc:
        os.close(private)
        log.warning(
            "stdio.not_claimed", fd=fd, error=str(exc), detail="child processes inherit the wire"
        )
        yield fd
        return
    os.dup2(diversion, fd)
    os.close(diversion)
    try:
        yield private
    finally:
        if fd == 1:
            _flush(stream)  # a stray print's buffered bytes go to stderr, not the wire
        os.dup2(private, fd)
        os.close(private)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def _diversion(mode: int) -> int:
    """The null device for stdin; stderr for stdout, or the null device if stderr is closed."""
    if mode == os.O_RDONLY:
        return os.open(os.devnull, os.O_RDONLY)
    try:
        return os.dup(2)
    except OSError:
        return os.open(os.devnull, os.O_WRONLY)


def _flush(stream: Any) -> None:
    try:
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass


Wire = tuple[int, int]  # the (input, output) descriptors of a claimed stdio


@contextmanager
def claimed_stdio(wire: Wire | None = None) -> Iterator[Wire]:
    """The wire's (input, output) descriptors claimed from fds 0 and 1, or ``wire`` if given."""
    if wire is not None:
        yield wire
        return
    sys.stdout.flush()
    with (
        claimed(0, sys.stdin, os.O_RDONLY) as stdin_fd,
        claimed(1, sys.stdout, os.O_WRONLY) as stdout_fd,
    ):
        yield stdin_fd, stdout_fd
