"""The agent's sandbox under `leanrig run`: bwrap with its own PID and network namespaces, no
capabilities, the host's file system read-only with the attempt's mounts over it (docs/runs.md,
step 5): a private /tmp, a fresh home (the user's stays read-only), what the verdict trusts
read-only, the suite read-only but for what is hidden, the run directory and every run's
sockets hidden but for the attempt's own, its workspace writable; the kernel's /proc entries
read-only and the host's Unix sockets out of reach.

Pure path logic (`scratch_mounts`, `hidden_mounts`, `socket_masks`, …) and the probes of what
this machine's bwrap can do. Must not: start the agent (invocation.py does), decide what an
attempt is (runner.py).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import structlog

from lsp_bridge import cache_root, find_library_dir
from repl_pool import (
    CAP_DROP,
    hiding,
    kernel_guards,
    listening_sockets,
    probe_succeeds,
    sandbox_program,
    socket_dirs,
)

from ..library import index_dir
from ..tasks import Suite

log = structlog.get_logger("leanrig.run")


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
    # The host's file system read-only (writable places are mounted over it: the attempt's
    # home, the workspace, a private /tmp), a /dev of its own (the host's let a root agent open
    # the disk under every read-only mount for writing), its own /proc with the kernel's
    # settings read-only, and no capabilities (with them a root agent can undo any mount).
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc",
               *kernel_guards(), *CAP_DROP]  # fmt: skip
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


@dataclass(frozen=True, slots=True)
class RunSandbox:
    """What every attempt's sandbox of one run shares, resolved once when the run starts (a
    link on the way repointed later must not move what is protected)."""

    trusted: list[Path]  # `trusted_paths`: read-only to the agent
    suite: Path
    run_dir: Path
    socket_parent: Path  # every run's socket directories
    hidden: list[Path]  # `hidden_paths`
    network: bool  # the host's network (--agent-network all)

    def prefix(
        self, workspace: Path, socket_dir: Path, argv: Sequence[str], home: Path
    ) -> tuple[str, ...]:
        """The agent's sandbox prefix: the host's file system read-only, then these mounts in
        order (a later one shows through an earlier one): a private /tmp, /var/tmp and
        /dev/shm, with the files its command names there (read-only); the host's socket
        directories hidden; read-only what the verdict trusts (``trusted_paths``) and the
        suite, but for its ``hidden`` paths (and the LAD library in a baseline run), what the
        command names there shown read-only; the run directory hidden; the runner's socket
        directory hidden but for this attempt's (``socket_dir``); the workspace and the
        attempt's fresh ``home`` writable; every other Unix socket bound on the host masked
        (``socket_masks``). Empty when bwrap cannot sandbox here."""
        fresh, named = scratch_mounts(argv)
        covered = [*PRIVATE_SCRATCH, *socket_dirs(), *self.hidden, self.run_dir,
                   self.socket_parent]  # fmt: skip
        mounts: list[Mount] = [
            *fresh,
            *named,
            *(("--hide", d) for d in socket_dirs()),
            *(("--ro-bind", p) for p in self.trusted),
            ("--ro-bind", self.suite),
            *hidden_mounts(self.hidden, argv),
            ("--tmpfs", self.run_dir),
            ("--tmpfs", self.socket_parent),
            ("--ro-bind", socket_dir),
            ("--bind", workspace),
            ("--bind", home),
            *socket_masks(listening_sockets(), covered),
        ]
        return agent_sandbox(network=self.network, mounts=mounts) or ()


def probe_prefix(program: Path) -> tuple[str, ...]:
    """The sandbox a program leanrig does not trust (a harness found on PATH) answers
    ``--version`` in: an agent's, without network, with a private /tmp, /var/tmp and /dev/shm
    (``program`` shown there if it lies there) and the host's sockets out of reach; empty
    where bwrap cannot sandbox."""
    fresh, named = scratch_mounts([str(program)])
    dirs = socket_dirs()
    mounts: list[Mount] = [
        *fresh,
        *named,
        *(("--hide", d) for d in dirs),
        *socket_masks(listening_sockets(), [*PRIVATE_SCRATCH, *dirs]),
    ]
    return agent_sandbox(network=False, mounts=mounts) or ()


def socket_masks(sockets: Iterable[Path], covered: Iterable[Path]) -> list[Mount]:
    """The null device over each of ``sockets`` that no ``covered`` directory (hidden, or
    replaced by a tmpfs) already takes out of sight: the network namespace stops TCP and UDP,
    but a socket file the agent can see still connects, read-only mount or not."""
    roots = list(covered)
    return [("--hide", s) for s in sockets if not any(s.is_relative_to(r) for r in roots)]


def hidden_paths(
    suite: Suite, *, lad: bool, trusted: Sequence[Path], run_dir: Path, socket_parent: Path
) -> list[Path]:
    """What the agent must not read, in its sandbox and through its Lean: the suite's
    `hidden` paths; in baseline runs the LAD library and its cached indexes (a baseline agent
    with file tools could read them: the comparison of the conditions assumes it cannot);
    when either is hidden, the stores of the repositories holding the suite (their history
    holds it too); earlier runs beside this one. Once per run."""
    root = suite.root.resolve()
    hidden = [*suite.hidden_paths]
    if not lad:
        library = [*suite.lad_files, index_dir().resolve()]
        hidden += [p for p in library if p not in hidden]
    if suite.hidden_paths or suite.lad_files:
        hidden += [p for p in repository_stores(root) if p not in hidden]
    needed = [root, *trusted, socket_parent]
    return hidden + other_runs(run_dir, needed)
