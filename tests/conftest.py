from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psutil
import pytest
import structlog

from lsp_bridge import LeanClient, LeanInstall, ServerCommand, Timeouts, find_lean


def _test_logging() -> None:
    structlog.reset_defaults()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


_test_logging()


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """Tests that run the CLI reconfigure structlog; put the test setup back afterwards."""
    yield
    _test_logging()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def lean_install() -> LeanInstall:
    return find_lean()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def server_command(lean_install: LeanInstall, project: Path) -> ServerCommand:
    return lean_install.server_command(project)


@pytest.fixture
async def client(server_command: ServerCommand) -> AsyncIterator[LeanClient]:
    async with LeanClient.start(server_command, timeouts=Timeouts(barrier=30)) as c:
        yield c


def compile_module(root: Path, module: str, out_dir: Path) -> Path:
    """Compile ``root/<module>.lean`` (prelude-only) to ``out_dir/<module>.olean``."""
    import subprocess

    lean = find_lean().lean
    olean = out_dir / (module.replace(".", "/") + ".olean")
    olean.parent.mkdir(parents=True, exist_ok=True)
    src = root / (module.replace(".", "/") + ".lean")
    subprocess.run(
        [str(lean), "-R", str(root), "-o", str(olean), str(src)],
        check=True,
        capture_output=True,
        env={**os.environ, "LEAN_PATH": str(out_dir)},
        timeout=60,
    )
    return olean


def lean_processes() -> list[psutil.Process]:
    """Every process of ours running a lean executable (server or worker)."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "name", "cmdline", "ppid"]):
        cmd = proc.info.get("cmdline") or []
        if cmd and Path(cmd[0]).name == "lean" and proc.info["pid"] != me:
            found.append(proc)
    return found


# Server processes kept by module-scoped fixtures: their Lean descendants are expected to live
# on after each test; the fixture checks them at its own teardown.
LONG_LIVED: set[int] = set()


def _owned_by_long_lived(proc: psutil.Process) -> bool:
    try:
        return any(parent.pid in LONG_LIVED for parent in proc.parents())
    except psutil.Error:
        return False


def assert_no_lean_descendants(pid: int) -> None:
    """After a server process ``pid`` has exited: no Lean process it started survives."""
    survivors = [
        p
        for p in lean_processes()
        if p.info.get("ppid") in (pid, 1)
        and p.status() != psutil.STATUS_ZOMBIE
        and "leanrig_slot" in " ".join(p.info.get("cmdline") or [])
    ]
    assert survivors == [], survivors


@pytest.fixture(autouse=True)
def no_stray_lean() -> Iterator[None]:
    """Every test must leave no Lean process behind (ps-verified)."""
    before = {p.pid for p in lean_processes()}
    yield
    deadline_left = 50
    stray: list[psutil.Process] = []
    while deadline_left:
        stray = [
            p
            for p in lean_processes()
            if p.pid not in before
            and p.status() != psutil.STATUS_ZOMBIE
            and not _owned_by_long_lived(p)
        ]
        if not stray:
            return
        deadline_left -= 1
        import time

        time.sleep(0.1)
    for p in stray:
        p.kill()
    raise AssertionError(f"Lean processes outlived the test: {[p.info['cmdline'] for p in stray]}")
