"""`leanrig lsp` as an editor starts it: a byte relay between the editor's stdio and the process
that serves the attempt (``leanrig lsp --supervised``, the supervisor), which runs in a session
of its own.

Why two processes: what an editor does to its server at exit must not reach the attempt's
records. lsp-mode sends `shutdown`, `exit`, then SIGKILLs the server's process group; an editor
may crash, or be killed itself. The supervisor is outside the editor's reach (its own session
and process group); when the relay's side goes away — the editor closes the pipe, or the relay
dies — the supervisor reads the end of its input and finishes the attempt as for an editor that
left: the closing verdict, the ledger's close, the results line (agent_tools/editor/lsp.py).

Responsibilities, and nothing else: copy the editor's input to the supervisor and the
supervisor's output and stderr back, unchanged; pass SIGTERM and SIGINT on to the supervisor
(an editor's polite stop: it then finishes and exits); exit with the supervisor's exit code
once it has exited. It must not parse frames, read or write the run directory, or kill the
supervisor: only the supervisor ends the attempt. It imports little: the editor waits for
its start before the server answers.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Sequence
from subprocess import PIPE

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from ..servers import FdReceive, FdSend, stop_signals

Wire = tuple[int, int]  # the editor's (input, output) descriptors

# After the supervisor exits: how long its last output may take to reach the editor.
DRAIN_SECONDS = 5.0


async def relay(argv: Sequence[str], wire: Wire) -> int:
    """Start the supervisor ``argv`` in a new session and relay ``wire`` (the editor's input and
    output descriptors) to it until it exits; returns its exit code."""
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
            except ProcessLookupError:  # exited meanwhile: nothing left to stop
                return


async def _to_supervisor(editor: ByteReceiveStream, stdin: ByteSendStream) -> None:
    """The editor's bytes to the supervisor; at their end (or the supervisor's), its input
    closes: for the supervisor, the editor has left."""
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
    """The supervisor's bytes to the editor until the supervisor closes the stream; once the
    editor stops reading (its end closed) the rest is read and dropped, so the supervisor never
    blocks on a full pipe."""
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
