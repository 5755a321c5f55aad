"""What one Ray node must have for `leanrig run --ray`, checked on that node (`check_node`).

`check_node` is the Ray task: module-level, synchronous, returning plain data. Must not import
ray at module level nor walk the cluster (doctor_cluster.py does)."""

from __future__ import annotations

import os
import platform
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lsp_bridge import LeanInstall, LeanrigError, find_lean, first_line
from repl_pool import ProcessReaper, import_ray, sandbox_tools

from ..runs import HarnessError, HarnessName, find_harness, harness_version, probe_prefix
from ..servers import package_version
from ..tasks import load_suite
from .doctor import SMOKE_DEADLINE, sandbox_note, smoke_test

HARNESS_DEADLINE = 30.0  # `HARNESS --version` on a node
# Tags every process a check starts, for its reaper: Ray kills only a worker's children.
TAG_VAR = "LEANRIG_DOCTOR_NODE"


@dataclass(frozen=True, slots=True)
class Expected:
    """The starting machine's facts, which every node must match."""

    leanrig: str
    python: str
    ray: str
    lean_path: str
    lean_version: str
    suite_path: str | None = None  # absolute
    suite_hash: str | None = None
    suite_prelude: bool = False  # a prelude suite can be shipped with the run
    harness: HarnessName | None = None
    harness_bin: str | None = None  # absolute; None: PATH or the pinned install
    harness_version: str | None = None


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str  # one line: what was found and, if not ok, what to do


@dataclass(frozen=True, slots=True)
class NodeReport:
    """What a node said of itself, with its own Ray node id."""

    node_id: str
    hostname: str
    leanrig: str
    python: str
    ray: str
    lean_path: str | None
    lean_version: str | None
    bwrap: str | None
    smoke_ms: float | None
    checks: list[Check] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def expected_here(
    suite: Path | None, harness: HarnessName | None, harness_bin: Path | None
) -> Expected:
    """The starting machine's facts; raises `LeanrigError` if it cannot run the job itself."""
    root = suite.resolve() if suite is not None else None
    loaded = load_suite(root) if root is not None else None
    install = find_lean(root)
    program = find_harness(harness, harness_bin) if harness is not None else None
    given_bin = str(program) if program is not None and harness_bin is not None else None
    return Expected(
        leanrig=package_version(),
        python=platform.python_version(),
        ray=str(import_ray().__version__),
        lean_path=str(install.lean),
        lean_version=install.version,
        suite_path=str(root) if root is not None else None,
        suite_hash=loaded.content_hash() if loaded is not None else None,
        suite_prelude=loaded is not None and loaded.spec.lean == "prelude",
        harness=harness,
        harness_bin=given_bin,
        harness_version=(
            harness_version(program, sandbox=probe_prefix(program)) if program is not None else None
        ),
    )


def check_node(expected: Expected, budget: float) -> NodeReport:
    """Every check of this module on this node, within ``budget`` seconds on its own clock."""
    with _reaped():
        return _checked_node(expected, time.monotonic() + budget)


@contextmanager
def _reaped() -> Iterator[None]:
    """Tag every process started inside for a reaper of its own (`TAG_VAR`)."""
    tag = uuid.uuid4().hex
    reaper = ProcessReaper(TAG_VAR, tag)
    reaper.start()
    # The worker stays untagged: the reaper reads /proc/PID/environ, fixed at its start.
    os.environ[TAG_VAR] = tag
    try:
        yield
    finally:
        os.environ.pop(TAG_VAR, None)
        reaper.close()
        reaper.wait(10)


def _left(ends: float, at_most: float) -> float:
    return max(0.0, min(at_most, ends - time.monotonic()))


def _checked_node(expected: Expected, ends: float) -> NodeReport:
    ray = import_ray()
    leanrig, python, ray_version = package_version(), platform.python_version(), ray.__version__
    checks = [
        _same(
            "leanrig",
            leanrig,
            expected.leanrig,
            "Ray runs the attempt from the node's installed leanrig: install the same version",
        ),
        _same("ray", ray_version, expected.ray, "install the same Ray on every node"),
        _same(
            "python",
            python,
            expected.python,
            "Ray wants the same Python on every node (to the patch level by default)",
        ),
    ]
    # The harness's `--version` runs beside the Lean checks: a slow or hung harness does not
    # take its time from the smoke test, nor the smoke test from it.
    with ThreadPoolExecutor(max_workers=1) as beside:
        harness = (
            beside.submit(harness_check, expected, _left(ends, HARNESS_DEADLINE))
            if expected.harness is not None
            else None
        )
        checks, install, smoke_ms, bwrap = _lean_checks(expected, ends, checks)
        if harness is not None:
            checks.append(harness.result())
    return NodeReport(
        node_id=str(ray.get_runtime_context().get_node_id()),
        hostname=socket.gethostname(),
        leanrig=leanrig,
        python=python,
        ray=str(ray_version),
        lean_path=str(install.lean) if install is not None else None,
        lean_version=install.version if install is not None else None,
        bwrap=bwrap,
        smoke_ms=smoke_ms,
        checks=checks,
    )


