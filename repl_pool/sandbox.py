"""The sandbox every Lean process runs in: rlimits (prlimit) and, where available, bwrap.

bwrap adds: no network, a read-only file system but for ``writable``, masked /proc entries and
no host Unix sockets. Without bwrap it is rlimits only. See docs/threat-model.md."""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import shutil
import socket
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_bridge import cache_root

from .errors import SandboxProgramMissing


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    # A backstop only: Lean reserves far more address space than it uses; RSS is capped elsewhere.
    memory_mb: int | None = 65536
    cpu_seconds: int | None = None  # RLIMIT_CPU per process (None: unlimited)
    open_files: int = 1024
    writable: tuple[Path, ...] = ()
    network: bool = False
    use_bwrap: bool | None = None  # None: when available
    # Made unreadable to Lean (with bwrap); mounted before ``writable``, which may lie inside.
    hidden: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        # Resolved in the caller's working directory: the wrapped program runs in another.
        object.__setattr__(self, "writable", tuple(Path(p).resolve() for p in self.writable))
        object.__setattr__(self, "hidden", tuple(Path(p).resolve() for p in self.hidden))


def sandbox_tools() -> dict[str, str | None]:
    """The sandbox tools installed *and working here*; ``seccomp``: the no-Unix-socket filter."""
    bwrap = _working_bwrap()
    seccomp = _working_filter(bwrap) if bwrap else None
    return {
        "prlimit": sandbox_program("prlimit"),
        "bwrap": bwrap,
        "seccomp": str(seccomp) if seccomp else None,
    }


# Searched before PATH: an agent may write to user directories early on PATH.
SYSTEM_PATH = os.pathsep.join(["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"])


@functools.cache
def sandbox_program(name: str) -> str | None:
    """The sandbox program ``name`` (``LEANRIG_<NAME>``, system dirs, then PATH), or None.

    Looked up once per process: a program an agent puts on PATH later must never run."""
    variable = f"LEANRIG_{name.upper()}"
    explicit = os.environ.get(variable)
    if explicit and not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
        raise SandboxProgramMissing(variable, explicit)
    found = explicit or shutil.which(name, path=SYSTEM_PATH) or shutil.which(name)
    return str(Path(found).resolve()) if found else None


def sandbox_programs() -> list[Path]:
    """The sandbox's programs found here (the agent's sandbox keeps them read-only)."""
    return [Path(p) for p in (sandbox_program("prlimit"), sandbox_program("bwrap")) if p]


# As root, bwrap keeps every capability: Lean code could remount `/` read-write.
CAP_DROP: tuple[str, ...] = ("--cap-drop", "ALL") if os.geteuid() == 0 else ()


@functools.cache
def _working_bwrap() -> str | None:
    bwrap = sandbox_program("bwrap")
    if bwrap is None:
        return None
    probe = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-all",
        *CAP_DROP,
        "--die-with-parent",
        "--",
        "true",
    ]
    return bwrap if probe_succeeds(probe) else None


def probe_succeeds(argv: list[str]) -> bool:
    """Whether ``argv`` (a sandbox tool tried on ``true``) exits 0 within 10 seconds."""
    try:
        return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# Read-only as in container runtimes: as root, `/proc/sys/kernel/core_pattern` runs on the host.
PROC_READ_ONLY: tuple[str, ...] = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# Masked: they read kernel memory, keys or timings (the container runtimes' list).
PROC_MASKED: tuple[str, ...] = (
    "kcore",
    "keys",
    "timer_list",
    "timer_stats",
    "sched_debug",
    "latency_stats",
    "acpi",
    "asound",
    "scsi",
)
SYS_MASKED: tuple[str, ...] = ("/sys/firmware", "/sys/devices/virtual/powercap")


@functools.cache
def kernel_guards() -> tuple[str, ...]:
    """bwrap options (after ``--proc /proc``) guarding this kernel's /proc and /sys entries."""
    parts: list[str] = []
    for name in PROC_READ_ONLY:
        path = Path("/proc", name)
        if path.exists():
            parts += ["--ro-bind", str(path), str(path)]
    for path in [*(Path("/proc", n) for n in PROC_MASKED), *map(Path, SYS_MASKED)]:
        parts += hiding(path)
    return tuple(parts)


