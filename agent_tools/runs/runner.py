"""`leanrig run`: drive any agent over a suite under the published run protocol (docs/runs.md)."""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import anyio
import psutil
import structlog

from lsp_bridge import LeanInstall, LeanrigError, cache_root, find_lean
from repl_pool import SandboxPolicy, sandbox_programs, sandbox_tools, uses_namespaces

from ..library import index_dir, prepare_library
from ..models import count_kinds, gateway_client, model_time
from ..servers import ServeOptions, package_version, serve_asgi
from ..tasks import Suite, Task, library_dir, load_suite, writes_proof, writes_statement
from ..verdict import EquivalenceGrader, StatementGrader, StatementVerdict, Verdict, Verifier
from .agent_sandbox import RunSandbox, agent_sandbox, hidden_paths, probe_prefix, trusted_paths
from .attempt_dir import (
    ATTEMPT_TOKEN_VAR,
    SOCKET_FILE,
    AttemptDir,
    agent_argv,
    create_attempt_dir,
)
from .attempt_records import body_sha, final_edit, ignored_edits, ledger_totals, write_submission
from .attempt_server import AttemptServer
from .harness import (
    find_harness,
    harness_usage,
    harness_version,
    usage_mismatch,
    withdraw_keys,
)
from .invocation import Invocation, invoke
from .leftovers import (
    mark_started,
    record_interrupted,
    socket_parent,
    started_marker,
    sweep_interrupted,
    sweep_socket_dirs,
)
from .model_access import (
    HarnessSetup,
    ModelRoute,
    forwarder,
    gateway_usage,
    harness_record,
    launch_harness,
    model_env,
    model_route,
    network_policy,
    open_gateway,
    read_capped,
)
from .options import RunError, RunOptions, agent_words, check_suite, resumed
from .prices import load_prices
from .progress import RunProgress, RunSummary
from .results import (
    USAGE_FILE,
    AttemptResult,
    ClusterInfo,
    Machine,
    RunInfo,
    TaskRef,
    append_result,
    finished_attempts,
    read_results,
    read_run_info,
    read_usage,
    write_run_info,
)

log = structlog.get_logger("leanrig.run")

RETRY_POLICY: Final = "an infrastructure failure (Lean or leanrig died) is retried once"


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    """One invocation's end: its results line and what the runner saw of it."""

    result: AttemptResult
    infra: list[str]  # why this looks like an infrastructure failure (empty: it does not)
    overhead_s: float  # leanrig's own time: everything but the agent's run and the verdict
    invocation: Invocation | None  # None: the invocation never came back (a lost node)
    service_open_s: float | None = None  # opening the attempt's service (beside the agent)
    placement_s: float | None = None  # on a cluster: until a node had taken the attempt


InvokeAttempt = Callable[[Task, int, bool], Awaitable[AttemptOutcome]]  # (task, k, retry)
RunAttempt = Callable[[Task, int, RunProgress], Awaitable[AttemptOutcome]]  # retry included


async def with_infra_retry(
    once: InvokeAttempt, task: Task, k: int, progress: RunProgress
) -> AttemptOutcome:
    """``once``, and once more on an infrastructure failure; the retry's line says so and why."""
    outcome = await once(task, k, False)
    if not outcome.infra:
        return outcome
    log.warning("run.infra_failure", task=task.id, attempt=k, why=outcome.infra)
    progress.note(f"{task.id}#{k}: infrastructure failure ({outcome.infra[0]}); retrying")
    retry = await once(task, k, True)
    result = retry.result.model_copy(
        update={"infra_retry": True, "infra_failures": list(outcome.infra)}
    )
    if retry.infra:
        reasons = [*result.reasons, *(f"infrastructure: {w}" for w in retry.infra)]
        result = result.model_copy(update={"reasons": reasons})
    return dataclasses.replace(retry, result=result)


