"""The node side of `leanrig run --ray`: attempts run by the local `Runner` on a cluster node.

Must not write to the starting machine's run directory (results go home as values) or retry."""

from __future__ import annotations

import dataclasses
import io
import os
import shlex
import shutil
import socket
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import structlog

from lsp_bridge import LeanrigError, cache_root, find_lean
from repl_pool import ProcessReaper, ship

from ..library import prepare_library
from ..models import gateway_client
from ..tasks import Suite, library_dir, load_suite
from .agent_sandbox import agent_sandbox, probe_prefix
from .harness import find_harness, harness_version, withdraw_keys
from .model_access import HarnessSetup, ModelRoute
from .options import RunError, RunOptions, agent_words
from .runner import AttemptOutcome, Runner

log = structlog.get_logger("leanrig.run")

ATTEMPT_NODE_VAR: Final = "LEANRIG_RAY_ATTEMPT"
# What comes home: files up to FILE_CAP bytes, in all under TOTAL_CAP, records first.
FILE_CAP: Final = 64 * 2**20
TOTAL_CAP: Final = 256 * 2**20
RECORDS: Final = (
    "ledger.jsonl",
    "agent.log",
    "model_calls.jsonl",
    "model_io.jsonl",
    "harness.json",
    "workspace/Submission.lean",
    "workspace/usage.json",
)


@dataclass(frozen=True, slots=True)
class NodePlan:
    """What every attempt of a run needs on its node, as the starting machine resolved it."""

    options: RunOptions  # ``service`` None: a factory does not cross machines
    suite_root: Path
    suite_hash: str
    suite_files: dict[str, bytes]  # relative path → content, what the suite's hash covers
    lean_version: str
    harness: HarnessSetup | None  # the starting machine's: the version the run records
    route: ModelRoute | None
    words: tuple[str, ...] = ()  # the agent command as resolved there (program absolute)
    home: Path | None = None  # the run directory there: hidden from agents on that machine


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """One attempt's end on its node: its outcome and its directory, packed."""

    outcome: AttemptOutcome
    files: bytes  # a tar of RUN_DIR/attempts/<task>/<k>[-retry]/
    left_out: list[str]  # files not packed (over the caps, or not regular files)
    node: str  # "host (node id)"
    isolated: bool  # the agent ran in its sandbox (bwrap works on this node)


def suite_files(suite: Suite) -> dict[str, bytes]:
    """The files ``suite.content_hash()`` covers, by path relative to the suite."""
    paths = [suite.root / "suite.toml", *(t.path for t in suite.tasks.values()), *suite.lad_files]
    paths += [suite.root / (m.replace(".", "/") + ".lean") for m in suite.spec.library]
    return {
        str(p.resolve().relative_to(suite.root.resolve())): p.read_bytes()
        for p in paths
        if p.exists()
    }


def suite_here(plan: NodePlan) -> Suite:
    """The run's suite here: at the same path with the same hash, or a prelude suite shipped."""
    try:
        suite = load_suite(plan.suite_root)
        if suite.content_hash() == plan.suite_hash:
            return suite
        found = f"a different suite (content hash {suite.content_hash()})"
    except LeanrigError as exc:
        found = f"no suite ({exc.message})"
    if not plan.suite_files or b'lean = "prelude"' not in plan.suite_files.get("suite.toml", b""):
        raise RunError(
            f"the suite is not at {plan.suite_root} on {node_name()}: found {found}",
            hint="a full-toolchain suite (its Lake build) must be at the same path on every "
            "node; see docs/scale-out.md and `leanrig doctor --ray ADDRESS --suite DIR`",
        )
    root = cache_root() / "ray-suites" / plan.suite_hash
    if not (root / ".complete").exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=root.parent))
        for rel, data in plan.suite_files.items():
            path = (staging / rel).resolve()
            if not path.is_relative_to(staging.resolve()):
                raise RunError(f"the shipped suite names a path outside it: {rel}")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        (staging / ".complete").touch()
        try:
            staging.rename(root)
        except OSError:  # another attempt unpacked it first
            shutil.rmtree(staging, ignore_errors=True)
    suite = load_suite(root)
    if suite.content_hash() != plan.suite_hash:
        raise RunError(
            f"the suite shipped to {node_name()} does not hash as on the starting machine"
        )
    return suite


def node_name() -> str:
    """This node as records name it: host (Ray node id, short)."""
    node_id = ""
    ray = sys.modules.get("ray")  # never imported just for this
    if ray is not None and ray.is_initialized():
        node_id = ray.get_runtime_context().get_node_id()
    return f"{socket.gethostname()} ({node_id[:12]})" if node_id else socket.gethostname()


