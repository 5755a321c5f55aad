"""One agent invocation: start the agent in its own session, enforce the wall-clock limit, and
end with **every** process of the attempt gone.

MCP clients start their servers in new sessions (and Lean's watchdog starts its workers with
``setsid``), so killing the agent's process group misses them; when a parent dies first its
children are re-parented away from the agent's tree. Two nets catch them all:

1. the agent's live process tree, walked with psutil (children of children, any session), and
2. every process whose environment carries this attempt's token (``LEANRIG_ATTEMPT_TOKEN``,
   set for the agent and in the MCP config's ``env``, inherited by the server and its Lean
   processes) — orphans included.

The kill freezes each round's processes (SIGSTOP: no more forks, no re-parenting races), then
SIGKILLs them, and repeats until a round finds nothing alive (zombies count as gone). The
invocation's time runs from the agent's start until that point.

The agent runs in a bwrap sandbox where available (`agent_sandbox`): its own PID namespace
(it cannot see, signal or ptrace the runner and its Lean processes), no network unless asked,
and the run's state mounted read-only — only its workspace is writable, only its own socket
is reachable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import anyio
import anyio.abc
import psutil
import structlog
from anyio import AsyncFile
from anyio.abc import ByteReceiveStream

from lsp_bridge import cache_root, find_library_dir
from repl_pool import CAP_DROP, hiding, probe_succeeds, sandbox_program

log = structlog.get_logger("leanrig.run")

LOG_CAP_BYTES: Final = 10 * 2**20  # an agent's stdout + stderr kept in agent.log; rest dropped
KILL_DEADLINE: Final = 30.0  # seconds the kill may take before the runner gives up (reported)
DRAIN_AFTER_EXIT: Final = 5.0  # seconds to read what is left in the agent's output pipe


@dataclass(frozen=True, slots=True)
class Invocation:
    exit_code: int | None  # None: never started, or the kill took its status
    timed_out: bool
    invocation_s: float  # the agent's start until its whole tree is gone
    kill_s: float  # from the decision to kill until every process is gone (0: none left)
    killed_pids: frozenset[int] = frozenset()  # what the runner killed (tree and leftovers)
    start_error: str | None = None
    tree_gone: bool = True
    aborted: bool = False  # the runner ended it early (its service failed)
    # The sandbox could not be set up (a mount it could not make): the agent never ran. The
    # runner's own failure, not the agent's (bwrap exits 1 then, as an agent may).
    sandbox_error: str | None = None

    @property
    def killed(self) -> int:
        return len(self.killed_pids)


def _alive(p: psutil.Process) -> bool:
    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _tree(root: int) -> list[psutil.Process]:
    try:
        proc = psutil.Process(root)
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return []


def marked(token: str, var: str) -> list[psutil.Process]:
    """Every process whose environment has ``var=token`` (a scan of /proc)."""
    me = os.getpid()
    found = []
    for p in psutil.process_iter():
        if p.pid == me:
            continue
        try:
            if p.environ().get(var) == token:
                found.append(p)
        except psutil.Error:
            continue
    return found


def attempt_processes(root: int | None, token: str, var: str) -> list[psutil.Process]:
    """The attempt's live processes: ``root``'s tree plus everything carrying the token."""
    procs = {p.pid: p for p in (_tree(root) if root is not None else [])}
    for p in marked(token, var):
        procs.setdefault(p.pid, p)
    return [p for p in procs.values() if _alive(p)]


def kill_attempt(
    root: int | None, token: str, var: str, deadline: float
) -> tuple[frozenset[int], bool]:
    """Kill ``root``'s tree and every process carrying the token, until none is alive.
    Blocking (/proc reads, polling for exits): run it in a worker thread. Returns (the pids
    killed, whether all are gone)."""
    killed: set[int] = set()
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        live = attempt_processes(root, token, var)
        if not live:
            return frozenset(killed), True
        for p in live:  # freeze first: a frozen process neither forks nor exits mid-walk
            try:
                p.suspend()
            except psutil.Error:
                pass
        for p in live:
            try:
                p.kill()
                killed.add(p.pid)
            except psutil.Error:
                pass
        # No event tells that a non-child has exited: poll, with a growing pause.
        pause = 0.002
        while time.monotonic() < end and any(_alive(p) for p in live):
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
    return frozenset(killed), not attempt_processes(root, token, var)


# How the agent's view differs from the host's: (bwrap option, path), applied in order.
# ("--hide", path): an empty directory over a directory, the null device over a file.
Mount = tuple[Literal["--ro-bind", "--bind", "--tmpfs", "--hide"], Path]

# Every tmpfs the sandbox makes (its private /tmp, …) holds at most this much: it is memory.
TMPFS_BYTES = 2 * 2**30


@functools.cache
def _agent_bwrap(network: bool) -> str | None:
    """bwrap, when it can create the agent's namespaces here (checked once per variant)."""
    bwrap = sandbox_program("bwrap")  # (looked up once, not on an agent-writable PATH later)
    if bwrap is None:
        return None
    probe = [bwrap, *_base_options(network), "--die-with-parent", "--", "true"]
    return bwrap if probe_succeeds(probe) else None


