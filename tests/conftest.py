from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
import structlog

from lsp_bridge import LeanClient, LeanInstall, ServerCommand, Timeouts, find_lean
from lsp_bridge.proctree import TOKEN_VAR, read_environ, token_of

# The suite's tiers (pyproject's markers; `make test` runs them all, `make test-fast` unit and
# lean). A test file's tests take its tier here; a test marked with a tier itself keeps its own.
# A new test file must be given one (collection fails until it is).
TIERS: dict[str, tuple[str, ...]] = {
    # pure functions and in-process fakes: no Lean, no subprocess
    "unit": ("test_architecture", "test_attempt_state", "test_calls", "test_catalogue",
             "test_docs_names", "test_prose",
             "test_equiv_terms",
             "test_cluster_attempts",
             "test_completeness", "test_node_routing",
             "test_body_bounds", "test_harness_presets", "test_header", "test_lean_text",
             "test_metrics", "test_minimal_edit", "test_model_gateway", "test_model_io",
             "test_positions",
             "test_probe", "test_replay_model", "test_report", "test_results",
             "test_wire_usage"),
    # the real Lean: clients, pools, the in-process service, the SDK's in-memory MCP client
    "lean": ("test_authoring_prelude_files", "test_cli", "test_direct_workers",
             "test_equivalence",
             "test_question_tools", "test_trace_points",
             "test_early_barrier",
             "test_jsonrpc_server", "test_lean_scopes", "test_library", "test_lsp_client",
             "test_mcp_lines", "test_oneshot", "test_pool", "test_prefix", "test_reaper",
             "test_serve_run_dir",
             "test_service", "test_session_probe", "test_slot_health", "test_slow_steps",
             "test_statement_authoring", "test_statement_sessions", "test_suite",
             "test_verifier"),
    # CLI subprocesses, sandboxes, editors, harnesses
    "e2e": ("test_agents", "test_as_typed", "test_as_typed_editor", "test_as_typed_runs",
            "test_equiv_cli",
            "test_statement_harness", "test_statement_runs", "test_plan_from",
            "test_cancelled_steps", "test_corpus_runs", "test_corpus_tools", "test_docs_blocks",
            "test_editor_nvim",
            "test_editor_proxy", "test_editor_sweep",
            "test_editor_emacs", "test_fdstreams",
            "test_harness_runs", "test_hostile_clients", "test_human_attempts",
            "test_inspect_export", "test_inspect_task", "test_inspect_statements",
            "test_inspect_view",
            "test_network_servers", "test_red_team", "test_runner", "test_runner_faults",
            "test_runner_isolation", "test_server_heap", "test_suite_authoring",
            "test_test_grouping"),
    # spawn loops, Ray, bench smoke, crash and fault injection at scale
    "stress": ("test_as_typed_ray", "test_bench_smoke", "test_doctor_ray", "test_lsp_faults",
               "test_ray_cluster", "test_run_ray"),
}  # fmt: skip
TIER_OF = {module: tier for tier, modules in TIERS.items() for module in modules}
SHARED_WORKER = {"test_ray_cluster": "ray", "test_as_typed_ray": "ray", "test_bench_smoke": "ray",
                 "test_doctor_ray": "ray", "test_run_ray": "ray"}  # fmt: skip
# The groups that take longest under `make test`, longest first (the rest keep their order):
# workers take groups in this order (the Makefile turns xdist's reordering by test count off).
LONGEST_FIRST = {group: rank for rank, group in enumerate((
    "ray", "test_harness_runs", "test_as_typed", "test_agents", "test_editor_proxy",
    "test_runner_faults", "test_hostile_clients", "test_as_typed_runs", "test_equivalence",
    "test_corpus_runs", "test_statement_harness", "test_runner", "test_human_attempts",
    "test_suite_authoring", "test_model_gateway", "test_red_team", "test_statement_runs",
    "test_cancelled_steps", "test_verifier", "test_as_typed_editor", "test_docs_blocks",
    "test_session_probe", "test_service", "test_jsonrpc_server", "test_statement_authoring",
    "test_library", "test_prefix", "test_editor_emacs", "test_pool", "test_corpus_tools",
    "test_inspect_export", "test_editor_nvim", "test_authoring_prelude_files",
    "test_architecture", "test_metrics", "test_lsp_client", "test_plan_from",
))}  # fmt: skip


# First: pytest-xdist's own hook reads the xdist_group markers added here. (Grouping failed
# silently under pytest 9.2, pytest-dev/pytest-xdist#1386: a module's tests spread over both
# workers, test_harness_runs' four harness runs, ~90 s, ran on each, the Ray modules' clusters
# overlapped; constraints.txt pins 9.1.1, tests/test_test_grouping.py checks it.)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unknown = sorted({item.path.stem for item in items if item.path.stem not in TIER_OF})
    if unknown:
        raise pytest.UsageError(f"tests/conftest.py TIERS names no tier for {unknown}")
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            item.add_marker(getattr(pytest.mark, TIER_OF[item.path.stem]))
        # On several workers (`make test`: --dist loadgroup) a module's tests stay together
        # (its module fixtures start once), and the modules that start a Ray cluster share one
        # worker: `--ray auto` found the other worker's cluster.
        group = SHARED_WORKER.get(item.path.stem, item.path.stem)
        item.add_marker(pytest.mark.xdist_group(group))
    # The longest groups first (workers take groups in collection order): collected last, a
    # long group runs on after the other workers have finished.
    items.sort(key=lambda item: LONGEST_FIRST.get(
        SHARED_WORKER.get(item.path.stem, item.path.stem), len(LONGEST_FIRST)
    ))  # fmt: skip


