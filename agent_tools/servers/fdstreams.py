"""This process's stdin and stdout as a server's wire (MCP, JSON-RPC, the editor's LSP), read
and written on the event loop: no thread per read or write.

``claimed_stdio()`` takes the wire off fds 0 and 1 for a whole command (the CLI claims it before
anything starts a process): the wire moves to private close-on-exec copies; fd 0 then reads the
null device and fd 1 goes to stderr. So
- no child inherits the wire: not Lean, not bwrap, not the verifier's one-shot runs, where a
  submission's ``#eval`` could otherwise read (steal) the client's next message;
- nothing printed to stdout by a library lands in the protocol (what such a print left in
  ``sys.stdout``'s buffer is flushed to stderr before the wire is given back): Ray's driver,
  for one, prints raylet messages to stdout from its threads when a node dies;
- no child shares the wire's file status flags. They belong to the open file description:
  libuv (uvloop) makes fds 0-2 blocking in every child it spawns, and a blocking stdin stalled
  `leanrig lsp`'s whole loop in a read (tests/test_as_typed_editor.py). The flags are restored
  on exit (uvloop's watchers set ``O_NONBLOCK``; a terminal would keep it).

``FdReceive`` waits until the descriptor is readable and then reads what is there; ``FdSend``
writes at most ``PIPE_BUF`` bytes at a time, each once the pipe has room (checked without a loop
iteration when it has), and a writer that waits for room waits at most ``timeout``. Neither
relies on ``O_NONBLOCK`` either way: a read or write that would block waits again.
"""

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
                await anyio.wait_readable(self._fd)  # then a read returns what is there, at once
            else:
                await anyio.lowlevel.checkpoint()  # a regular file never blocks
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                continue  # readable, then not (a spurious wakeup): wait again
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        pass


class FdSend:
    """Writes to a file descriptor on the event loop: a reader that does not read is
    backpressure (this waits, cancellably, at most ``timeout`` seconds per chunk when given:
    then ``TimeoutError``), never a blocked thread."""

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
            except BlockingIOError:  # room, then not (another writer): wait for it
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
    """A private close-on-exec copy of ``fd`` for the wire while ``fd`` itself points at the
    null device (stdin) or stderr (stdout); restored on exit. ``stream``: the Python stream on
    ``fd``, flushed (to stderr) before the wire is given back."""
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:  # not open: nothing to claim (and nothing a child could inherit)
        yield fd
        return
    try:
        diversion = _diversion(mode)
    except OSError as exc:
        os.close(private)
        log.warning("stdio.not_claimed", fd=fd, error=str(exc),
                    detail="child processes inherit the wire")  # fmt: skip
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
    """What fd 0 (the null device) or fd 1 (stderr; the null device if stderr is closed)
    points at while the wire is claimed."""
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
    """The wire's (input, output) descriptors, claimed from fds 0 and 1 (see the module); a
    ``wire`` the caller already claimed is used as it is."""
    if wire is not None:
        yield wire
        return
    sys.stdout.flush()
    with (
        claimed(0, sys.stdin, os.O_RDONLY) as stdin_fd,
        claimed(1, sys.stdout, os.O_WRONLY) as stdout_fd,
    ):
        yield stdin_fd, stdout_fd