@functools.cache
def _tmpfs_sized(bwrap: str) -> bool:
    """Does this bwrap take ``--size`` for a tmpfs (0.5 and later)?"""
    return probe_succeeds(
        [bwrap, "--dev-bind", "/", "/", "--size", "1048576", "--tmpfs", "/tmp", "--", "true"]
    )


def _base_options(network: bool) -> list[str]:
    # The host's file system read-only (writable places are mounted over it: the user's home,
    # the workspace, a private /tmp), a /dev of its own (null, zero, random, tty, …: run as
    # root, the host's /dev let the agent open the disk that holds every read-only mount's
    # files for writing), its own /proc.
    # As root, bwrap leaves the agent every capability: it unmounted a read-only mount and
    # wrote the file beneath (measured). Without them (CAP_DROP, as Lean's sandbox) no mount
    # can be changed.
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc",
               *CAP_DROP]  # fmt: skip
    return options if network else [*options, "--unshare-net"]


def agent_sandbox(*, network: bool, mounts: Sequence[Mount]) -> tuple[str, ...] | None:
    """The prefix that runs the agent in its sandbox: the host's file system with ``mounts``
    over it, its own PID namespace, no capabilities, no network unless ``network``; killed
    with the runner. None when bwrap cannot do it here."""
    bwrap = _agent_bwrap(network)
    if bwrap is None:
        return None
    parts = [bwrap, *_base_options(network)]
    sized = _tmpfs_sized(bwrap)
    size = ["--size", str(TMPFS_BYTES)] if sized else []
    for option, path in mounts:
        if option == "--hide":
            parts += hiding(path, size)
        elif option == "--tmpfs":
            parts += [*size, option, str(path)]
        else:
            parts += [option, str(path), str(path)]
    return (*parts, "--die-with-parent", "--")


# Fresh, private and discarded with the attempt: the host's shared scratch directories, which
# one attempt could leave state in for the next (a red-team agent stashed its proof in /tmp and
# attempt 2 "solved" the task in 0.4 s; pass@k assumes independent attempts).
PRIVATE_SCRATCH = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
# Where agents keep their configuration, credentials and caches: writable in the sandbox
# (also under a scratch directory: a container's HOME=/tmp/home).
AGENT_HOME_VARS = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
                   "XDG_STATE_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR")  # fmt: skip
_SCRATCH_PATH = re.compile(r"(?:/tmp|/var/tmp|/dev/shm)/[^\s'\"=:;,]+")


def _in_scratch(path: Path) -> bool:
    return any(path.is_relative_to(d) for d in PRIVATE_SCRATCH)


def trusted_paths(lean: Path, *, extra: Sequence[Path] = ()) -> list[Path]:
    """What the verdict's trust rests on, which an agent must not write although the user may:
    the Lean install (``lean``'s prefix; the bootstrap's library), leanrig's cache (the
    bootstrap launcher, suites' compiled libraries, prefix modules, the library index), the
    Python environment and leanrig's own code. A red-team agent replaced the cached launcher
    with a wrapper that rewrote `#print axioms` and had `sorryAx` accepted; another recompiled
    a suite library's `.olean`, which later checks trusted. Existing paths only, resolved,
    without the user's home or an ancestor of it (the agent's own configuration lives there:
    such a path is logged and left writable)."""
    library = find_library_dir()
    candidates = [
        lean.resolve().parent.parent,
        cache_root(),
        *([library] if library is not None else []),
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(__file__).resolve().parents[2],  # leanrig's packages (a checkout or site-packages)
        *extra,
    ]
    home = Path.home().resolve()
    out: list[Path] = []
    for path in candidates:
        try:
            real = path.resolve()
        except OSError:
            continue
        if real == home or real in home.parents:
            log.warning("run.trusted_path_writable", path=str(real),
                        why="it is the home directory or holds it")  # fmt: skip
            continue
        if real.exists() and real not in out:
            out.append(real)
    return out


