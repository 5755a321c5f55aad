"""`leanrig lsp` as an editor starts it: a byte relay to the supervisor in a session of its own.

Copies bytes both ways and passes SIGTERM/SIGINT on. Must not parse frames, touch the run
directory or kill the supervisor; it imports little, as the editor waits for it."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Sequence
from subprocess import PIPE

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from ..servers import FdReceive, FdSend, stop_signals

Wire = tuple[int, int]  # the editor's (input, output) descriptors

DRAIN_SECONDS = 5.0  # for the supervisor's last output, after it exits


async def relay(argv: Sequence[str], wire: Wire) -> int:
    """Relay ``wire`` to the supervisor ``argv`` in a new session until it exits; its exit code."""
    editor_in, editor_out = wire
    process = await anyio.open_process(
        list(argv), stdin=PIPE, stdout=PIPE, stderr=PIPE, start_new_session=True
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    with stop_signals() as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pass_signals, signals, process)
            tg.start_soon(_to_supervisor, FdReceive(editor_in), process.stdin)
            output_done, stderr_done = anyio.Event(), anyio.Event()
            tg.start_soon(_from_supervisor, process.stdout, FdSend(editor_out), output_done)
            tg.start_soon(_from_supervisor, process.stderr, FdSend(2), stderr_done)
            await process.wait()
            with anyio.move_on_after(DRAIN_SECONDS):
                await output_done.wait()
                await stderr_done.wait()
            tg.cancel_scope.cancel()
    code = process.returncode
    return code if code is not None and code >= 0 else 1


async def _pass_signals(signals: AsyncIterator[signal.Signals], process: Process) -> None:
    async for signum in signals:
        if process.returncode is None:
            try:
                process.send_signal(signum)
            except ProcessLookupError:
                return


async def _to_supervisor(editor: ByteReceiveStream, stdin: ByteSendStream) -> None:
    """Copy the editor's bytes to the supervisor; closing its input tells it the editor left."""
    try:
        while True:
            data = await editor.receive()
            await stdin.send(data)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        with anyio.CancelScope(shield=True):
            await stdin.aclose()


async def _from_supervisor(stream: ByteReceiveStream, send: FdSend, done: anyio.Event) -> None:
    """Copy the supervisor's bytes to the editor; once the editor is gone, drain and drop them."""
    reader_gone = False
    try:
        async for data in stream:
            if reader_gone:
                continue
            try:
                await send(data)
            except anyio.BrokenResourceError:
                reader_gone = True
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        done.set()
