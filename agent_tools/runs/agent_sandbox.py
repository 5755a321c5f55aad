"""The agent's bwrap sandbox under `leanrig run` (docs/runs.md, step 5): mounts and probes.

Must not start the agent (invocation.py) or decide what an attempt is (runner.py)."""

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


# (bwrap option, path), applied in order; "--hide" puts an empty directory or /dev/null over path.
Mount = tuple[Literal["--ro-bind", "--bind", "--tmpfs", "--hide"], Path]

TMPFS_BYTES = 2 * 2**30  # cap of each tmpfs the sandbox makes: it is memory


@functools.cache
def _agent_bwrap(network: bool) -> str | None:
    """bwrap, when it can create the agent's namespaces here."""
    bwrap = sandbox_program("bwrap")  # looked up once, not on an agent-writable PATH later
    if bwrap is None:
        return None
    probe = [bwrap, *_base_options(network), "--die-with-parent", "--", "true"]
    return bwrap if probe_succeeds(probe) else None


@functools.cache
def _tmpfs_sized(bwrap: str) -> bool:
    return probe_succeeds(
        [bwrap, "--dev-bind", "/", "/", "--size", "1048576", "--tmpfs", "/tmp", "--", "true"]
    )


def _base_options(network: bool) -> list[str]:
    # A /dev of its own: the host's lets a root agent open the disk for writing under every
    # read-only mount. No capabilities: with them a root agent can undo any mount.
    options = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--unshare-pid",
        "--proc",
        "/proc",
        *kernel_guards(),
        *CAP_DROP,
    ]
    return options if network else [*options, "--unshare-net"]


def agent_sandbox(*, network: bool, mounts: Sequence[Mount]) -> tuple[str, ...] | None:
    """The prefix running the agent with ``mounts`` over a read-only host; None without bwrap."""
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


# Private per attempt: pass@k assumes attempts leave each other no state.
PRIVATE_SCRATCH = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
_SCRATCH_PATH = re.compile(r"(?:/tmp|/var/tmp|/dev/shm)/[^\s'\"=:;,]+")


def _in_scratch(path: Path) -> bool:
    return any(path.is_relative_to(d) for d in PRIVATE_SCRATCH)


def trusted_paths(lean: Path, *, extra: Sequence[Path] = ()) -> list[Path]:
    """What the verdict trusts (Lean, leanrig's cache, Python, leanrig), read-only to the agent;
    the user's home or an ancestor of it is logged and left writable."""
    library = find_library_dir()
    candidates = [
        lean.resolve().parent.parent,
        cache_root(),
        *([library] if library is not None else []),
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(__file__).resolve().parents[2],  # leanrig's packages
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
            log.warning(
                "run.trusted_path_writable",
                path=str(real),
                why="it is the home directory or holds it",
            )
            continue
        if real.exists() and real not in out:
            out.append(real)
    return out


def scratch_mounts(argv: Sequence[str]) -> tuple[list[Mount], list[Mount]]:
    """Fresh ``PRIVATE_SCRATCH``, and the directories ``argv`` names there shown read-only;
    mount both, in order, before the run's own directories."""
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
    """The version-control stores of every repository holding ``path`` (history holds it too)."""
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
    """``hidden`` hidden and the paths ``argv`` names in them shown read-only; after the suite."""
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
    """The run directories beside ``run_dir`` (their logs hold proofs), none holding ``needed``."""
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
    """What every attempt's sandbox of one run shares, resolved once when the run starts."""

    trusted: list[Path]  # `trusted_paths`: read-only to the agent
    suite: Path
    run_dir: Path
    socket_parent: Path  # every run's socket directories
    hidden: list[Path]
    network: bool  # the host's network (--agent-network all)

    def prefix(
        self, workspace: Path, socket_dir: Path, argv: Sequence[str], home: Path
    ) -> tuple[str, ...]:
        """One attempt's sandbox prefix; only ``workspace`` and ``home`` are writable, and only
        ``socket_dir`` of the host's sockets is reachable. Empty when bwrap cannot sandbox here."""
        fresh, named = scratch_mounts(argv)
        covered = [*PRIVATE_SCRATCH, *socket_dirs(), *self.hidden, self.run_dir, self.socket_parent]
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
    """The sandbox an untrusted program answers ``--version`` in; empty without bwrap here."""
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
    """/dev/null over each socket outside ``covered``: a visible socket connects, even read-only."""
    roots = list(covered)
    return [("--hide", s) for s in sockets if not any(s.is_relative_to(r) for r in roots)]


def hidden_paths(
    suite: Suite, *, lad: bool, trusted: Sequence[Path], run_dir: Path, socket_parent: Path
) -> list[Path]:
    """What the agent must not read: the suite's hidden paths, in baseline runs the LAD library,
    the repository stores holding them, and earlier runs beside this one."""
    root = suite.root.resolve()
    hidden = [*suite.hidden_paths]
    if not lad:
        library = [*suite.lad_files, index_dir().resolve()]
        hidden += [p for p in library if p not in hidden]
    if suite.hidden_paths or suite.lad_files:
        hidden += [p for p in repository_stores(root) if p not in hidden]
    needed = [root, *trusted, socket_parent]
    return hidden + other_runs(run_dir, needed)