def pinned_ancestors(paths: Iterable[Path], writable: Iterable[Path]) -> list[Mount]:
    """Each directory above ``paths`` that lies in a ``writable`` one (the user's home), as a
    mount point of itself, writable as before: a read-only mount protects a directory's
    contents, not its name, and renaming the directory above it (`~/.cache`, with leanrig's
    cache in it) swapped in a copy the verdict then used (a review, measured). A mount point
    cannot be renamed (elsewhere the file system is read-only). Shallow first; mount them
    after the writable directories and before the read-only ones."""
    roots = [w for w in writable if w != Path("/")]
    found: set[Path] = set()
    for path in paths:
        for above in path.parents:
            if any(above.is_relative_to(w) for w in roots) and not _in_scratch(above):
                found.add(above)
    return [("--bind", p) for p in sorted(found, key=lambda p: (len(p.parts), str(p)))]


def agent_homes(env: Mapping[str, str]) -> list[Path]:
    """Where the agent keeps its configuration, credentials and caches, writable in its
    sandbox (``AGENT_HOME_VARS``: the home, XDG directories, Claude Code's and Codex's): the
    existing ones, resolved; never ``/``."""
    out: list[Path] = []
    for var in AGENT_HOME_VARS:
        value = env.get(var)
        if not value or not value.startswith("/"):
            continue
        path = Path(value).resolve()
        if path != Path("/") and path.is_dir() and path not in out:
            out.append(path)
    return out


def scratch_mounts(argv: Sequence[str]) -> tuple[list[Mount], list[Mount]]:
    """A fresh ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (``PRIVATE_SCRATCH``), and what the
    agent's command names under them visible again, read-only (each such path's first
    directory under the scratch directory: an agent kept in /tmp with its modules or its venv;
    paths inside a word, ``--cfg=/tmp/…`` or ``sh -c "…"``, count). Mount them in this order,
    before the run's own directories (a workspace inside a named directory stays writable: it
    is mounted after)."""
    fresh: list[Mount] = [("--tmpfs", d) for d in PRIVATE_SCRATCH if d.is_dir()]
    named: list[Mount] = []
    for word in argv:
        for found in _SCRATCH_PATH.findall(word):
            path = Path(found)
            base = next(d for d in PRIVATE_SCRATCH if path.is_relative_to(d))
            rel = path.relative_to(base).parts
            if not rel:
                continue
            shown = base / rel[0]
            if shown.exists() and ("--ro-bind", shown) not in named:
                named.append(("--ro-bind", shown))
    return fresh, named


_ABSOLUTE_PATH = re.compile(r"/[^\s'\"=:;,]+")
_VCS_DIRS = (".git", ".hg", ".jj", ".svn")


def repository_stores(path: Path) -> list[Path]:
    """The version-control stores of every repository holding ``path``: what was hidden in a
    checkout is still in its history (`git show HEAD:Solutions/…`, a review). A ``.git`` file
    (a worktree, a submodule) comes with the directories it points to."""
    found: list[Path] = []
    for above in [path, *path.parents]:
        for name in _VCS_DIRS:
            store = above / name
            if store.is_dir():
                found.append(store)
            elif store.is_file() and name == ".git":
                found.append(store)
                found += _git_dirs(store)
    return found


