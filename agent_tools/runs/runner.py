"""`leanrig run`: drive any agent over a suite under the published run protocol.

Per attempt (task × 1..K): a fresh workspace (workspace.py), the attempt's task-bound service
owned by the runner and served on a Unix socket (attempt_server.py; the agent's MCP config
starts a relay to it), a fresh agent process in its sandbox with a wall-clock limit whose whole
tree is killed at the limit (invocation.py), then the final submission — the last body the
runner's service recorded, or the task's initial file when no session was ever opened — gets
the independent verdict (a fresh Lean process per check, outside the invocation's time). One
``results.jsonl`` line per attempt; an infrastructure failure (Lean or the runner's service
died, not the agent) is retried once with a fresh invocation, and the retry's line says so.
Tasks run serially unless ``parallel`` > 1 (a capacity limiter over one task group). ``resume``
skips the attempts already in ``results.jsonl``. See docs/runs.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shlex
import shutil
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import anyio
import orjson
import psutil
import structlog

from lsp_bridge import LeanInstall, LeanrigError, cache_root, find_lean
from repl_pool import SandboxPolicy, sandbox_programs, uses_namespaces

from ..library import index_dir, prepare_library
from ..models import ModelGateway, gateway_client, model_time, serve_asgi, socket_url
from ..servers import ServeOptions, listen_local, package_version
from ..sessions import replace_file
from ..tasks import Suite, SuiteError, Task, library_dir, load_suite
from ..verdict import Verdict, Verifier
from .attempt_server import AttemptServer, ServiceFactory
from .harness import (
    KEY_PLACEHOLDER,
    KEY_VARS,
    VENDOR_ENDPOINT,
    HarnessName,
    Launch,
    find_harness,
    harness_usage,
    harness_version,
    key_variable,
    launch,
    plan_launch,
    usage_mismatch,
)
from .harness import Attempt as HarnessAttempt
from .invocation import (
    KILL_DEADLINE,
    Invocation,
    Mount,
    agent_homes,
    agent_sandbox,
    hidden_mounts,
    invoke,
    kill_attempt,
    other_runs,
    pinned_ancestors,
    repository_stores,
    scratch_mounts,
    trusted_paths,
)
from .prices import PriceSchedule, load_prices
from .progress import RunProgress
from .results import (
    USAGE_FILE,
    AttemptResult,
    Condition,
    HarnessInfo,
    Machine,
    RunInfo,
    TaskRef,
    Usage,
    append_result,
    finished_attempts,
    read_agent_file,
    read_results,
    read_run_info,
    read_usage,
    write_run_info,
)
from .workspace import (
    ATTEMPT_TOKEN_VAR,
    SOCKET_FILE,
    Workspace,
    agent_argv,
    create_workspace,
    relay_command,
)

log = structlog.get_logger("leanrig.run")

DEFAULT_TIME_LIMIT: Final = 1800.0
RETRY_POLICY: Final = "an infrastructure failure (Lean or leanrig died) is retried once"
SOCKET_PATH_MAX: Final = 100  # bytes of a Unix socket's path (the kernel's limit is 107)
# Ledger outcomes that mean Lean died under a call (the pool replaced the process).
INFRA_OUTCOMES: Final = frozenset({"error:lean_failure"})
# What the agent may reach over the network: nothing; only its model, through the run's
# gateway (a loopback port inside its sandbox); everything.
NetworkPolicy = Literal["none", "model", "all"]
MODEL_SOCKET_FILE: Final = "model.sock"
# The model gateway's port on the loopback of the agent's own network namespace.
MODEL_PORT: Final = 4141
FORWARD_SCRIPT: Final = Path(__file__).resolve().with_name("port_forward.py")
MODEL_CALLS_FILE: Final = "model_calls.jsonl"


class RunError(LeanrigError):
    hint = "see `leanrig run --help` and docs/runs.md"


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """How the attempts' agents reach their model: through a gateway per attempt to
    ``upstream``, the key (from the runner's environment) added on the way out."""

    upstream: str
    key_var: str | None
    key: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class HarnessSetup:
    name: HarnessName
    program: Path
    version: str


def network_policy(options: RunOptions) -> NetworkPolicy:
    """The agent's network: as given, else its model only when it has one, else none."""
    if options.agent_network is not None:
        return options.agent_network
    return "model" if options.harness or options.model_endpoint else "none"


def model_route(options: RunOptions, env: dict[str, str]) -> ModelRoute | None:
    """Where the gateway forwards (None: no gateway), refusing settings that cannot work."""
    policy = network_policy(options)
    if options.harness is not None and policy == "none":
        raise RunError(
            "--agent-network none leaves a harness no way to its model",
            hint="leave --agent-network out (model: the gateway only), or give all",
        )
    endpoint = options.model_endpoint
    if endpoint is None and options.harness is not None:
        endpoint = VENDOR_ENDPOINT[options.harness]
    if endpoint is None:
        if policy == "model":
            raise RunError("--agent-network model needs a model: give --model-endpoint URL")
        return None
    if policy == "none":
        raise RunError("--model-endpoint with --agent-network none: the agent could not reach it")
    if not endpoint.startswith(("http://", "https://")):
        raise RunError(f"--model-endpoint {endpoint!r} is not an http(s) URL")
    var = (
        key_variable(options.harness, options.model_key_env, env)
        if options.harness is not None
        else options.model_key_env
    )
    key = env.get(var) if var else None
    if var is not None and not key:
        raise RunError(f"--model-key-env {var}: the variable is not set (or empty)")
    return ModelRoute(upstream=endpoint, key_var=var, key=key)


@dataclass(frozen=True, slots=True)
class RunOptions:
    suite: Path
    agent: str  # the command line exactly as given to --agent
    out: Path | None = None  # default: runs/run-<timestamp>
    condition: Condition = "baseline"
    time_limit: float = DEFAULT_TIME_LIMIT
    attempts: int = 1
    parallel: int = 1
    label: str | None = None
    model: str | None = None
    agent_tool: str | None = None
    prices: Path | None = None
    resume: bool = False
    tasks: Sequence[str] | None = None  # a subset of the suite's tasks (default: all)
    # None: "model" when the agent has a model endpoint (a harness, --model-endpoint), else
    # "none".
    agent_network: NetworkPolicy | None = None
    harness: HarnessName | None = None  # a preset instead of `agent` (harness.py)
    harness_bin: Path | None = None
    reasoning: str | None = None  # the harness's reasoning effort
    # Where the gateway forwards model calls (default: the harness vendor's public API).
    model_endpoint: str | None = None
    model_key_env: str | None = None  # the runner's variable holding the model's key
    quiet: bool = False
    lean: str | None = None
    # How the runner opens each attempt's service (default `agent_tools.servers.open_service`);
    # tests put a failing one here.
    service: ServiceFactory | None = None
    max_processes: int | None = None  # Lean processes per attempt's pool (default: by cores)
    # The run settings the user gave explicitly (the CLI passes them; see `resumed`). None:
    # every setting that differs from its default counts as given.
    given: frozenset[str] | None = None
    # A resumed run's recorded price schedule (the file it came from may be gone).
    prices_schedule: PriceSchedule | None = None


@dataclass(slots=True)
class RunSummary:
    run_dir: Path
    results: list[AttemptResult] = field(default_factory=list)  # this invocation's lines
    skipped: int = 0  # attempts already finished (resume)
    infra_retries: int = 0
    elapsed_s: float = 0.0
    overhead_s: list[float] = field(default_factory=list)  # per attempt, beyond the agent
    kill_s: list[float] = field(default_factory=list)  # per timed-out attempt

    @property
    def accepted(self) -> int:
        return sum(r.accepted for r in self.results)

    @property
    def agent_never_ran(self) -> bool:
        """Did every attempt's agent fail before calling any tool — exit with an error, or not
        start at all (no exit code) — rather than run out of time (a command that cannot run in
        the attempt's workspace: a relative path, a missing program)?"""
        return bool(self.results) and all(
            r.tool_calls == 0 and not r.timed_out and r.exit_code != 0 for r in self.results
        )


@dataclass(frozen=True, slots=True)
class _Outcome:
    result: AttemptResult
    infra: list[str]  # why this looks like an infrastructure failure (empty: it does not)
    overhead_s: float
    invocation: Invocation
    service_open_s: float | None = None  # opening the attempt's service (beside the agent)


def gateway_usage(gateway: ModelGateway) -> Usage:
    """The attempt's tokens as the gateway counted them off the wire: the sum over its
    answered calls (2xx); a count any of them lacks is unknown (None), never guessed."""
    answered = [c.usage for c in gateway.calls if c.status is not None and 200 <= c.status < 300]

    def total(key: str) -> int | None:
        values = [getattr(u, key) for u in answered]
        return None if any(v is None for v in values) else sum(values)  # (no call: 0)

    return Usage(input_tokens=total("input_tokens"), cached_input_tokens=total(
        "cached_input_tokens"), output_tokens=total("output_tokens"),
        reasoning_tokens=total("reasoning_tokens"))  # fmt: skip


def _read_capped(path: Path, cap: int = 16 * 2**20) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(cap)
    except OSError:
        return b""


def body_sha(body: str) -> str:
    """As the sessions' ledger hashes bodies (12 hex digits of SHA-256)."""
    return hashlib.sha256(body.encode()).hexdigest()[:12]


# The settings a run directory records and a resume must keep: RunOptions field → how run.json
# records it. A resume that leaves one out takes the recorded value; one given differently is
# refused. (`parallel`, `quiet`, `agent_network` and `lean` may change between sessions.)
RESUME_SETTINGS: Final = ("agent", "condition", "label", "model", "agent_tool", "time_limit",
                          "attempts", "prices", "tasks")  # fmt: skip


def _recorded(info: RunInfo, name: str) -> object:
    match name:
        case "agent":
            return info.agent_command
        case "time_limit":
            return info.time_limit_s
        case "tasks":
            return tuple(t.id for t in info.tasks) or None
        case _:
            return getattr(info, name)


def resumed(options: RunOptions, info: RunInfo) -> RunOptions:
    """``options`` for resuming the run ``info`` describes: every setting not given takes the
    recorded value; a given one that differs from the record is refused (RunError naming each
    conflict), so run.json and every results line keep describing one run."""
    defaults = RunOptions(suite=options.suite, agent=options.agent)
    update: dict[str, Any] = {}
    conflicts = []
    for name in RESUME_SETTINGS:
        value = getattr(options, name)
        recorded = _recorded(info, name)
        given = (
            name in options.given
            if options.given is not None
            else name == "agent" or value != getattr(defaults, name)
        )
        if name == "prices":
            mine = load_prices(value) if given and value is not None else None
            if given and mine != recorded:
                conflicts.append(f"--prices {value} differs from the recorded schedule")
            elif not given and recorded is not None:
                update["prices_schedule"] = recorded
            continue
        same = value == recorded
        if name == "tasks":
            same = set(value or ()) == set(recorded or ()) if isinstance(recorded, tuple) else same
        if given and not same:
            flag = "--" + name.replace("_", "-")
            conflicts.append(f"{flag} {value!r} (recorded: {recorded!r})")
        elif not given:
            update[name] = recorded
    if conflicts:
        raise RunError(
            "--resume: the run was started with other settings: " + "; ".join(conflicts),
            hint="leave these options out to keep the recorded ones, or start a new run "
            "with another --out",
        )
    return replace(options, **update)


def _agent_words(agent: str) -> list[str]:
    """The agent command's words, its program made absolute: the agent starts in its
    workspace, so a path relative to where ``leanrig run`` was typed (``./agent.sh``) passed
    this check and then failed every attempt."""
    try:
        words = shlex.split(agent)
    except ValueError as exc:
        raise RunError(f"--agent: {exc}") from None
    if not words:
        raise RunError("--agent is empty")
    program = words[0]
    if "{" in program:
        return words
    if "/" in program:
        # Absolute, links kept: a venv's `python` is a link, and resolved it loses the venv.
        path = Path(os.path.abspath(program))
        if not path.is_file():
            raise RunError(
                f"--agent: cannot find {program!r}", hint="give a command on PATH or a path"
            )
        if not os.access(path, os.X_OK):
            hint = f"chmod +x {program}, or start it through its interpreter"
            raise RunError(f"--agent: {program!r} is not executable", hint=hint)
        return [str(path), *words[1:]]
    if shutil.which(program) is None:
        raise RunError(f"--agent: cannot find {program!r}", hint="give a command on PATH or a path")
    return words


def socket_parent() -> Path:
    """The per-user directory holding every run's socket directory (short: a socket path has
    at most 107 bytes), private to the user."""
    base = tempfile.gettempdir()
    if len(base) > SOCKET_PATH_MAX - 60:
        base = "/tmp"
    parent = Path(base) / f"leanrig-sockets-{os.getuid()}"
    parent.mkdir(mode=0o700, exist_ok=True)
    if parent.is_symlink() or parent.stat().st_uid != os.getuid():
        raise RunError(f"{parent} is not this user's directory", hint="remove it and run again")
    parent.chmod(0o700)
    return parent


def sweep_socket_dirs(parent: Path) -> None:
    """Remove the socket directories of runners that are gone (a run killed with SIGKILL
    cannot remove its own): each is named ``run-<runner pid>-…``."""
    for entry in parent.glob("run-*-*"):
        pid = entry.name.split("-")[1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _write_submission(path: Path, text: str) -> str | None:
    """Write the judged file as the workspace's ``Submission.lean`` (for the reader: the
    verdict judges the text itself); None, or the note for the results line when the agent
    left something there that cannot be replaced by a file (a directory: the runner crashed on
    it and `--resume` gave the agent another try, unrecorded, as often as it liked)."""
    try:
        replace_file(path, text.encode())
    except OSError as exc:
        log.warning("run.submission_unwritten", path=str(path), error=str(exc))
        return (
            f"the workspace's {path.name} could not be written ({exc.strerror or exc}: the "
            "agent left something there); the verdict judged the final body as usual"
        )
    return None


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
    ) -> None:
        # Resolved once, before any agent runs: a link on the way (`~/.cache` pointing at
        # another disk) is in a directory the agent may write, and repointed it would hand the
        # verdicts another Lean or library.
        install = dataclasses.replace(
            install,
            lean=install.lean.resolve(),
            lake=install.lake.resolve() if install.lake is not None else None,
        )
        library = library.resolve() if library is not None else None
        run_dir = run_dir.resolve()
        cache_root().mkdir(parents=True, exist_ok=True)  # (read-only to agents only if it is there)
        index_dir().mkdir(parents=True, exist_ok=True)  # (hidden from baseline agents: there)
        self.options = options
        self.suite = suite
        self.run_dir = run_dir
        self.words = words
        scratch = run_dir / "scratch"
        scratch.mkdir(parents=True, exist_ok=True)
        policy = SandboxPolicy(writable=(scratch,))
        self.sandbox = "bwrap" if uses_namespaces(policy) else "rlimits"
        self.verifier = Verifier(suite, install, library=library, sandbox=policy, work_root=scratch)
        self.install = install
        # What the agent's sandbox keeps read-only, resolved once, before any agent runs (a
        # link in the agent's home repointed later must not move what is protected).
        self.trusted = trusted_paths(install.lean, extra=[*self.verifier.programs,
                                                          *sandbox_programs()])  # fmt: skip
        self.isolated = False  # the agent runs in its sandbox (agent_sandbox works here)
        self.ledger_path = run_dir / "ledger.jsonl"
        self.suite_hash = suite.content_hash()
        # The attempts' sockets: a short runner-owned directory (a socket path has at most
        # 107 bytes, a run directory's can be longer); removed at the end of the run.
        # Every run's socket directory lies in one per-user parent, which each agent's sandbox
        # hides whole: an agent cannot reach another run's (or a later run's) sockets.
        self.socket_parent = socket_parent()
        self.hidden = self._hidden()
        sweep_socket_dirs(self.socket_parent)
        prefix = f"run-{os.getpid()}-"
        self.socket_root = Path(tempfile.mkdtemp(prefix=prefix, dir=self.socket_parent))
        self._sockets = 0
        self.harness = harness
        self.network = network_policy(options)
        self.route = route
        self.client: Any = None  # the gateways' upstream client, open during the run

    # -- one attempt --------------------------------------------------------------------------

    async def attempt(self, task: Task, k: int, progress: RunProgress) -> _Outcome:
        outcome = await self._attempt_once(task, k, retry=False)
        if outcome.infra:
            log.warning("run.infra_failure", task=task.id, attempt=k, why=outcome.infra)
            progress.note(f"{task.id}#{k}: infrastructure failure ({outcome.infra[0]}); retrying")
            retry = await self._attempt_once(task, k, retry=True)
            result = retry.result.model_copy(update={"infra_retry": True})
            if retry.infra:
                reasons = [*result.reasons, *(f"infrastructure: {w}" for w in retry.infra)]
                result = result.model_copy(update={"reasons": reasons})
            return _Outcome(result, retry.infra, retry.overhead_s, retry.invocation,
                            retry.service_open_s)  # fmt: skip
        return outcome

    def _socket(self) -> Path:
        self._sockets += 1
        return self.socket_root / str(self._sockets) / SOCKET_FILE

    def _sandbox(
        self, ws: Workspace, argv: Sequence[str], home: Path | None = None
    ) -> tuple[str, ...]:
        """The agent's sandbox prefix: the host's file system read-only, then these mounts in
        order (a later one shows through an earlier one): a private /tmp, /var/tmp and
        /dev/shm, with the files its command names there (read-only); its home and
        configuration directories writable (``agent_homes``), every directory in them above
        what follows pinned as a mount point (so it cannot be renamed); read-only what the
        verdict trusts (``trusted_paths``: Lean, the cache, leanrig and its Python) and the
        suite, but for its ``hidden`` paths (and the LAD library in a baseline run), what the
        command names there shown read-only; the run directory hidden (a later attempt cannot
        read an earlier one's files); the runner's socket directory hidden but for this
        attempt's socket; the workspace writable. ``home``: the attempt's own home (a harness:
        its state and configuration), writable, instead of the user's."""
        if not self.isolated:
            return ()
        fresh, named = scratch_mounts(argv)
        homes = agent_homes(os.environ) if home is None else []
        trusted = self.trusted
        suite = self.suite.root.resolve()
        mounts: list[Mount] = [
            *fresh,
            *named,
            *(("--bind", h) for h in homes),
            *pinned_ancestors([*trusted, suite, self.run_dir], homes),
            *(("--ro-bind", p) for p in trusted),
            ("--ro-bind", suite),
            *hidden_mounts(self.hidden, argv),
            ("--tmpfs", self.run_dir),
            ("--tmpfs", self.socket_parent),
            ("--ro-bind", ws.socket.parent),
            ("--bind", ws.workspace),
            *((("--bind", home),) if home is not None else ()),
        ]
        return agent_sandbox(network=self.network == "all", mounts=mounts) or ()

    def _hidden(self) -> list[Path]:
        """What the agent must not read, in its sandbox and through its Lean: the suite's
        `hidden` paths; in baseline runs the LAD library and its cached indexes (a baseline
        agent with file tools could read them: the comparison of the conditions assumes it
        cannot); when either is hidden, the stores of the repositories holding the suite
        (their history holds it too); earlier runs beside this one. Once per run."""
        suite = self.suite.root.resolve()
        hidden = [*self.suite.hidden_paths]
        if self.options.condition != "lad":
            lad = [*self.suite.lad_files, index_dir().resolve()]
            hidden += [p for p in lad if p not in hidden]
        if self.suite.hidden_paths or self.suite.lad_files:
            hidden += [p for p in repository_stores(suite) if p not in hidden]
        needed = [suite, *self.trusted, *agent_homes(os.environ), self.socket_parent]
        return hidden + other_runs(self.run_dir, needed)

    async def _attempt_once(self, task: Task, k: int, *, retry: bool) -> _Outcome:
        t0 = time.perf_counter()
        started_at = datetime.now(UTC)
        o = self.options

        socket = self._socket()

        def make() -> Workspace:
            return create_workspace(self.run_dir, self.suite, task, k, token=uuid.uuid4().hex,
                                    socket=socket, retry=retry,
                                    library=self.options.condition == "lad")  # fmt: skip

        ws = await anyio.to_thread.run_sync(make)
        serve = ServeOptions(
            suite=self.suite.root, run_dir=ws.serve_dir, ledger=ws.ledger, task=task.id,
            condition="lad" if o.condition == "lad" else "baseline", lean=o.lean,
            max_processes=o.max_processes, install=self.install,
            # (Its Lean reads no run directory but its own scratch, bound over these.)
            hidden=(*self.hidden, self.run_dir, self.socket_parent) if self.isolated else (),
        )  # fmt: skip
        server = AttemptServer(serve, socket, o.service)
        await server.bind()
        gateway, listener, model_url = await anyio.to_thread.run_sync(self._gateway, ws)
        home = ws.root / "home" if self.harness is not None else None
        harness_env: dict[str, str] = {}
        if self.harness is not None:
            assert model_url is not None
            assert home is not None
            started = await anyio.to_thread.run_sync(self._launch, ws, home, model_url)
            command, harness_env = started.argv, started.env
        else:
            command = agent_argv(self.words, ws)
        forward: list[str] = []
        if gateway is not None and self.isolated and self.network == "model":
            # The model's way in: a loopback port of the sandbox's own network namespace,
            # forwarded to the gateway's socket (bound into the sandbox with the MCP one).
            forward = [sys.executable, "-I", "-S", str(FORWARD_SCRIPT), str(MODEL_PORT),
                       str(ws.socket.parent / MODEL_SOCKET_FILE), "--"]  # fmt: skip
        argv = [*self._sandbox(ws, command, home), *forward, *command]
        env = {**self._agent_env(ws, model_url), **harness_env}
        stop_gateway = anyio.Event()
        async with anyio.create_task_group() as tg:
            # The service opens while the agent starts; the agent's first connection waits
            # in the socket's backlog until it serves.
            tg.start_soon(server.run)
            if gateway is not None and listener is not None:
                tg.start_soon(serve_asgi, gateway, listener, stop_gateway)
            t_agent = time.perf_counter()
            inv = await invoke(
                argv, cwd=ws.workspace, env=env, time_limit=o.time_limit, token=ws.token,
                token_var=ATTEMPT_TOKEN_VAR, log_path=ws.log, abort=server.failed,
                sandboxed=self.isolated,
            )  # fmt: skip
            t_after = time.perf_counter()
            stop_gateway.set()
            await server.stop()
        body, infra = await anyio.to_thread.run_sync(self._final_body, ws)
        if server.failure is not None:
            infra.append(server.failure)
        if inv.sandbox_error is not None:
            infra.append(inv.sandbox_error)
        submission = task.with_body(body)
        unwritten = await anyio.to_thread.run_sync(_write_submission, ws.submission, submission)
        t_verdict = time.perf_counter()
        verdict = await self._verdict(task, submission)
        verdict_s = time.perf_counter() - t_verdict
        calls, lean_s, died = await anyio.to_thread.run_sync(self._ledger, ws)
        infra += died
        usage = await anyio.to_thread.run_sync(read_usage, ws.workspace / USAGE_FILE)
        model: dict[str, Any] = {}
        if gateway is not None:
            # Tokens from the wire, whatever the agent wrote; USD from --prices.
            usage = gateway_usage(gateway)
            model = {"model_calls": len(gateway.calls), "usage_source": "gateway",
                     "model_s": round(model_time(gateway.calls), 3)}  # fmt: skip
        elif any(v is not None for v in usage.model_dump().values()):
            model = {"usage_source": "agent"}
        if self.harness is not None:
            log_bytes = await anyio.to_thread.run_sync(_read_capped, ws.log)
            reported = harness_usage(self.harness.name, log_bytes)
            model["harness_usage"] = reported
            model["usage_mismatch"] = usage_mismatch(usage, reported)
        notes = await anyio.to_thread.run_sync(self._ignored_edits, task, ws)
        if unwritten is not None:
            notes.insert(0, unwritten)
        if inv.start_error:
            log.warning("run.agent_start_failed", task=task.id, error=inv.start_error)
        result = AttemptResult(
            task=task.id, field=task.spec.field, difficulty=task.spec.difficulty, attempt=k,
            accepted=verdict.accepted, reasons=list(verdict.reasons),
            invocation_s=round(inv.invocation_s, 3), timed_out=inv.timed_out,
            exit_code=inv.exit_code, tool_calls=calls, lean_s=round(lean_s, 3),
            final_body_sha=body_sha(body), condition=o.condition, model=o.model,
            agent_tool=o.agent_tool, verdict_s=round(verdict_s, 3), started_at=started_at,
            notes=notes, **model,
        ).with_usage(usage)  # fmt: skip
        # leanrig's own time for this attempt: everything but the agent's run and the verdict.
        overhead = (time.perf_counter() - t0) - (t_after - t_agent) - verdict_s
        log.info("run.attempt_timing", task=task.id, attempt=k,
                 overhead_ms=round(overhead * 1000, 1), service_open_s=server.open_s,
                 service_close_s=server.close_s)  # fmt: skip
        return _Outcome(result, infra, overhead, inv, server.open_s)

    def _gateway(
        self, ws: Workspace
    ) -> tuple[ModelGateway | None, socket.socket | None, str | None]:
        """The attempt's model gateway, its listening socket and the URL the agent reaches it
        at: in the sandbox without network, a Unix socket beside the attempt's MCP socket (a
        forwarder inside serves the loopback port); else a loopback TCP port."""
        if self.route is None:
            return None, None, None
        gateway = ModelGateway(upstream=self.route.upstream, client=self.client,
                               calls_path=ws.root / MODEL_CALLS_FILE,
                               placeholder=KEY_PLACEHOLDER, key=self.route.key)  # fmt: skip
        if self.isolated and self.network == "model":
            path = ws.socket.parent / MODEL_SOCKET_FILE
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(path))
            listener.listen(64)
            listener.setblocking(False)
            return gateway, listener, f"http://127.0.0.1:{MODEL_PORT}"
        listener = listen_local(0)
        return gateway, listener, socket_url(listener)

    def _launch(self, ws: Workspace, home: Path, model_url: str) -> Launch:
        """The harness's command for this attempt; its configuration written into ``home``
        and recorded (``harness.json`` in the attempt's directory)."""
        assert self.harness is not None
        home.mkdir(parents=True, exist_ok=True)
        o = self.options
        attempt = HarnessAttempt(
            prompt=ws.prompt.read_text(encoding="utf-8"), workspace=ws.workspace, home=home,
            mcp_command=relay_command(ws.socket), mcp_env={ATTEMPT_TOKEN_VAR: ws.token},
            model_url=model_url, time_limit=o.time_limit,
        )  # fmt: skip
        started = launch(self.harness.name, self.harness.program, attempt,
                         model=o.model or "", reasoning=o.reasoning,
                         key_var=self.route.key_var if self.route else None)  # fmt: skip
        record = {"argv": started.argv, "env": started.env,
                  "files": {str(p): t for p, t in started.files.items()}}  # fmt: skip
        (ws.root / "harness.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
        return started

    def _agent_env(self, ws: Workspace, model_url: str | None) -> dict[str, str]:
        env = ws.agent_env(os.environ)
        if self.isolated:
            env["TMPDIR"] = "/tmp"  # its private one (a TMPDIR elsewhere is shared)
        if self.route is not None:
            # The key stays with the runner: the agent gets the gateway's placeholder.
            for var in {*(v for vs in KEY_VARS.values() for v in vs), self.route.key_var}:
                if var is not None:
                    env.pop(var, None)
            assert model_url is not None
            env["LEANRIG_MODEL_URL"] = model_url
            env["LEANRIG_MODEL_KEY"] = KEY_PLACEHOLDER
        return env

    def _ignored_edits(self, task: Task, ws: Workspace) -> list[str]:
        """Files the agent changed that count for nothing (recorded in the results line):
        its copy of the task file, the suite on disk (every verdict uses the tasks as loaded
        when the run started)."""
        notes = []
        try:
            data = read_agent_file(ws.task_file, len(task.text.encode()) + 1)
            if data is None:
                notes.append(f"the workspace's {ws.task_file.name} was removed or replaced by a "
                             "non-file")  # fmt: skip
            elif data.decode("utf-8") != task.text:
                notes.append(f"the workspace's {ws.task_file.name} was edited (ignored)")
        except (OSError, UnicodeDecodeError):
            notes.append(f"the workspace's {ws.task_file.name} was removed or made unreadable")
        try:
            now = load_suite(self.suite.root).content_hash()
        except LeanrigError as exc:
            now = f"unreadable: {exc}"
        if now != self.suite_hash:
            notes.append("the suite changed on disk during the attempt (ignored: verdicts use "
                         "the tasks as loaded when the run started)")  # fmt: skip
            log.warning("run.suite_changed", task=task.id, attempt=ws.attempt)
            self.suite_hash = now  # report the change once
        return notes

    def _final_body(self, ws: Workspace) -> tuple[str, list[str]]:
        """The last body any session of this attempt's service accepted (the task's initial
        body when none was opened): its submission record, in the runner's own directory
        (never the agent's to write where the sandbox works)."""
        best: tuple[int, str] | None = None
        for path in ws.submission_records():
            try:
                record = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            if not isinstance(record, dict) or record.get("task") != ws.task.id:
                continue
            body, ts = record.get("body"), record.get("ts_ns")
            if isinstance(body, str) and isinstance(ts, int) and (best is None or ts > best[0]):
                best = (ts, body)
        return (best[1] if best else ws.task.body), []

    async def _verdict(self, task: Task, submission: str) -> Verdict:
        verdict = await self.verifier.verify(task, submission)
        if not verdict.accepted and any(r.startswith("crash:") for r in verdict.reasons):
            # The checking Lean crashed: the runner's own infrastructure; check once more.
            log.warning("run.verdict_crash", task=task.id, reasons=list(verdict.reasons))
            verdict = await self.verifier.verify(task, submission)
        return verdict

    def _ledger(self, ws: Workspace) -> tuple[int, float, list[str]]:
        """Tool calls and Lean seconds from the attempt's ledger (appended to the run's), and
        whether Lean died under a call."""
        try:
            data = ws.ledger.read_bytes()
        except FileNotFoundError:
            return 0, 0.0, []
        calls, lean_ms, died = 0, 0.0, 0
        for line in data.splitlines():
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(entry, dict):
                continue
            calls += entry.get("closed_by") != "server"  # (the server's own closing lines)
            lean = entry.get("lean_ms")
            if isinstance(lean, int | float):
                lean_ms += lean
            if entry.get("outcome") in INFRA_OUTCOMES:
                died += 1
        if data:
            if not data.endswith(b"\n"):
                data += b"\n"
            fd = os.open(self.ledger_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        return calls, lean_ms / 1000, [f"Lean died under {died} call(s)"] if died else []

    # -- the run ------------------------------------------------------------------------------

    def run_info(self, started_at: datetime, ended_at: datetime | None) -> RunInfo:
        o = self.options
        network = {
            "all": "on",
            "model": "its model only (the run's gateway)",
            "none": "off",
        }[self.network] if self.isolated else "on (no bwrap)"  # fmt: skip
        state = (
            "run state hidden, verdict inputs read-only to the agent"
            if self.isolated
            else "run state and verdict inputs writable by the agent (no bwrap)"
        )
        return RunInfo(
            label=o.label, suite_name=self.suite.name, suite_version=self.suite.spec.version,
            suite_hash=self.suite.content_hash(), task_count=len(self.selected()),
            tasks=[TaskRef(id=t.id, field=t.spec.field, difficulty=t.spec.difficulty)
                   for t in self.selected()],
            model=o.model, agent_tool=o.agent_tool, condition=o.condition,
            time_limit_s=o.time_limit, attempts=o.attempts, parallel=o.parallel,
            retry_policy=RETRY_POLICY, leanrig_version=package_version(),
            lean_version=self.install.version,
            sandbox=f"{self.sandbox}; agent network {network}; {state}",
            machine=Machine(cores=os.cpu_count() or 1,
                            memory_bytes=psutil.virtual_memory().total),
            started_at=started_at, ended_at=ended_at, agent_command=o.agent,
            prices=load_prices(o.prices) if o.prices else o.prices_schedule,
            harness=self.harness_info(), agent_network=self.network if self.isolated else "all",
            model_endpoint=self.route.upstream if self.route is not None else None,
        )  # fmt: skip

    def harness_info(self) -> HarnessInfo | None:
        """The harness, and its command and configuration as templates (an attempt's paths,
        prompt and token as ``{…}``; each attempt's own in its ``harness.json``)."""
        h = self.harness
        if h is None:
            return None
        o = self.options
        template = HarnessAttempt(
            prompt="{prompt}", workspace=Path("{workspace}"), home=Path("{home}"),
            mcp_command=relay_command(Path("{mcp_socket}")),
            mcp_env={ATTEMPT_TOKEN_VAR: "{token}"}, model_url="{model_url}",
            time_limit=o.time_limit,
        )  # fmt: skip
        shown = plan_launch(h.name, h.program, template, model=o.model or "",
                            reasoning=o.reasoning,
                            key_var=self.route.key_var if self.route else None)  # fmt: skip
        return HarnessInfo(
            name=h.name, version=h.version, program=str(h.program), model=o.model or "",
            reasoning=o.reasoning, command=shown.argv, env=shown.env,
            files={str(p): t for p, t in shown.files.items()},
        )  # fmt: skip

    def selected(self) -> list[Task]:
        if self.options.tasks is None:
            return list(self.suite.tasks.values())
        return [self.suite.task(t) for t in self.options.tasks]


# An attempt under way: ``RUN_DIR/started/<task>.<k>``, written before its agent starts and
# removed once its results line is written or it is cancelled. One left behind is an attempt
# the runner died in (a crash, a disk the agent filled, a kill): `--resume` records it as not
# accepted instead of running it again — an agent able to bring the runner down got another,
# unrecorded try that way (a red-team sweep).
STARTED_DIR = "started"
INTERRUPTED = (
    "interrupted: the runner stopped during this attempt (recorded as not accepted, not run "
    "again: an attempt that could bring the runner down must not earn another try)"
)


def started_marker(run_dir: Path, task_id: str, k: int) -> Path:
    return run_dir / STARTED_DIR / f"{task_id}.{k}"


def _mark_started(marker: Path) -> None:
    marker.parent.mkdir(exist_ok=True)
    marker.write_text(datetime.now(UTC).isoformat())


def record_interrupted(
    run_dir: Path, suite: Suite, options: RunOptions, done: set[tuple[str, int]]
) -> set[tuple[str, int]]:
    """The results line of every attempt the runner died in (``STARTED_DIR``): not accepted,
    its time the whole limit. Returns those attempts."""
    recorded: set[tuple[str, int]] = set()
    for marker in sorted((run_dir / STARTED_DIR).glob("*.*")):
        task_id, _, k = marker.name.rpartition(".")
        task = suite.tasks.get(task_id)
        if task is None or not k.isdigit() or (task_id, int(k)) in done:
            marker.unlink(missing_ok=True)
            continue
        try:
            started = datetime.fromisoformat(marker.read_text().strip())
        except (OSError, ValueError):
            started = None
        append_result(run_dir, AttemptResult(
            task=task_id, field=task.spec.field, difficulty=task.spec.difficulty,
            attempt=int(k), accepted=False, reasons=[INTERRUPTED],
            invocation_s=options.time_limit, condition=options.condition, model=options.model,
            agent_tool=options.agent_tool, started_at=started,
        ))  # fmt: skip
        log.warning("run.interrupted_attempt_recorded", task=task_id, attempt=int(k))
        recorded.add((task_id, int(k)))
        marker.unlink(missing_ok=True)
    return recorded


def sweep_interrupted(run_dir: Path, done: set[tuple[str, int]]) -> int:
    """Kill what interrupted attempts left running (a `leanrig run` killed mid-attempt
    leaves its agent, server and Lean behind): every process carrying the token of an attempt
    without a results line. Returns how many were killed."""
    killed = 0
    for config in run_dir.glob("attempts/*/*/workspace/mcp.json"):
        root = config.parent.parent
        attempt = root.name.removesuffix("-retry")
        if not attempt.isdigit() or (root.parent.name, int(attempt)) in done:
            continue
        try:
            servers = orjson.loads(config.read_bytes())["mcpServers"].values()
            tokens = {s["env"][ATTEMPT_TOKEN_VAR] for s in servers}
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            continue
        for token in tokens:
            pids, _ = kill_attempt(None, token, ATTEMPT_TOKEN_VAR, KILL_DEADLINE)
            killed += len(pids)
    if killed:
        log.warning("run.resume_swept", killed=killed)
    return killed


def check_suite(suite: Suite) -> None:
    """What the metrics need from every task: a field (per-field scores). Difficulties are
    required by the suite loader (1..10)."""
    missing = sorted(t.id for t in suite.tasks.values() if not t.spec.field)
    if missing:
        raise SuiteError(
            f"suite {suite.name}: task(s) without a field: {', '.join(missing)}",
            hint="give every [[tasks]] entry a `field` (and a `difficulty`, 1..10) in suite.toml",
        )


async def run_benchmark(options: RunOptions) -> RunSummary:
    """Run ``options.agent`` over the suite; returns when every attempt has its line."""
    if options.attempts < 1 or options.parallel < 1 or options.time_limit <= 0:
        raise RunError("--attempts and --parallel must be >= 1 and --time-limit > 0")
    if options.prices is not None:  # read before anything is written (the run dir, scratch)
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
        program = await anyio.to_thread.run_sync(find_harness, options.harness,
                                                 options.harness_bin)  # fmt: skip
        version = await anyio.to_thread.run_sync(harness_version, program)
        harness = HarnessSetup(options.harness, program, version)
    else:
        words = _agent_words(options.agent)
    route = model_route(options, dict(os.environ))
    suite = await anyio.to_thread.run_sync(load_suite, options.suite)
    check_suite(suite)
    for task_id in options.tasks or ():  # refused before anything is written
        suite.task(task_id)
    install = await anyio.to_thread.run_sync(lambda: find_lean(suite.root, explicit=options.lean))
    library = await anyio.to_thread.run_sync(library_dir, suite, install)
    if options.condition == "lad":  # built (or found) once here: no attempt pays for it
        (await prepare_library(suite, install, library)).close()
    if previous is not None and previous.suite_hash != suite.content_hash():
        raise RunError(f"--resume: the suite changed since {run_dir} was started")
    if previous is not None:
        done |= await anyio.to_thread.run_sync(record_interrupted, run_dir, suite, options, done)
    runner = Runner(options, suite, install, library, run_dir, words, harness, route)
    try:
        return await _run(runner, options, run_dir, started_at, done, t_start)
    finally:
        shutil.rmtree(runner.socket_root, ignore_errors=True)


async def _run(
    runner: Runner,
    options: RunOptions,
    run_dir: Path,
    started_at: datetime,
    done: set[tuple[str, int]],
    t_start: float,
) -> RunSummary:
    summary = RunSummary(run_dir)
    sandbox = await anyio.to_thread.run_sync(
        lambda: agent_sandbox(network=runner.network == "all", mounts=())
    )
    if sandbox is None:
        log.warning("run.agent_unsandboxed", detail="bwrap cannot sandbox the agent here: it "
                    "keeps the network and can write the run's state")  # fmt: skip
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
        await _attempts(runner, options, run_dir, jobs, limiter, summary)
    await anyio.to_thread.run_sync(
        write_run_info, run_dir, runner.run_info(started_at, datetime.now(UTC))
    )
    summary.elapsed_s = time.perf_counter() - t_start
    return summary


async def _attempts(
    runner: Runner,
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
                await anyio.to_thread.run_sync(_mark_started, marker)
                try:
                    outcome = await runner.attempt(task, k, bar)
                except anyio.get_cancelled_exc_class():
                    # Stopped by the user (SIGTERM, Ctrl-C; or another attempt's failure):
                    # `--resume` runs it again.
                    marker.unlink(missing_ok=True)
                    raise
                await anyio.to_thread.run_sync(append_result, run_dir, outcome.result)
                marker.unlink(missing_ok=True)
                summary.results.append(outcome.result)
                summary.infra_retries += outcome.result.infra_retry
                summary.overhead_s.append(outcome.overhead_s)
                if outcome.invocation.timed_out:
                    summary.kill_s.append(outcome.invocation.kill_s)
                bar.finished(outcome.result.accepted)

        async with anyio.create_task_group() as tg:
            for task, k in jobs:
                tg.start_soon(one, task, k)


def summary_json(summary: RunSummary) -> dict[str, Any]:
    def median(xs: list[float]) -> float | None:
        return round(sorted(xs)[len(xs) // 2], 3) if xs else None

    return {
        "run_dir": str(summary.run_dir),
        "attempts": len(summary.results),
        "accepted": summary.accepted,
        "skipped": summary.skipped,
        "infra_retries": summary.infra_retries,
        "elapsed_s": round(summary.elapsed_s, 3),
        "overhead_s_median": median(summary.overhead_s),
        "kill_s_median": median(summary.kill_s),
    }
