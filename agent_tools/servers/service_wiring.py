"""Wiring: suite + Lean + sandbox + pool + verifier + ledger → a running `ProofService`.

User paths are made absolute here: Lean, the sandbox and the verifier run elsewhere."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import structlog

from lsp_bridge import LeanInstall, Timeouts, find_lean, single_errors
from repl_pool import (
    LeanEnvironment,
    Pool,
    PoolConfig,
    RayOptions,
    RayPool,
    SandboxPolicy,
    WarmPool,
    default_max_processes,
    sandbox_wrapper,
    uses_namespaces,
)

from ..library import LibraryIndex, open_library
from ..sessions import MAX_SESSIONS_PER_CLIENT, Ledger, ProofService
from ..tasks import SuiteError, library_dir, load_suite
from ..verdict import Verifier

log = structlog.get_logger("leanrig.app")


def absolute(path: Path | str) -> Path:
    """``path`` as the user meant it: ``~`` expanded, relative to the current directory."""
    return Path(path).expanduser().resolve()


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What `leanrig serve` was asked for; paths are made absolute on construction."""

    suite: Path
    run_dir: Path = Path("runs")
    ledger: Path | None = None
    max_processes: int | None = None
    step_timeout: float = 60.0
    sandbox: bool = True
    lean: str | None = None
    # Serve only this task; its last accepted body is kept in RUN_DIR/submission-<pid>.json.
    task: str | None = None
    # A Ray cluster for the pool: "auto" or an address (host:port, ray://...); docs/scale-out.md.
    ray: str | None = None
    # "lad" indexes the suite's `[lad]` library and serves `search_library`/`read_library`.
    condition: Literal["baseline", "lad"] = "baseline"
    # Streamable HTTP serves all its clients as one client.
    sessions_per_client: int = MAX_SESSIONS_PER_CLIENT
    # None: found here. `leanrig run` passes its own: never run an agent-planted `lean`.
    install: LeanInstall | None = None
    # What the sessions' Lean must not read (what the agent's sandbox hides).
    hidden: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "suite", absolute(self.suite))
        object.__setattr__(self, "run_dir", absolute(self.run_dir))
        if self.ledger is not None:
            object.__setattr__(self, "ledger", absolute(self.ledger))


CLOSE_SECONDS = 5.0  # closing the sessions left open when the service ends


def claim_run_dir(parent: Path) -> Path:
    """A new directory ``parent/<timestamp>`` owned by this server (``-2``, ``-3``, … if taken)."""
    parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 10_000):
        path = parent / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise SuiteError(
        f"{parent} has no free run directory for {stamp}", hint="use another --run-dir"
    )


@asynccontextmanager
async def open_service(options: ServeOptions) -> AsyncIterator[ProofService]:
    # Loading the suite, finding Lean and building the library block: run them in threads.
    suite = await anyio.to_thread.run_sync(load_suite, options.suite)
    if options.task is not None:
        suite.task(options.task)  # raises SuiteError before anything is made on disk
    install = options.install
    if install is None:
        install = await anyio.to_thread.run_sync(
            lambda: find_lean(suite.root, explicit=options.lean)
        )
    if suite.spec.lean == "full" and install.mode != "toolchain":
        raise SuiteError(
            f"suite {suite.name} needs a full Lean toolchain (Init), but {install.lean} is the "
            "prelude-only bootstrap",
            hint='install elan and a toolchain, or serve a `lean = "prelude"` suite',
        )
    library = await anyio.to_thread.run_sync(library_dir, suite, install)
    run_dir = await anyio.to_thread.run_sync(claim_run_dir, absolute(options.run_dir))
    scratch = run_dir / "scratch"
    # Outside the sessions' writable scratch: a body's code must not reach a verdict's files.
    verify_root = run_dir / "verify"
    await anyio.to_thread.run_sync(lambda: scratch.mkdir(parents=True, exist_ok=True))
    await anyio.to_thread.run_sync(lambda: verify_root.mkdir(parents=True, exist_ok=True))
    policy = SandboxPolicy(
        writable=(scratch,), use_bwrap=None if options.sandbox else False, hidden=options.hidden
    )
    if options.sandbox and not uses_namespaces(policy):
        log.warning("sandbox.no_bwrap", detail="Lean processes run with rlimits only")
    env = dict(os.environ)
    if library is not None:
        env["LEAN_PATH"] = str(absolute(library))
    environment = LeanEnvironment(
        install, suite.root, env=env, wrapper=sandbox_wrapper(policy) if options.sandbox else ()
    )
    config = PoolConfig(
        min_processes=0 if options.task is not None else 1,
        max_processes=options.max_processes or default_max_processes(),
        default_header=next(iter(suite.tasks.values())).header.text() if suite.tasks else "",
        request_deadline=options.step_timeout,
        timeouts=Timeouts(spawn=60, barrier=options.step_timeout),
    )
    lad: LibraryIndex | None = None
    if options.condition == "lad":
        lad = await open_library(suite, environment)
        log.info(
            "serve.library", declarations=lad.count, built=lad.built, ms=round(lad.build_ms, 1)
        )
    ledger = Ledger(absolute(options.ledger) if options.ledger else run_dir / "ledger.jsonl")
    verifier = Verifier(
        suite,
        install,
        library=library,
        sandbox=policy if options.sandbox else SandboxPolicy(use_bwrap=False),
        work_root=verify_root,
    )
    log.info(
        "serve.opened",
        suite=str(suite.root),
        run_dir=str(run_dir),
        lean=str(install.lean),
        sandbox="bwrap" if uses_namespaces(policy) else "rlimits" if options.sandbox else "off",
    )
    bound = absolute(options.run_dir) if options.task is not None else None
    try:
        async with _open_pool(environment, config, options.ray) as pool:
            service = ProofService(
                suite,
                pool,
                environment,
                verifier,
                ledger,
                step_timeout=options.step_timeout,
                task=options.task,
                submission=bound / f"submission-{os.getpid()}.json" if bound else None,
                library=lad,
                sessions_per_client=options.sessions_per_client,
            )
            try:
                with single_errors():
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_warm_best_effort, service)
                        try:
                            yield service
                        finally:
                            tg.cancel_scope.cancel()
            finally:
                # Every session gets its closing ledger line, even on wires that never close one.
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_SECONDS):
                    await service.close_all()
    finally:
        ledger.close()
        if lad is not None:
            lad.close()


async def _warm_best_effort(service: ProofService) -> None:
    try:
        await service.warm()
    except Exception:
        log.warning("serve.warm_failed", exc_info=True)


@asynccontextmanager
async def _open_pool(
    environment: LeanEnvironment, config: PoolConfig, ray: str | None
) -> AsyncIterator[Pool]:
    """The local pool, or with ``ray`` the router over one pool per Ray node."""
    if ray is None:
        async with WarmPool.open(environment, config) as pool:
            yield pool
        return
    async with RayPool.connect(environment, config, RayOptions(address=ray)) as cluster:
        yield cluster


def serve_argv(suite: Path, run_dir: Path, *extra: str) -> list[str]:
    """`leanrig serve` for this interpreter (no console script needed)."""
    return [
        sys.executable,
        "-m",
        "agent_tools.cli",
        "serve",
        "--suite",
        str(suite),
        "--run-dir",
        str(run_dir),
        *extra,
    ]
