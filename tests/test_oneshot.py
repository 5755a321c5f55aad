"""repl_pool.oneshot.one_shot: the output a caller parses is complete, under one deadline."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from lsp_bridge import find_lean
from repl_pool import base_env, one_shot

from .conftest import process_gone
from .lean_snippets import PRELUDE

pytestmark = pytest.mark.anyio

BIG = 4_000_000  # far over a pipe buffer (64 KiB)

# The process exits at once while a child it started still writes the answer (as a wrapper's
# child would): the output ends at EOF, not at the exit.
WRITER_OUTLIVES_LEADER = f"""
import os, sys
if os.fork() == 0:
    sys.stdout.write("x" * {BIG} + "END")
    sys.stdout.flush()
    os._exit(0)
os._exit(0)
"""

# A child keeps the pipe open and never writes or exits.
HOLDER_OUTLIVES_LEADER = """
import os, sys, time
if os.fork() == 0:
    sys.stdout.write(str(os.getpid()) + "\\n")
    sys.stdout.flush()
    time.sleep(600)
os._exit(0)
"""


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_large_output_is_read_to_the_end_not_cut_at_exit(tmp_path: Path) -> None:
    result = await one_shot(
        [sys.executable, "-c", WRITER_OUTLIVES_LEADER], cwd=tmp_path, env=base_env(), timeout=60
    )
    assert result.returncode == 0
    assert len(result.stdout) == BIG + 3 and result.stdout.endswith("END")


async def test_a_large_lean_answer_is_read_completely(tmp_path: Path) -> None:
    count = 3000  # messages, well over a pipe buffer
    source = tmp_path / "Many.lean"
    source.write_text(PRELUDE + "".join(f"#check @Eq.refl -- {i}\n" for i in range(count)))
    result = await one_shot(
        [str(find_lean().lean), str(source)], cwd=tmp_path, env=base_env(), timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("@Eq.refl") == count


async def test_output_not_finished_by_the_deadline_is_a_timeout_and_its_tree_dies(
    tmp_path: Path,
) -> None:
    result = await one_shot(
        [sys.executable, "-c", HOLDER_OUTLIVES_LEADER], cwd=tmp_path, env=base_env(), timeout=2
    )
    assert result.timed_out and result.returncode is None
    holder = int(result.stdout.split()[0])
    with anyio.fail_after(5):  # killed with the tree; init reaps it
        while not process_gone(holder):
            await anyio.sleep(0.02)


# Run in a fresh interpreter whose stdin is a pipe, as `leanrig lsp`'s is (the editor's wire).
STDIN_OF_A_ONE_SHOT_CHILD = """
import os, sys, anyio
from pathlib import Path
from repl_pool.oneshot import base_env, one_shot
r, w = os.pipe()
os.dup2(r, 0)
done = anyio.run(lambda: one_shot(["readlink", "/proc/self/fd/0"], cwd=Path.cwd(),
                                  env=base_env(), timeout=30.0))
print(done.stdout.strip())
"""


def test_a_one_shot_child_never_gets_our_stdin(tmp_path: Path) -> None:
    """A one-shot child reads the null device, not our stdin (possibly a client's wire)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", STDIN_OF_A_ONE_SHOT_CHILD],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "/dev/null"
