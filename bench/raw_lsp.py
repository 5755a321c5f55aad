"""The floor: a minimal, blocking, hand-rolled LSP exchange with `lean --server`.

No asyncio, no parsing beyond finding the answer to our own request. Whatever leanrig adds on
top of Lean shows up as the difference to this client, measured in the same run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any

Position = dict[str, int]  # LSP {line, character}
# The goal queries a leanrig step asks: (plainGoal's position, plainTermGoal's), None: not asked.
GoalAsks = tuple[Position | None, Position | None]


def time_alternating_edits(
    argv: list[str],
    cwd: Path,
    bad: str,
    good: str,
    steps: int,
    env: dict[str, str] | None = None,
    ask: GoalAsks | None = None,
) -> list[float]:
    """ms per edit → fully reported version, alternating ``good`` and ``bad`` texts. With
    ``ask`` (goal position, term-goal position, each None if not asked): the same answers a
    leanrig step gets — document symbols and its goal query — asked in the same write as the
    change."""
    raw = RawLean(argv, cwd, env)
    uri = (cwd / "Raw.lean").as_uri()
    try:
        raw.open(uri, bad)
        return raw.alternate(uri, good, bad, steps, ask)
    finally:
        raw.close()


def piped(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], IO[bytes], IO[bytes]]:
    """A process with blocking stdin/stdout pipes (stderr discarded), in its own session."""
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, start_new_session=True, env=env,
    )  # fmt: skip
    assert proc.stdin is not None
    assert proc.stdout is not None
    return proc, proc.stdin, proc.stdout


class RawLean:
    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc, self.stdin, self.stdout = piped(argv, cwd, env)
        self.next_id = 0
        self.version = 0
        try:
            self.request("initialize", {"processId": os.getpid(), "rootUri": cwd.as_uri(),
                                        "capabilities": {},
                                        "initializationOptions": {"editDelay": 1}})  # fmt: skip
            self.notify("initialized", {})
        except BaseException:
            # A server that did not start leaves no process behind (a zombie child of the
            # benchmark's process broke the next test that listed its children).
            self.close()
            raise

    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        self.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.stdin.flush()

    def _read(self) -> dict[str, Any]:
        length = 0
        while True:
            line = self.stdout.readline()
            if not line:
                raise EOFError("lean exited")
            if line == b"\r\n":
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return dict(json.loads(self.stdout.read(length)))

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        rid = self.next_id
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            msg = self._read()
            if msg.get("id") == rid and "method" not in msg:
                return msg.get("result")

    def open(self, uri: str, text: str) -> None:
        self.version = 1
        doc = {"uri": uri, "languageId": "lean4", "version": 1, "text": text}
        self.notify("textDocument/didOpen", {"textDocument": doc})
        self.request("textDocument/waitForDiagnostics", {"uri": uri, "version": 1})

    def change(self, uri: str, text: str, ask: GoalAsks | None = None) -> None:
        """Full-text change, then wait until that version is fully reported (and, with
        ``ask``, for the symbols and goals asked in the same write)."""
        self.version += 1
        doc = {"uri": uri, "version": self.version}
        frames: list[dict[str, Any]] = [{"jsonrpc": "2.0", "method": "textDocument/didChange",
                   "params": {"textDocument": doc, "contentChanges": [{"text": text}]}}]  # fmt: skip
        asks: list[tuple[str, Any]] = [
            ("textDocument/waitForDiagnostics", {"uri": uri, "version": self.version})
        ]
        if ask is not None:
            td = {"uri": uri}
            asks.append(("textDocument/documentSymbol", {"textDocument": td}))
            for method, at in (("$/lean/plainGoal", ask[0]), ("$/lean/plainTermGoal", ask[1])):
                if at is not None:
                    asks.append((method, {"textDocument": td, "position": at}))
        waiting: set[Any] = set()
        for method, params in asks:
            self.next_id += 1
            waiting.add(self.next_id)
            frames.append(
                {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
            )
        data = b""
        for msg in frames:
            body = json.dumps(msg).encode()
            data += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        self.stdin.write(data)
        self.stdin.flush()
        while waiting:
            msg = self._read()
            if "method" not in msg:
                waiting.discard(msg.get("id"))

    def alternate(
        self,
        uri: str,
        good: str,
        bad: str,
        steps: int,
        ask: GoalAsks | None = None,
        idle: float = 0.0,
    ) -> list[float]:
        """ms per edit of the open document ``uri``: ``good``, ``bad``, ``good``, … (``idle``:
        seconds of idle before each)."""
        samples = []
        for i in range(steps):
            if idle:
                time.sleep(idle)
            t = time.perf_counter()
            self.change(uri, good if i % 2 == 0 else bad, ask)
            samples.append((time.perf_counter() - t) * 1000)
        return samples

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.stdin.close()
        self.stdout.close()
