"""Faults: malformed frames (a FAKE peer, the only way to produce them), bad input, bad Lean."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from lsp_bridge import (
    DocumentError,
    LeanClient,
    LeanNotFound,
    ServerCommand,
    ServerDied,
    ServerStartFailed,
    Timeouts,
    find_lean,
)
from lsp_bridge.errors import ProtocolError
from lsp_bridge.framing import encode_message, parse_content_length

pytestmark = pytest.mark.anyio

FAKE = Path(__file__).with_name("fake_lsp_peer.py")


def fake_command(mode: str, cwd: Path) -> ServerCommand:
    return ServerCommand(argv=(sys.executable, str(FAKE), mode), cwd=cwd)


@pytest.mark.parametrize("mode", ["bad-json", "no-length", "truncated", "huge-header"])
async def test_malformed_frames_from_a_fake_peer_fail_typed_without_hanging(
    mode: str, tmp_path: Path
) -> None:
    async with LeanClient.start(fake_command(mode, tmp_path)) as client:
        with anyio.fail_after(5), pytest.raises(ServerDied) as info:
            await client.transport.request("anything", {}, timeout=3)
        assert not client.alive
    assert "protocol error" in str(info.value) or "exited" in str(info.value)


async def test_server_requests_and_stale_answers_are_handled(tmp_path: Path) -> None:
    async with LeanClient.start(fake_command("out-of-order", tmp_path)) as client:
        with anyio.fail_after(5):
            result = await client.transport.request("ping", {}, timeout=3)
        assert result == {"echo": "ping"}


async def test_a_real_lean_dying_at_start_names_the_cause(tmp_path: Path) -> None:
    # The real Lean, given an option it rejects, exits before answering `initialize`.
    lean = find_lean().lean
    cmd = ServerCommand(argv=(str(lean), "--server", "--no-such-flag"), cwd=tmp_path)
    with anyio.fail_after(10), pytest.raises(ServerStartFailed) as info:
        async with LeanClient.start(cmd):
            pass
    assert info.value.returncode not in (None, 0)
    assert "no-such-flag" in info.value.stderr_tail


async def test_a_server_that_never_answers_initialize_times_out(tmp_path: Path) -> None:
    with anyio.fail_after(10), pytest.raises(ServerStartFailed):
        async with LeanClient.start(fake_command("silent", tmp_path), timeouts=Timeouts(spawn=0.5)):
            pass


async def test_a_missing_executable_is_a_typed_error(tmp_path: Path) -> None:
    cmd = ServerCommand(argv=(str(tmp_path / "no-such-lean"), "--server"), cwd=tmp_path)
    with pytest.raises(ServerDied, match="cannot start"):
        async with LeanClient.start(cmd):
            pass


async def test_missing_and_non_utf8_files_are_rejected_with_the_cause(
    client: LeanClient, project: Path
) -> None:
    with pytest.raises(DocumentError, match="no such file"):
        await client.open_file(project / "Missing.lean")
    bad = project / "Bad.lean"
    bad.write_bytes(b"prelude\ndef x := \xff\xfe\n")
    with pytest.raises(DocumentError, match="not UTF-8"):
        await client.open_file(bad)


def test_a_wrong_lean_setting_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LEANRIG_LEAN", str(tmp_path / "nope"))
    with pytest.raises(LeanNotFound, match="does not exist"):
        find_lean()
    fake = tmp_path / "lean"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    monkeypatch.setenv("LEANRIG_LEAN", str(fake))
    with pytest.raises(LeanNotFound, match="unexpected"):
        find_lean()


def test_framing_round_trip_and_bad_headers() -> None:
    frame = encode_message({"jsonrpc": "2.0", "id": 1, "result": "𝔽"})
    header, _, body = frame.partition(b"\r\n\r\n")
    assert parse_content_length(header) == len(body)
    with pytest.raises(ProtocolError):
        parse_content_length(b"Content-Length: -1")
    with pytest.raises(ProtocolError):
        parse_content_length(b"garbage")