def _lean_checks(
    expected: Expected, ends: float, checks: list[Check]
) -> tuple[list[Check], LeanInstall | None, float | None, str | None]:
    """``checks`` with Lean's, the sandbox's and the suite's; the Lean found, the smoke test's
    time and the working bwrap."""
    install: LeanInstall | None = None
    smoke_ms = None
    try:
        # A check installs nothing.
        install = find_lean(
            Path(expected.suite_path) if expected.suite_path is not None else None,
            build_bootstrap=False,
        )
    except LeanrigError as exc:
        checks += [
            Check(
                "lean",
                False,
                f"no Lean on this node: {exc}; the run needs Lean "
                f"{expected.lean_version} at {expected.lean_path}",
            ),
            Check("smoke", False, "not run: no Lean"),
        ]
    if install is not None:
        smoke = smoke_test(install, deadline=_left(ends, SMOKE_DEADLINE))
        smoke_ms = smoke.ms
        took = f" ({smoke.ms:.0f} ms)" if smoke.ms is not None else ""
        checks += [lean_check(install, expected), Check("smoke", smoke.ok, smoke.detail + took)]
    bwrap = sandbox_tools()["bwrap"]
    checks.append(sandbox_check(bwrap))
    if expected.suite_path is not None:
        checks.append(suite_check(expected))
    return checks, install, smoke_ms, bwrap


def _same(name: str, found: str, expected: str, fix: str) -> Check:
    if found == expected:
        return Check(name, True, f"{found}, as on the starting machine")
    return Check(name, False, f"{found} here, {expected} on the starting machine: {fix}")


def lean_check(install: LeanInstall, expected: Expected) -> Check:
    """The same Lean at the same path as on the starting machine (the run sends its environment)."""
    found = f"Lean {install.version} at {install.lean}"
    if str(install.lean) == expected.lean_path and install.version == expected.lean_version:
        return Check("lean", True, f"{found}, as on the starting machine")
    return Check(
        "lean",
        False,
        f"{found}; the starting machine's is Lean "
        f"{expected.lean_version} at {expected.lean_path}, which the run sends: the same "
        "toolchain at the same path (`leanrig bootstrap` on the node for the bootstrap "
        "Lean; docs/scale-out.md)",
    )


def sandbox_check(bwrap: str | None) -> Check:
    """Reported, never failed: without bwrap a run sandboxes with rlimits only."""
    if bwrap is not None:
        return Check("sandbox", True, f"bwrap works ({bwrap})")
    return Check(
        "sandbox", True, f"{sandbox_note(bwrap)} (allowed; install bubblewrap for namespaces)"
    )


def suite_check(expected: Expected) -> Check:
    """The same suite at the same path; a prelude suite may differ (it is shipped with the run)."""
    assert expected.suite_path is not None
    try:
        found: str | None = load_suite(Path(expected.suite_path)).content_hash()
        why = f"content {found}, the starting machine's is {expected.suite_hash}"
    except LeanrigError as exc:
        found, why = None, f"not loadable here: {first_line(exc)}"
    if found == expected.suite_hash:
        return Check(
            "suite", True, f"{expected.suite_path} (content {found}), as on the starting machine"
        )
    if expected.suite_prelude:
        return Check(
            "suite",
            True,
            f"{expected.suite_path}: {why}; a prelude suite: will be shipped with the run",
        )
    return Check(
        "suite",
        False,
        f"{expected.suite_path}: {why}; a full-toolchain suite (its "
        "Lake build) must be at the same path on every node (a shared file system or "
        "the same build step; docs/scale-out.md)",
    )


def harness_check(expected: Expected, timeout: float = HARNESS_DEADLINE) -> Check:
    """The harness program here, of the starting machine's version."""
    assert expected.harness is not None
    explicit = Path(expected.harness_bin) if expected.harness_bin is not None else None
    try:
        program = find_harness(expected.harness, explicit)
        version = harness_version(program, timeout=timeout, sandbox=probe_prefix(program))
    except HarnessError as exc:
        return Check("harness", False, f"{expected.harness}: {exc}")
    if version == expected.harness_version:
        return Check("harness", True, f"{program}: {version}, as on the starting machine")
    return Check(
        "harness",
        False,
        f"{program}: {version!r}, the starting machine's is "
        f"{expected.harness_version!r}: install the same version (`make harnesses`) "
        "or pass --harness-bin",
    )
