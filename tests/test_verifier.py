"""The verifier (fresh sandboxed Lean per check) on the exploit corpus and on valid proofs."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import psutil
import pytest

from agent_tools.tasks import Limits, Suite, library_dir, load_suite
from agent_tools.verdict import Verifier, forbidden_constructs
from lsp_bridge import find_lean
from repl_pool.sandbox import SandboxPolicy, available, wrapper

from .exploits import CORPUS

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent
ROOT = HERE.parent
EXPLOITS = load_suite(HERE / "fixtures" / "exploit_suite")
DEMO = load_suite(ROOT / "lean_project" / "suites" / "demo")
REFS: dict[str, str] = json.loads((HERE / "demo_reference_proofs.json").read_text("utf-8"))


def verifier_for(suite: Suite, **limits: float) -> Verifier:
    install = find_lean()
    if limits:
        spec = suite.spec.model_copy(
            update={"limits": Limits(**{**suite.spec.limits.model_dump(), **limits})}
        )
        suite = dataclasses.replace(suite, spec=spec)
    return Verifier(suite, install, library=library_dir(suite, install))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def exploit_verifier() -> Verifier:
    return verifier_for(EXPLOITS)


@pytest.mark.parametrize(("name", "task_id", "build", "reason"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_the_exploit_corpus_is_rejected_with_the_right_reason(
    exploit_verifier: Verifier, name: str, task_id: str, build: object, reason: str
) -> None:
    task = EXPLOITS.task(task_id)
    assert callable(build)
    submission = build(task.text, task.body)
    verdict = await exploit_verifier.verify(task, submission)
    assert not verdict.accepted
    assert any(reason in r for r in verdict.reasons), verdict.reasons


async def test_a_valid_proof_is_accepted_with_its_axioms(exploit_verifier: Verifier) -> None:
    task = EXPLOITS.task("true")
    verdict = await exploit_verifier.verify(task, task.text.replace(task.body, "\n  True.intro"))
    assert verdict.accepted, verdict.reasons
    assert verdict.axioms == ()
    assert verdict.lean_version == "4.35.0"
    assert set(verdict.to_json()) >= {"accepted", "reasons", "axioms", "elapsed_ms", "lean_version"}


async def test_a_target_proved_beside_an_unproved_helper_is_accepted(
    exploit_verifier: Verifier,
) -> None:
    task = EXPLOITS.task("helper")
    verdict = await exploit_verifier.verify(task, task.with_body("\n  True.intro"))
    assert verdict.accepted, verdict.reasons


@pytest.mark.parametrize("task_id", sorted(REFS))
async def test_every_demo_reference_proof_is_accepted(task_id: str) -> None:
    task = DEMO.task(task_id)
    verdict = await verifier_for(DEMO).verify(task, task.with_body("\n  " + REFS[task_id]))
    assert verdict.accepted, verdict.reasons


async def test_an_expensive_elaboration_is_rejected_as_timeout() -> None:
    task = EXPLOITS.task("true")
    verifier = verifier_for(EXPLOITS, wall_seconds=3)
    # 200k nested parentheses with the recursion limit lifted: many seconds of elaboration.
    deep = "set_option maxRecDepth 100000000 in\n  " + "(" * 200000 + "True.intro" + ")" * 200000
    verdict = await verifier.verify(task, task.with_body("\n  " + deep))
    assert not verdict.accepted
    assert any(r.startswith("timeout") for r in verdict.reasons), verdict.reasons
    assert verdict.elapsed_ms < 15_000


async def test_a_crashing_lean_process_means_rejection(exploit_verifier: Verifier) -> None:
    task = EXPLOITS.task("true")
    submission = task.with_body("\n  True.intro")
    killed: list[int] = []

    async def kill_lean_when_it_starts() -> None:
        with anyio.fail_after(20):
            while not killed:
                for proc in psutil.Process().children(recursive=True):
                    try:
                        if "--worker" in proc.cmdline():
                            proc.kill()
                            killed.append(proc.pid)
                    except psutil.Error:
                        pass
                await anyio.sleep(0.005)

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_lean_when_it_starts)
        verdict = await exploit_verifier.verify(task, submission)
    assert killed
    assert not verdict.accepted
    assert any(r.startswith("crash") for r in verdict.reasons), verdict.reasons


async def test_the_type_comparison_sees_a_different_statement(
    exploit_verifier: Verifier, tmp_path: Path
) -> None:
    # Prelude Lean elaborates a theorem's type before its body, so no body can change it; the
    # comparison is exercised directly on two compiled modules with different statements.
    task = EXPLOITS.task("true")
    other = task.text.replace("theorem main : True :=", "theorem main : @Eq N N.z N.z :=").replace(
        task.body, "\n  @Eq.refl N N.z"
    )
    sub_type, _ = await exploit_verifier._compile_and_query(task, other, tmp_path, "Other")
    ref_type = await exploit_verifier._reference_type(task)
    assert sub_type != ref_type
    reasons = exploit_verifier._judge(task, sub_type, ref_type, ())
    assert any("statement differs" in r for r in reasons)


def test_forbidden_constructs_ignore_comments_and_strings() -> None:
    assert forbidden_constructs("True.intro -- native_decide would be cheating") == []
    assert forbidden_constructs('True.intro /- #exit -/ "unsafe"') == []
    assert forbidden_constructs("by native_decide")
    assert forbidden_constructs("unsafeCast x") == []


SANDBOX_HELPER = """
import socket, sys
target, port = sys.argv[1], int(sys.argv[2])
results = []
for path in (target + "/inside.txt", target + "/../outside.txt"):
    try:
        open(path, "w").write("x"); results.append("write-ok")
    except OSError:
        results.append("write-blocked")
try:
    socket.create_connection(("127.0.0.1", port), timeout=2); results.append("net-ok")
except OSError:
    results.append("net-blocked")
print(" ".join(results))
"""


@pytest.mark.skipif(available()["bwrap"] is None, reason="bwrap not installed")
def test_the_sandbox_blocks_writes_outside_the_session_dir_and_network(tmp_path: Path) -> None:
    session_dir = tmp_path / "session"
    session_dir.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        # Launched exactly like Lean: the same wrapper, then the program.
        argv = [*wrapper(SandboxPolicy(writable=(session_dir,))), sys.executable, "-c",
                SANDBOX_HELPER, str(session_dir), str(port)]  # fmt: skip
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    finally:
        listener.close()
    assert out.stdout.split() == ["write-ok", "write-blocked", "net-blocked"]
    assert not (tmp_path / "outside.txt").exists()
    # Control: without the sandbox the same helper can do both.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        free = subprocess.run(
            [sys.executable, "-c", SANDBOX_HELPER, str(session_dir),
             str(listener.getsockname()[1])],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    finally:
        listener.close()
    assert free.stdout.split() == ["write-ok", "write-ok", "net-ok"]


def test_bwrap_is_used_only_when_it_works(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import repl_pool.sandbox as sandbox

    # A bwrap that exists but cannot create namespaces (as in some containers and CI runners).
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    sandbox._working_bwrap.cache_clear()
    try:
        assert sandbox.available()["bwrap"] is None
        prefix = sandbox.wrapper(SandboxPolicy())
        assert str(fake) not in prefix and "--unshare-all" not in prefix
        out = subprocess.run([*prefix, "true"], capture_output=True, check=False, timeout=10)
        assert out.returncode == 0  # rlimits only, still runs
    finally:
        sandbox._working_bwrap.cache_clear()