def _git_dirs(gitfile: Path) -> list[Path]:
    """The git directory a ``.git`` file names (``gitdir: …``) and its common directory."""
    try:
        line = gitfile.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return []
    if not line.startswith("gitdir:"):
        return []
    gitdir = (gitfile.parent / line.removeprefix("gitdir:").strip()).resolve()
    out = [gitdir] if gitdir.is_dir() else []
    try:
        common = (gitdir / (gitdir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return out
    return [*out, common] if common.is_dir() and common not in out else out


def hidden_mounts(hidden: Iterable[Path], argv: Sequence[str]) -> list[Mount]:
    """``hidden`` hidden, and each path the agent's command names under them visible again,
    read-only, itself only (its script kept beside a suite's solutions runs; paths inside a
    word count, as for ``scratch_mounts``; resolved, so `..` or a symlink shows what they
    lead to and no more). Mount after the suite, before the run's own directories."""
    hidden = list(hidden)
    mounts: list[Mount] = [("--hide", p) for p in hidden]
    for word in argv:
        for found in _ABSOLUTE_PATH.findall(word):
            try:
                path = Path(found).resolve()
            except OSError:
                continue
            shown: Mount = ("--ro-bind", path)
            if (
                any(path.is_relative_to(h) for h in hidden)
                and path.exists()
                and shown not in mounts
            ):
                mounts.append(shown)
    return mounts


RUN_MARKERS = ("run.json", "results.jsonl", "ledger.jsonl")  # what a leanrig run directory holds


def other_runs(run_dir: Path, needed: Sequence[Path]) -> list[Path]:
    """The run directories beside ``run_dir`` (`runs/` holds a user's runs: earlier runs' logs
    and submissions hold proofs and library text — a baseline agent read a LAD run's), but
    none holding a path in ``needed``. Only runs: hiding the directory that holds them hid the
    user's working directory (`--out NAME`), the agent's code and venv in it."""
    try:
        siblings = sorted(run_dir.parent.iterdir())
    except OSError:
        return []
    return [
        d
        for d in siblings
        if d != run_dir
        and d.is_dir()
        and any((d / m).exists() for m in RUN_MARKERS)
        and not any(p == d or p.is_relative_to(d) for p in needed)
    ]


def network_sandbox() -> tuple[str, ...] | None:
    """Whether the agent's sandbox can run here without network (the prefix without mounts)."""
    return agent_sandbox(network=False, mounts=())


async def _drain(stream: ByteReceiveStream, log_path: Path, cap: int) -> None:
    """The agent's output into ``log_path``, at most ``cap`` bytes; the rest is read and
    dropped (the agent must never block on a full pipe). A log that cannot be written (a disk
    the agent filled) stops being written, and nothing else stops: that crashed the run, and
    `--resume` gave the agent another try (a red-team sweep)."""
    written = 0
    out: AsyncFile[bytes] | None = None
    try:
        out = await anyio.open_file(log_path, "ab")
    except OSError as exc:
        log.warning("run.agent_log_unwritable", path=str(log_path), error=str(exc))
    try:
        async for chunk in stream:
            if out is None or written >= cap:
                continue
            part = chunk[: cap - written]
            try:
                await out.write(part)
                written += len(part)
                if written >= cap:
                    await out.write(b"\n[leanrig: output truncated]\n")
            except OSError as exc:
                log.warning("run.agent_log_unwritable", path=str(log_path), error=str(exc))
                written = cap
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    finally:
        if out is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(OSError):
                await out.aclose()


async def invoke(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    token: str,
    token_var: str,
    log_path: Path,
    log_cap: int = LOG_CAP_BYTES,
    abort: anyio.Event | None = None,
    sandboxed: bool = False,
) -> Invocation:
    """Run one agent to its end, to ``time_limit`` seconds or until ``abort`` is set, then make
    sure its tree and every process carrying ``token`` are gone. ``sandboxed``: ``argv`` is the
    agent's bwrap prefix (ending in ``--``), then the agent's command; a shell inside the
    sandbox says the sandbox is up (a byte on a pipe) before it becomes the agent, so a sandbox
    that could not be set up is told apart from an agent that failed — which an agent cannot
    fake: bwrap's own status says the child started before it mounts anything, and the
    agent's output is the agent's to write."""
    started = time.perf_counter()
    status_r, status_w = os.pipe() if sandboxed else (-1, -1)
    if sandboxed:
        os.set_blocking(status_r, False)
        cut = list(argv).index("--") + 1
        # (`>&N` takes one digit in some shells: the pipe is reopened through /proc.)
        up = f'printf up > /proc/self/fd/{status_w} && exec "$@"'
        argv = [*argv[:cut], "/bin/sh", "-c", up, "leanrig-agent", *argv[cut:]]
    # Shielded (lsp_bridge.proctree.spawn_marked says why): a cancellation waits for the
    # start and then meets the agent's whole tree in _run_invocation.
    with anyio.CancelScope(shield=True):
        try:
            process = await anyio.open_process(
                list(argv), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                pass_fds=(status_w,) if sandboxed else (),
            )  # fmt: skip
        except OSError as exc:
            _close(status_r, status_w)
            why = f"cannot start {argv[0]}: {exc.strerror or exc}"
            return Invocation(None, False, time.perf_counter() - started, 0.0, start_error=why)
        finally:
            _close(status_w)  # (the child has its copy)
    try:
        invocation = await _run_invocation(
            process, started, time_limit=time_limit, token=token, token_var=token_var,
            log_path=log_path, log_cap=log_cap, abort=abort,
        )  # fmt: skip
        if sandboxed and not _agent_started(status_r):
            why = _first_line(log_path)
            log.warning("run.sandbox_failed", detail=why)
            return dataclasses.replace(
                invocation, sandbox_error=f"the agent's sandbox could not be set up: {why}"
            )
        return invocation
    finally:
        _close(status_r)


def _close(*fds: int) -> None:
    for fd in fds:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _agent_started(status: int) -> bool:
    """Did the shell inside the sandbox say it was up (before it became the agent)?"""
    try:
        return os.read(status, 2) == b"up"
    except OSError:  # (nothing written: would block)
        return False


def _first_line(log_path: Path) -> str:
    try:
        with log_path.open("rb") as f:
            head = f.read(400)
    except OSError:
        return "(no output)"
    return (
        head.decode("utf-8", "replace").strip().splitlines()[0] if head.strip() else "(no output)"
    )


async def _run_invocation(
    process: anyio.abc.Process,
    started: float,
    *,
    time_limit: float,
    token: str,
    token_var: str,
    log_path: Path,
    log_cap: int,
    abort: anyio.Event | None,
) -> Invocation:
    timed_out = False
    kill_s = 0.0
    killed: frozenset[int] = frozenset()
    gone = True
    async with process, anyio.create_task_group() as tg:
        assert process.stdout is not None
        drain_scope = anyio.CancelScope()

        async def drain() -> None:
            assert process.stdout is not None
            with drain_scope:
                await _drain(process.stdout, log_path, log_cap)

        tg.start_soon(drain)
        try:
            with anyio.move_on_after(time_limit) as limit:
                async with anyio.create_task_group() as race:
                    if abort is not None:
                        race.start_soon(_cancel_on, abort, race.cancel_scope)
                    await process.wait()
                    race.cancel_scope.cancel()
        except anyio.get_cancelled_exc_class():
            # The run itself stops (a signal): the agent's tree and whatever carries its token
            # go now; leaving `async with process` would kill its first process alone.
            root = process.pid if process.returncode is None else None  # (a reaped pid: reused)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(kill_attempt, root, token, token_var, KILL_DEADLINE)
            raise
        timed_out = limit.cancelled_caught
        aborted = not timed_out and process.returncode is None
        t_kill = time.perf_counter()
        # The agent's tree (at the limit) or whatever it left behind (after its exit).
        # Shielded: a stop that lands here must not skip it (a review), and it is bounded.
        root = process.pid if timed_out or aborted else None
        with anyio.CancelScope(shield=True):
            killed, gone = await anyio.to_thread.run_sync(
                kill_attempt, root, token, token_var, KILL_DEADLINE
            )
        with anyio.fail_after(KILL_DEADLINE):
            exit_code = await process.wait()
        invocation_s = time.perf_counter() - started
        if killed:
            kill_s = invocation_s - (t_kill - started)
        # Every writer of the pipe is gone; read what is left, bounded.
        drain_scope.deadline = anyio.current_time() + DRAIN_AFTER_EXIT
    if killed or timed_out:
        log.info("run.killed", pid=process.pid, timed_out=timed_out, killed=len(killed),
                 kill_ms=round(kill_s * 1000, 1), gone=gone)  # fmt: skip
    return Invocation(exit_code, timed_out, invocation_s, kill_s, killed, tree_gone=gone,
                      aborted=aborted)  # fmt: skip


async def _cancel_on(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