class Runner:
    def __init__(
        self,
        options: RunOptions,
        suite: Suite,
        install: LeanInstall,
        library: Path | None,
        run_dir: Path,
        words: list[str],
        harness: HarnessSetup | None = None,
        route: ModelRoute | None = None,
        hide: Sequence[Path] = (),
    ) -> None:
        """``hide``: more paths the agent must not reach."""
        # Resolved before any agent runs: a link it repoints must not change the verdict's Lean.
        install = dataclasses.replace(
            install,
            lean=install.lean.resolve(),
            lake=install.lake.resolve() if install.lake is not None else None,
        )
        library = library.resolve() if library is not None else None
        run_dir = run_dir.resolve()
        # Made now: only an existing path is mounted read-only or hidden.
        cache_root().mkdir(parents=True, exist_ok=True)
        index_dir().mkdir(parents=True, exist_ok=True)
        self.options = options
        self.suite = suite
        self.run_dir = run_dir
        self.words = words
        scratch = run_dir / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        policy = SandboxPolicy(writable=(scratch,))
        self.sandbox = "bwrap" if uses_namespaces(policy) else "rlimits"
        self.verifier = Verifier(suite, install, library=library, sandbox=policy, work_root=scratch)
        self.statements = StatementGrader(
            suite,
            self.verifier,
            EquivalenceGrader(
                suite,
                install,
                library=library,
                sandbox=policy,
                work_root=scratch,
                allowed_axioms=suite.spec.axioms,
            ),
        )
        self.install = install
        self.trusted = trusted_paths(
            install.lean, extra=[*self.verifier.programs, *sandbox_programs()]
        )
        self.isolated = False  # the agent runs in its sandbox (agent_sandbox works here)
        self.ledger_path = run_dir / "ledger.jsonl"
        self.suite_hash = suite.content_hash()
        # A short per-user parent (socket paths: 107 bytes at most) every sandbox hides whole.
        self.socket_parent = socket_parent()
        self.network = network_policy(options)
        self.hidden = hidden_paths(
            suite,
            lad=options.condition == "lad",
            trusted=self.trusted,
            run_dir=run_dir,
            socket_parent=self.socket_parent,
        )
        self.hidden += [p for p in hide if p.exists() and p not in self.hidden]
        self.agent_sandbox = RunSandbox(
            trusted=self.trusted,
            suite=suite.root.resolve(),
            run_dir=run_dir,
            socket_parent=self.socket_parent,
            hidden=self.hidden,
            network=self.network == "all",
        )
        sweep_socket_dirs(self.socket_parent)
        prefix = f"run-{os.getpid()}-"
        self.socket_root = Path(tempfile.mkdtemp(prefix=prefix, dir=self.socket_parent))
        self._sockets = 0
        self.harness = harness
        self.route = route
        self.client: Any = None  # the gateways' upstream client, open during the run
        tools = {k: v for k, v in sandbox_tools().items() if v is not None}
        self.programs: dict[str, str] = {**install.programs(), **tools, "python": sys.executable}
        if harness is not None:
            self.programs[harness.name] = str(harness.program)
        self.cluster: ClusterInfo | None = None  # attempts placed on a Ray cluster (--ray)

    async def attempt(self, task: Task, k: int, progress: RunProgress) -> AttemptOutcome:
        return await with_infra_retry(self.attempt_once, task, k, progress)

    def _socket(self) -> Path:
        self._sockets += 1
        return self.socket_root / str(self._sockets) / SOCKET_FILE

    async def attempt_once(self, task: Task, k: int, retry: bool) -> AttemptOutcome:
        """One invocation of attempt ``k`` here, and its verdict; in ``attempts/<task>/<k>``."""
        t0 = time.perf_counter()
        started_at = datetime.now(UTC)
        o = self.options

        socket = self._socket()

        def make() -> AttemptDir:
            return create_attempt_dir(
                self.run_dir,
                self.suite,
                task,
                k,
                token=uuid.uuid4().hex,
                socket=socket,
                retry=retry,
                library=self.options.condition == "lad",
                home_from=self.options.agent_home,
            )

        ws = await anyio.to_thread.run_sync(make)
        serve = ServeOptions(
            suite=self.suite.root,
            run_dir=ws.serve_dir,
            ledger=ws.ledger,
            task=task.id,
            condition="lad" if o.condition == "lad" else "baseline",
            lean=o.lean,
            max_processes=o.max_processes,
            install=self.install,
            hidden=(*self.hidden, self.run_dir, self.socket_parent) if self.isolated else (),
        )
        server = AttemptServer(serve, socket, o.service)
        await server.bind()
        forwarded = self.isolated and self.network == "model"
        gateway, listener, model_url = await anyio.to_thread.run_sync(
            lambda: open_gateway(self.route, self.client, ws, forwarded=forwarded)
        )
        harness_env: dict[str, str] = {}
        if self.harness is not None:
            assert model_url is not None
            harness = self.harness
            started = await anyio.to_thread.run_sync(
                lambda: launch_harness(harness, self.route, o, ws, ws.home, model_url)
            )
            command, harness_env = started.argv, started.env
        else:
            command = agent_argv(self.words, ws)
        forward = forwarder(ws, sys.executable) if gateway is not None and forwarded else []
        sandbox = (
            self.agent_sandbox.prefix(ws.workspace, ws.socket.parent, command, ws.home)
            if self.isolated
            else ()
        )
        argv = [*sandbox, *forward, *command]
        env = ws.agent_env(os.environ)
        if self.isolated:
            env["TMPDIR"] = "/tmp"  # its private one
        model_env(env, self.route, model_url)
        env.update(harness_env)
        stop_gateway = anyio.Event()
        async with anyio.create_task_group() as tg:
            # The service opens while the agent starts; its first connection waits in the backlog.
            tg.start_soon(server.run)
            if gateway is not None and listener is not None:
                tg.start_soon(serve_asgi, gateway, listener, stop_gateway)
            t_agent = time.perf_counter()
            inv = await invoke(
                argv,
                cwd=ws.workspace,
                env=env,
                time_limit=o.time_limit,
                token=ws.token,
                token_var=ATTEMPT_TOKEN_VAR,
                log_path=ws.log,
                abort=server.failed,
                sandboxed=self.isolated,
            )
            t_after = time.perf_counter()
            stop_gateway.set()
            await server.stop()
        body, statement = await anyio.to_thread.run_sync(final_edit, ws)
        infra: list[str] = []
        if server.failure is not None:
            infra.append(server.failure)
        if inv.sandbox_error is not None:
            infra.append(inv.sandbox_error)
        submission = task.restated(statement).with_body(body)
        unwritten = await anyio.to_thread.run_sync(write_submission, ws.submission, submission)
        t_verdict = time.perf_counter()
        verdict, graded = await self._verdict(task, submission, statement)
        verdict_s = time.perf_counter() - t_verdict
        calls, lean_s, died = await anyio.to_thread.run_sync(ledger_totals, ws, self.ledger_path)
        infra += died
        usage = await anyio.to_thread.run_sync(read_usage, ws.workspace / USAGE_FILE)
        model: dict[str, Any] = {}
        if gateway is not None:
            # Tokens from the wire, whatever the agent wrote; USD from --prices.
            usage = gateway_usage(gateway)
            kinds = count_kinds(gateway.calls)
            model = {
                "model_calls": kinds["model"],
                "other_calls": kinds["other"] + kinds["refused"],
                "usage_source": "gateway",
                "model_s": round(model_time(gateway.calls), 3),
            }
        elif any(v is not None for v in usage.model_dump().values()):
            model = {"usage_source": "agent"}
        if self.harness is not None:
            log_bytes = await anyio.to_thread.run_sync(read_capped, ws.log)
            reported = harness_usage(self.harness.name, log_bytes)
            model["harness_usage"] = reported
            model["usage_mismatch"] = usage_mismatch(usage, reported)
        notes, self.suite_hash = await anyio.to_thread.run_sync(
            ignored_edits, task, ws, self.suite.root, self.suite_hash
        )
        if unwritten is not None:
            notes.insert(0, unwritten)
        if inv.start_error:
            log.warning("run.agent_start_failed", task=task.id, error=inv.start_error)
        result = AttemptResult(
            task=task.id,
            field=task.spec.field,
            difficulty=task.spec.difficulty,
            attempt=k,
            accepted=verdict.accepted,
            reasons=list(verdict.reasons),
            invocation_s=round(inv.invocation_s, 3),
            timed_out=inv.timed_out,
            exit_code=inv.exit_code,
            tool_calls=calls,
            lean_s=round(lean_s, 3),
            final_body_sha=body_sha(body),
            condition=o.condition,
            model=o.model,
            kind=task.kind,
            statement=statement if writes_statement(task.kind) else None,
            equivalence=(graded.equivalence.to_json() if graded and graded.equivalence else None),
            agent_tool=o.agent_tool,
            verdict_s=round(verdict_s, 3),
            started_at=started_at,
            notes=notes,
            **model,
        ).with_usage(usage)
        overhead = (time.perf_counter() - t0) - (t_after - t_agent) - verdict_s
        log.info(
            "run.attempt_timing",
            task=task.id,
            attempt=k,
            overhead_ms=round(overhead * 1000, 1),
            service_open_s=server.open_s,
            service_close_s=server.close_s,
        )
        return AttemptOutcome(result, infra, overhead, inv, server.open_s)

    async def _verdict(
        self, task: Task, submission: str, statement: str
    ) -> tuple[Verdict, StatementVerdict | None]:
        """The attempt's verdict per its task's kind, and the statement's grade if it wrote one."""
        graded = None
        if writes_statement(task.kind):
            budget = self.options.equiv_budget or self.suite.spec.limits.equiv_seconds
            graded = await self.statements.grade(task, statement, budget)
        if not writes_proof(task.kind):
            assert graded is not None
            verdict = Verdict(
                accepted=graded.accepted,
                reasons=graded.reasons,
                axioms=(),
                elapsed_ms=graded.elapsed_ms,
                lean_version=self.install.version,
            )
            return verdict, graded
        proved = task.restated(statement)
        verdict = await self.verifier.verify(proved, submission)
        if not verdict.accepted and any(r.startswith("crash:") for r in verdict.reasons):
            # A crashed checking Lean is the runner's infrastructure, not the agent's doing.
            log.warning("run.verdict_crash", task=task.id, reasons=list(verdict.reasons))
            verdict = await self.verifier.verify(proved, submission)
        if graded is not None and not graded.accepted:
            verdict = dataclasses.replace(
                verdict, accepted=False, reasons=(*graded.reasons, *verdict.reasons)
            )
        return verdict, graded

    def run_info(self, started_at: datetime, ended_at: datetime | None) -> RunInfo:
        o = self.options
        network = (
            {
                "all": "on",
                "model": "its model only (the run's gateway)",
                "none": "off",
            }[self.network]
            if self.isolated
            else "on (no bwrap)"
        )
        state = (
            "run state hidden, verdict inputs read-only to the agent"
            if self.isolated
            else "run state and verdict inputs writable by the agent (no bwrap)"
        )
        sandbox = f"{self.sandbox}; agent network {network}; {state}"
        if self.cluster is not None:
            sandbox = (
                f"on each cluster node as here, where bwrap works there (a results line "
                f"notes an agent that ran without it); agent network "
                f"{self.network}"
            )
        return RunInfo(
            label=o.label,
            suite_name=self.suite.name,
            suite_version=self.suite.spec.version,
            suite_hash=self.suite.content_hash(),
            task_count=len(self.selected()),
            tasks=[
                TaskRef(id=t.id, field=t.spec.field, difficulty=t.spec.difficulty, kind=t.kind)
                for t in self.selected()
            ],
            model=o.model,
            agent_tool=o.agent_tool,
            condition=o.condition,
            time_limit_s=o.time_limit,
            attempts=o.attempts,
            parallel=o.parallel,
            retry_policy=RETRY_POLICY,
            leanrig_version=package_version(),
            lean_version=self.install.version,
            sandbox=sandbox,
            cluster=self.cluster,
            machine=Machine(cores=os.cpu_count() or 1, memory_bytes=psutil.virtual_memory().total),
            started_at=started_at,
            ended_at=ended_at,
            agent_command=o.agent,
            prices=load_prices(o.prices) if o.prices else o.prices_schedule,
            harness=harness_record(self.harness, self.route, o),
            agent_network=self.network if self.isolated else "all",
            model_endpoint=self.route.upstream if self.route is not None else None,
            programs=self.programs,
            agent_home=str(o.agent_home) if o.agent_home is not None else None,
        )

    def selected(self) -> list[Task]:
        if self.options.tasks is None:
            return list(self.suite.tasks.values())
        return [self.suite.task(t) for t in self.options.tasks]


