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


def time_alternating_edits(
    argv: list[str], cwd: Path, bad: str, good: str, steps: int, env: dict[str, str] | None = None
) -> list[float]:
    """ms per edit → fully reported version, alternating ``good`` and ``bad`` texts."""
    raw = RawLean(argv, cwd, env)
    uri = (cwd / "Raw.lean").as_uri()
    try:
        raw.open(uri, bad)
        samples = []
        for i in range(steps):
            t = time.perf_counter()
            raw.change(uri, good if i % 2 == 0 else bad)
            samples.append((time.perf_counter() - t) * 1000)
        return samples
    finally:
        raw.close()


class RawLean:
    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True, env=env,
        )  # fmt: skip
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self.next_id = 0
        self.version = 0
        self.request("initialize", {"processId": os.getpid(), "rootUri": cwd.as_uri(),
                                    "capabilities": {},
                                    "initializationOptions": {"editDelay": 1}})  # fmt: skip
        self.notify("initialized", {})

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

    def change(self, uri: str, text: str) -> None:
        """Full-text change, then wait until that version is fully reported."""
        self.version += 1
        doc = {"uri": uri, "version": self.version}
        self.notify(
            "textDocument/didChange", {"textDocument": doc, "contentChanges": [{"text": text}]}
        )
        self.request("textDocument/waitForDiagnostics", {"uri": uri, "version": self.version})

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.stdin.close()
        self.stdout.close()