def pack_attempt(root: Path) -> tuple[bytes, list[str]]:
    """The attempt's directory as a tar (records first, links as links), and what was left out."""
    buffer = io.BytesIO()
    left_out: list[str] = []
    total = 0
    seen: set[Path] = set()
    order = [root / r for r in RECORDS] + sorted(root.rglob("*"))
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in order:
            if path in seen or not (path.exists() or path.is_symlink()):
                continue
            seen.add(path)
            rel = str(path.relative_to(root))
            if path.is_symlink() or path.is_dir():
                tar.add(path, arcname=rel, recursive=False)
                continue
            if not path.is_file():
                left_out.append(f"{rel} (not a regular file)")
                continue
            size = path.stat().st_size
            if size > FILE_CAP or total + size > TOTAL_CAP:
                left_out.append(f"{rel} ({size} bytes)")
                continue
            total += size
            tar.add(path, arcname=rel, recursive=False)
    return buffer.getvalue(), left_out


def node_harness(expected: HarnessSetup | None, options: RunOptions) -> HarnessSetup | None:
    """The harness program on this node, of the version the run records."""
    if expected is None:
        return None
    program = find_harness(expected.name, options.harness_bin)
    version = harness_version(program, sandbox=probe_prefix(program))
    if version != expected.version:
        raise RunError(
            f"{node_name()} has {expected.name} {version!r}; the run records {expected.version!r}",
            hint="install the same harness version on every node (`make harnesses`)",
        )
    return dataclasses.replace(expected, program=program)


class AttemptOnNode:
    """A Ray actor running attempts on its node one at a time, as cluster_run gives them."""

    def __init__(self, plan: NodePlan) -> None:
        self.plan = plan

    async def where(self) -> str:
        return node_name()

    async def run(self, task_id: str, k: int, retry: bool, tag: str) -> tuple[str, Any]:
        """One attempt: ("ok", `NodeOutcome`) or ("error", the shipped `LeanrigError`)."""
        # Set before anything starts, so every process of the attempt inherits the tag.
        os.environ[ATTEMPT_NODE_VAR] = tag
        # The route carries the key; keys in the node's own environment go.
        route = self.plan.route
        withdraw_keys(os.environ, route.key_var if route else self.plan.options.model_key_env)
        reaper = ProcessReaper(ATTEMPT_NODE_VAR, tag)
        await anyio.to_thread.run_sync(reaper.start)
        try:
            return "ok", await self._run(task_id, k, retry)
        except LeanrigError as exc:
            return "error", ship(exc)
        finally:
            reaper.close()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(reaper.wait, 10)

    async def _run(self, task_id: str, k: int, retry: bool) -> NodeOutcome:
        plan = self.plan
        options = plan.options
        if options.max_processes is None:  # one lean_slots unit: one Lean server
            options = dataclasses.replace(options, max_processes=1)
        suite = await anyio.to_thread.run_sync(suite_here, plan)
        install = await anyio.to_thread.run_sync(
            lambda: find_lean(suite.root, explicit=options.lean)
        )
        if install.version != plan.lean_version:
            raise RunError(
                f"{node_name()} runs Lean {install.version}; the run records {plan.lean_version}",
                hint="the same toolchain on every node (docs/scale-out.md)",
            )
        library = await anyio.to_thread.run_sync(library_dir, suite, install)
        if options.condition == "lad":
            (await prepare_library(suite, install, library)).close()
        harness = await anyio.to_thread.run_sync(node_harness, plan.harness, options)
        # Resolved on the starting machine: a relative program is relative to where it was typed.
        words = [] if harness is not None else agent_words(shlex.join(plan.words))
        run_dir = Path(tempfile.mkdtemp(prefix="leanrig-attempt-"))
        hide = [plan.home] if plan.home is not None else []
        runner = Runner(
            options, suite, install, library, run_dir, words, harness, plan.route, hide=hide
        )
        try:
            sandbox = await anyio.to_thread.run_sync(
                lambda: agent_sandbox(network=runner.network == "all", mounts=())
            )
            runner.isolated = sandbox is not None
            async with gateway_client() as client:
                runner.client = client
                outcome = await runner.attempt_once(suite.task(task_id), k, retry)
            root = run_dir / "attempts" / task_id / (f"{k}-retry" if retry else str(k))
            files, left_out = await anyio.to_thread.run_sync(pack_attempt, root)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(shutil.rmtree, run_dir, True)
                await anyio.to_thread.run_sync(shutil.rmtree, runner.socket_root, True)
        return NodeOutcome(outcome, files, left_out, node_name(), runner.isolated)


__all__ = [
    "ATTEMPT_NODE_VAR",
    "AttemptOnNode",
    "NodeOutcome",
    "NodePlan",
    "node_name",
    "pack_attempt",
    "suite_files",
    "suite_here",
]