@dataclass
class RunStart:
    """A run ready for its attempts: its runner and what `start_run` found on disk."""

    runner: Runner
    started_at: datetime
    done: set[tuple[str, int]]  # (task, k) with a results line already (--resume)
    t_start: float


async def start_run(options: RunOptions) -> RunStart:
    """Check ``options`` and make the run's `Runner`; `RunError` for what cannot be run."""
    if options.attempts < 1 or options.parallel < 1 or options.time_limit <= 0:
        raise RunError("--attempts and --parallel must be >= 1 and --time-limit > 0")
    if options.prices is not None:  # read before anything is written
        await anyio.to_thread.run_sync(load_prices, options.prices)
    t_start = time.perf_counter()
    run_dir = (options.out or Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")).resolve()
    started_at = datetime.now(UTC)
    done: set[tuple[str, int]] = set()
    previous: RunInfo | None = None
    if options.resume:
        try:
            previous = await anyio.to_thread.run_sync(read_run_info, run_dir)
        except LeanrigError as exc:
            raise RunError(f"--resume: {exc}", hint="resume a run directory") from None
        if previous.condition == "human":
            raise RunError(
                f"--resume: {run_dir} holds human attempts made in an editor (leanrig lsp), "
                "not a leanrig run",
                hint="resume the directory of a leanrig run (its --out)",
            )
        options = resumed(options, previous)
        started_at = previous.started_at
        done = finished_attempts(read_results(run_dir).results)
        await anyio.to_thread.run_sync(sweep_interrupted, run_dir, done)
    elif (run_dir / "results.jsonl").exists():
        raise RunError(f"{run_dir} already holds a run", hint="pass --resume, or another --out")
    harness: HarnessSetup | None = None
    if options.harness is not None:
        if not options.model:
            raise RunError("--harness needs --model ID (the model the harness asks for)")
        words: list[str] = []
    else:
        words = agent_words(options.agent)
    route = model_route(options, dict(os.environ))
    # The key lives in the route (the gateway) alone: no agent inherits it.
    withdraw_keys(os.environ, route.key_var if route else options.model_key_env)
    if options.harness is not None:
        program = await anyio.to_thread.run_sync(find_harness, options.harness, options.harness_bin)
        version = await anyio.to_thread.run_sync(
            lambda: harness_version(program, sandbox=probe_prefix(program))
        )
        harness = HarnessSetup(options.harness, program, version)
    if options.agent_home is not None and not options.agent_home.is_dir():
        raise RunError(f"--agent-home {options.agent_home} is not a directory")
    suite = await anyio.to_thread.run_sync(load_suite, options.suite)
    check_suite(suite)
    for task_id in options.tasks or ():  # refused before anything is written
        suite.task(task_id)
    install = await anyio.to_thread.run_sync(lambda: find_lean(suite.root, explicit=options.lean))
    library = await anyio.to_thread.run_sync(library_dir, suite, install)
    if options.condition == "lad":  # built once here: no attempt pays for it
        (await prepare_library(suite, install, library)).close()
    if previous is not None and previous.suite_hash != suite.content_hash():
        raise RunError(f"--resume: the suite changed since {run_dir} was started")
    if previous is not None:
        done |= await anyio.to_thread.run_sync(record_interrupted, run_dir, suite, options, done)
    runner = Runner(options, suite, install, library, run_dir, words, harness, route)
    return RunStart(runner, started_at, done, t_start)


async def run_attempts(start: RunStart, attempt: RunAttempt) -> RunSummary:
    """Run every attempt of ``start`` not yet done through ``attempt``, each to its results line."""
    runner, options, run_dir = start.runner, start.runner.options, start.runner.run_dir
    started_at, done = start.started_at, start.done
    summary = RunSummary(run_dir)
    sandbox = await anyio.to_thread.run_sync(
        lambda: agent_sandbox(network=runner.network == "all", mounts=())
    )
    if sandbox is None:
        log.warning(
            "run.agent_unsandboxed",
            detail="bwrap cannot sandbox the agent here: it "
            "keeps the network and can write the run's state",
        )
    runner.isolated = sandbox is not None
    await anyio.to_thread.run_sync(write_run_info, run_dir, runner.run_info(started_at, None))
    jobs = [
        (task, k)
        for k in range(1, options.attempts + 1)
        for task in runner.selected()
        if (task.id, k) not in done
    ]
    summary.skipped = len(runner.selected()) * options.attempts - len(jobs)
    limiter = anyio.CapacityLimiter(options.parallel)
    async with gateway_client() as client:
        runner.client = client
        await _attempts(attempt, options, run_dir, jobs, limiter, summary)
    await anyio.to_thread.run_sync(
        write_run_info, run_dir, runner.run_info(started_at, datetime.now(UTC))
    )
    summary.elapsed_s = time.perf_counter() - start.t_start
    return summary


async def _attempts(
    attempt: RunAttempt,
    options: RunOptions,
    run_dir: Path,
    jobs: list[tuple[Task, int]],
    limiter: anyio.CapacityLimiter,
    summary: RunSummary,
) -> None:
    with RunProgress(total=len(jobs), enabled=not options.quiet and sys.stderr.isatty()) as bar:

        async def one(task: Task, k: int) -> None:
            async with limiter:
                bar.started()
                marker = started_marker(run_dir, task.id, k)
                await anyio.to_thread.run_sync(mark_started, marker)
                try:
                    outcome = await attempt(task, k, bar)
                except anyio.get_cancelled_exc_class():
                    # Unmarked, so `--resume` runs it again.
                    marker.unlink(missing_ok=True)
                    raise
                await anyio.to_thread.run_sync(append_result, run_dir, outcome.result)
                marker.unlink(missing_ok=True)
                summary.results.append(outcome.result)
                summary.infra_retries += outcome.result.infra_retry
                summary.overhead_s.append(outcome.overhead_s)
                if outcome.placement_s is not None:
                    summary.placement_s.append(outcome.placement_s)
                if outcome.invocation is not None and outcome.invocation.timed_out:
                    summary.kill_s.append(outcome.invocation.kill_s)
                bar.finished(outcome.result.accepted)

        async with anyio.create_task_group() as tg:
            for task, k in jobs:
                tg.start_soon(one, task, k)