def _test_logging() -> None:
    structlog.reset_defaults()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


_test_logging()


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """Tests that run the CLI reconfigure structlog; put the test setup back afterwards."""
    yield
    _test_logging()


# The "ray" group's shared cluster: started by the first test that asks for it, stopped after
# the group's last test on this worker (a session fixture outlived the group, and later
# modules on the worker found its processes among their children).
_SHARED_CLUSTER: dict[str, Any] = {}


@pytest.fixture
def two_node_cluster() -> Any:
    """A local Ray cluster: head + one worker node, 1 lean_slots each, small, no dashboard.
    Shared by the tests of the "ray" group that leave its two nodes as they found them
    (test_run_ray, test_doctor_ray, the run_ray bench smoke, the header-affinity test); none
    of its processes may be left when it stops."""
    pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install .[ray])")
    if "cluster" not in _SHARED_CLUSTER:
        _SHARED_CLUSTER["cluster"] = start_two_nodes()
    return _SHARED_CLUSTER["cluster"]


def start_two_nodes() -> Any:
    """A local Ray cluster: head + one worker node, 1 lean_slots each, small, no dashboard."""
    from ray.cluster_utils import Cluster

    c: Any = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "resources": {"lean_slots": 1}, "include_dashboard": False},
    )
    c.add_node(num_cpus=1, resources={"lean_slots": 1})
    c.wait_for_nodes()
    return c


def stop_cluster(c: Any) -> None:
    """Shut ``c`` down; none of its processes (raylets, GCS, workers) may be left."""
    procs = []
    for node in c.list_all_nodes():
        for infos in node.all_processes.values():
            for info in infos:
                if info.process is None:
                    continue
                try:
                    proc = psutil.Process(info.process.pid)
                    procs += [proc, *proc.children(recursive=True)]
                except psutil.Error:
                    pass
    c.shutdown()
    _, alive = psutil.wait_procs(procs, timeout=15)
    assert alive == [], f"Ray processes outlived the cluster: {alive}"


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if "cluster" in _SHARED_CLUSTER and (
        nextitem is None or SHARED_WORKER.get(nextitem.path.stem) != "ray"
    ):
        stop_cluster(_SHARED_CLUSTER.pop("cluster"))


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


def process_gone(pid: int) -> bool:
    """The process exited (or is a zombie); it may vanish while being looked at."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def lean_descendants(pid: int) -> list[psutil.Process]:
    """The lean processes (server and workers) under ``pid``. A process that exits between
    the listing and the look at its name is left out (the sandbox's short-lived helpers do:
    a fresh-clone run failed on `NoSuchProcess`)."""
    found = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            if proc.name() == "lean":
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


def has_lean_worker(leans: list[psutil.Process]) -> bool:
    """A Lean file worker is among ``leans`` (processing a document: the warm state, through
    Lean's watchdog or direct)."""
    for proc in leans:
        try:
            if "--worker" in proc.cmdline():
                return True
        except psutil.Error:
            continue
    return False


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


# Every process leanrig starts carries a kill token (lsp_bridge.proctree.TOKEN_VAR); every
# process this test run starts inherits RUN_VAR. Strays are processes with both: a Lean beside
# the suite (an editor's server, another checkout's test run) has neither or another run id,
# and is never reported or killed.
RUN_VAR = "LEANRIG_TEST_RUN"
RUN_ID = uuid.uuid4().hex
os.environ[RUN_VAR] = RUN_ID
_INHERITED_TOKEN = os.environ.get(TOKEN_VAR)  # a token this pytest itself runs under


def _run_marked(pid: int) -> bool:
    environ = read_environ(pid)  # waits out a process caught inside execve (proctree)
    return environ is not None and f"{RUN_VAR}={RUN_ID}".encode() in environ.split(b"\0")


def leanrig_processes() -> dict[int, psutil.Process]:
    """Live processes started by leanrig code of this test run (token + this run's id)."""
    found: dict[int, psutil.Process] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        token = token_of(pid)
        if token is None or token == _INHERITED_TOKEN or not _run_marked(pid):
            continue
        try:
            found[pid] = psutil.Process(pid)
        except psutil.Error:
            continue
    return found


def _strays(before: set[int]) -> list[psutil.Process]:
    return [
        p
        for pid, p in leanrig_processes().items()
        if pid not in before and not _owned_by_long_lived(p)
    ]


def running(proc: psutil.Process) -> bool:
    """Alive and not a zombie; False for a process that vanishes while being looked at."""
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


@contextmanager
def stray_guard(grace: float = 5.0) -> Iterator[None]:
    """Around a test: leanrig processes it started must be gone (after ``grace`` s for them
    to exit); those left are killed and reported. Nothing else on the machine is touched."""
    before = set(leanrig_processes())
    yield
    stray = _strays(before)
    if stray:
        _, stray = psutil.wait_procs(stray, timeout=grace)
    # Still running: psutil compares the start time, so a re-used pid is not taken for the
    # stray (re-reading /proc/<pid>/environ instead can fail transiently and hide one).
    stray = [p for p in stray if running(p)]
    if not stray:
        return
    described = []
    for p in stray:
        try:
            described.append(p.cmdline())
            p.kill()
        except psutil.Error:
            continue
    if described:
        raise AssertionError(f"leanrig processes outlived the test: {described}")


@pytest.fixture(autouse=True)
def no_stray_lean() -> Iterator[None]:
    """Every test must leave no process that leanrig started behind (ps-verified)."""
    with stray_guard():
        yield
