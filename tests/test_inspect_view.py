"""An exported run served by `inspect view` in headless Chromium over the DevTools protocol: the
page lists the samples, and a click opens a transcript showing `set_proof`. Polled, because the
viewer fetches the log after the page loads."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from .conftest import stray_guard
from .test_as_typed import DEMO, SUITE, leanrig, leanrig_exe

pytestmark = pytest.mark.inspect
ROOT = Path(__file__).resolve().parent.parent
PROOFS: dict[str, str] = json.loads((ROOT / "tests" / "demo_reference_proofs.json").read_text())
TASKS = ("and_swap", "refl_z", "eq_symm")
WAIT = 30.0  # each wait's deadline, seconds


def chromium_or_skip() -> str:
    pytest.importorskip(
        "inspect_ai",
        reason="the `inspect` extra is not installed "
        "(pip install -e '.[inspect]'; `make setup` installs it)",
    )
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip(
            "chromium is not installed (Debian's `chromium`: "
            "scripts/install-chromium.sh, which `make setup` runs)"
        )
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A background process in its own session; its group gets SIGTERM, then SIGKILL, at exit."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            with suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                process.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue


class Page:
    """One Chromium tab over the DevTools protocol (aiohttp's websocket client)."""

    def __init__(self, ws: Any) -> None:
        self.ws, self.n = ws, 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.n += 1
        await self.ws.send_json({"id": self.n, "method": method, "params": params})
        async with asyncio.timeout(WAIT):
            async for message in self.ws:
                answer = json.loads(message.data)
                if answer.get("id") == self.n:
                    assert "error" not in answer, answer
                    return dict(answer.get("result", {}))
        raise AssertionError(f"the browser closed during {method}")

    async def value(self, expression: str) -> Any:
        done = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return done["result"].get("value")

    async def text_with(self, *words: str, seconds: float = WAIT) -> str:
        """The page's text once it holds every one of ``words`` (or after ``seconds``)."""
        deadline = time.monotonic() + seconds
        while True:
            text = str(await self.value("document.body.innerText"))
            if all(w in text for w in words) or time.monotonic() > deadline:
                return text
            await asyncio.sleep(0.25)

    async def click_text(self, text: str) -> None:
        """A real mouse click on the element whose whole text is ``text``."""
        at = await self.value(
            "(() => { const e = [...document.querySelectorAll('body *')].find(e => "
            f"e.children.length === 0 && e.textContent.trim() === {json.dumps(text)});"
            " if (!e) return null; const b = e.getBoundingClientRect();"
            " return [b.x + b.width / 2, b.y + b.height / 2]; })()"
        )
        assert at is not None, f"nothing on the page reads {text!r}"
        for kind in ("mousePressed", "mouseReleased"):
            await self.call(
                "Input.dispatchMouseEvent", type=kind, x=at[0], y=at[1], button="left", clickCount=1
            )


async def browse(chromium: str, url: str) -> tuple[str, str, bytes]:
    """The list page's text, then the first task's sample text and PNG screenshot."""
    import aiohttp

    profile = Path(tempfile.mkdtemp(prefix="leanrig-chromium-"))
    argv = [
        chromium,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        "--window-size=1400,900",
        "about:blank",
    ]
    try:
        # Chromium's own temporary files go in the profile too, which is removed after.
        with running(argv, profile, {**os.environ, "TMPDIR": str(profile)}):
            active = profile / "DevToolsActivePort"  # Chromium writes its port here
            deadline = time.monotonic() + WAIT
            while not (active.is_file() and active.read_text().strip()):
                assert time.monotonic() < deadline, "chromium did not open its DevTools port"
                await asyncio.sleep(0.1)
            port = active.read_text().split()[0]
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WAIT)) as s:
                async with s.get(f"http://127.0.0.1:{port}/json/list") as r:
                    tabs = await r.json()
                ws_url = next(t["webSocketDebuggerUrl"] for t in tabs if t["type"] == "page")
                async with s.ws_connect(ws_url, max_msg_size=0) as ws:
                    page = Page(ws)
                    await page.call("Page.enable")
                    await page.call("Page.navigate", url=url)
                    listed = await page.text_with(*TASKS)
                    opened, deadline = f"Sample {TASKS[0]}", time.monotonic() + WAIT
                    # A busy machine shows the rows before they take clicks: click until it opens.
                    while True:
                        await page.click_text(TASKS[0])
                        if opened in await page.text_with(opened, seconds=3):
                            break
                        assert time.monotonic() < deadline, f"{opened!r} never opened"
                    sample = await page.text_with("set_proof")
                    png = await page.call("Page.captureScreenshot", format="png")
                    shot = base64.b64decode(png["data"])
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return listed, sample, shot


def test_inspect_view_lists_the_samples_and_a_transcript_shows_set_proof(tmp_path: Path) -> None:
    chromium = chromium_or_skip()
    cwd = tmp_path
    shutil.copytree(DEMO, cwd / SUITE)
    plan = {
        "tasks": {
            t: [
                {"tool": "open_task", "args": {"task_id": "{task}"}},
                {"tool": "set_proof", "args": {"session_id": "{session}", "body": PROOFS[t]}},
                {"tool": "check_proof", "args": {"session_id": "{session}"}},
            ]
            for t in TASKS
        }
    }
    (cwd / "plan.json").write_text(json.dumps(plan))
    agent = f"{leanrig_exe()} agent scripted --plan {cwd / 'plan.json'} --mcp-config {{mcp_config}}"
    with stray_guard():
        done = leanrig(
            "run",
            "--suite",
            SUITE,
            "--agent",
            agent,
            "--model",
            "none",
            "--agent-tool",
            "leanrig agent scripted",
            "--tasks",
            ",".join(TASKS),
            "--time-limit",
            "120",
            "--parallel",
            "3",
            "--quiet",
            "--out",
            "runs/demo",
            cwd=cwd,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    done = leanrig("export", "inspect", "runs/demo", "--out", "logs/demo.eval", cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]

    port = free_port()
    view = [
        str(leanrig_exe().parent / "inspect"),
        "view",
        "--log-dir",
        "logs",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with running(view, cwd):
        deadline = time.monotonic() + WAIT
        while True:  # served once its log API answers
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "inspect view did not start listening"
                time.sleep(0.2)
        listed, sample, shot = asyncio.run(browse(chromium, f"http://127.0.0.1:{port}/"))
    assert "Loading" not in listed and "3 samples" in listed, listed[:2000]
    for task in TASKS:
        assert task in listed, listed[:2000]
    assert f"Sample {TASKS[0]}" in sample and "set_proof" in sample, sample[:3000]
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