def socket_dirs() -> list[Path]:
    """The host's Unix socket directories, hidden: a read-only mount does not stop connecting."""
    found: list[Path] = []
    for name in ("/run", "/var/run", os.environ.get("XDG_RUNTIME_DIR") or ""):
        if not name.startswith("/"):
            continue
        path = Path(name).resolve()
        if path != Path("/") and path.is_dir() and path not in found:
            found.append(path)
    return found


def listening_sockets() -> list[Path]:
    """The file-system Unix sockets bound on this host now (abstract ones left out)."""
    try:
        lines = Path("/proc/net/unix").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    found: list[Path] = []
    for line in lines.splitlines()[1:]:
        fields = line.split(maxsplit=7)
        if len(fields) < 8 or not fields[7].startswith("/"):
            continue
        path = Path(fields[7])
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode) and path not in found:
                found.append(path)
        except OSError:
            continue
    return found


@functools.cache
def unix_socket_filter() -> Path | None:
    """A ``bwrap --seccomp`` filter file refusing ``socket(AF_UNIX)``; None without libseccomp."""
    try:
        import pyseccomp
    except (ImportError, RuntimeError):  # RuntimeError: the package without libseccomp
        return None
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    rules.add_rule(
        pyseccomp.ERRNO(errno.EACCES), "socket", pyseccomp.Arg(0, pyseccomp.EQ, socket.AF_UNIX)
    )
    folder = cache_root() / "sandbox"
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f"filter-{os.getpid()}.bpf"
    with scratch.open("wb") as out:
        rules.export_bpf(out)
    program = (
        folder / f"no-unix-sockets-{hashlib.sha256(scratch.read_bytes()).hexdigest()[:12]}.bpf"
    )
    os.replace(scratch, program)
    return program


@functools.cache
def _working_filter(bwrap: str) -> Path | None:
    """``unix_socket_filter``, when this bwrap loads it and ``true`` runs under it."""
    program = unix_socket_filter()
    if program is None:
        return None
    probe = [
        *_with_filter(program),
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--unshare-all",
        *CAP_DROP,
        "--seccomp",
        str(FILTER_FD),
        "--",
        "true",
    ]
    return program if probe_succeeds(probe) else None


FILTER_FD = 9  # the descriptor bwrap reads the seccomp program from


def _with_filter(program: Path) -> list[str]:
    # A command prefix cannot pass descriptors: a shell opens the file on FILTER_FD, then execs.
    return ["/bin/sh", "-c", f'exec "$@" {FILTER_FD}< "$0"', str(program)]


def hiding(path: Path, tmpfs: Sequence[str] = ()) -> list[str]:
    """bwrap options that make ``path`` unreadable (``tmpfs``: options for a directory's tmpfs)."""
    if path.is_dir():
        return [*tmpfs, "--tmpfs", str(path)]
    return ["--ro-bind", "/dev/null", str(path)] if path.exists() else []


def sandbox_wrapper(policy: SandboxPolicy) -> tuple[str, ...]:
    """The command prefix that runs a program under ``policy``."""
    tools = sandbox_tools()
    parts: list[str] = []
    if tools["prlimit"]:
        parts.append(tools["prlimit"])
        if policy.memory_mb is not None:
            parts.append(f"--as={policy.memory_mb * 2**20}")
        if policy.cpu_seconds is not None:
            parts.append(f"--cpu={policy.cpu_seconds}")
        parts += [f"--nofile={policy.open_files}", "--core=0", "--"]
    bwrap = tools["bwrap"]
    if bwrap and policy.use_bwrap is not False:
        seccomp = tools["seccomp"]
        if seccomp:
            parts += _with_filter(Path(seccomp))
        parts += [
            bwrap,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            *kernel_guards(),
        ]
        for path in [*socket_dirs(), *policy.hidden]:
            parts += hiding(path)
        for path in policy.writable:
            if not path.is_absolute():  # unreachable through __init__; never bind relative
                raise ValueError(f"sandbox paths must be absolute, got {str(path)!r}")
            parts += ["--bind", str(path), str(path)]
        parts += ["--unshare-all", *CAP_DROP]
        if seccomp:
            parts += ["--seccomp", str(FILTER_FD)]
        if policy.network:
            parts.append("--share-net")
        parts += ["--die-with-parent", "--"]
    elif policy.use_bwrap:
        raise RuntimeError("bwrap was required but is not installed")
    return tuple(parts)


def uses_namespaces(policy: SandboxPolicy) -> bool:
    return policy.use_bwrap is not False and sandbox_tools()["bwrap"] is not None
