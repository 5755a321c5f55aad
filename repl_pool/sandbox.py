"""The sandbox every Lean process runs in: rlimits (prlimit) and, where available, bwrap.

A policy becomes a command prefix (``sandbox_wrapper()``), so pool servers, their workers
(inherited) and verifier processes are confined the same way:

- rlimits: address space, CPU seconds, open files, no core dumps (``prlimit``, util-linux);
- namespaces (``bwrap``, Debian's bubblewrap): no network, the whole file system read-only
  (toolchain, suite, everything), only the listed directories writable, all processes killed
  when the sandbox's parent dies;
- the kernel's writable ``/proc`` entries read-only or masked (``kernel_guards``), and no way to
  a host Unix socket: the host's socket directories hidden (``socket_dirs``) and, where
  libseccomp is installed, ``socket(AF_UNIX)`` refused (``unix_socket_filter``).

Without bwrap the wrapper is rlimits only; ``sandbox_tools()`` says so and callers log a warning.
See docs/threat-model.md for what this does and does not defend.

Paths in a policy are absolute: the wrapped program usually runs in another working directory
(a Lean server's is its project), so a relative ``writable`` entry is resolved against *our*
working directory when the policy is made, and ``sandbox_wrapper()`` refuses one that is not
absolute.
"""

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
    # RLIMIT_AS per process: a backstop only. Lean reserves far more address space than it uses
    # (a worker fails to start its threads under 8 GiB); real memory is capped on RSS by the
    # pool monitor and the one-shot runner.
    memory_mb: int | None = 65536
    cpu_seconds: int | None = None  # RLIMIT_CPU per process (None: unlimited)
    open_files: int = 1024
    writable: tuple[Path, ...] = ()
    network: bool = False
    use_bwrap: bool | None = None  # None: when available
    # Unreadable to Lean (with bwrap): an empty directory over each directory, the null device
    # over each file. Mounted before ``writable``, which may lie inside them.
    hidden: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        # Resolved here, in the caller's working directory, which is what the caller meant.
        object.__setattr__(self, "writable", tuple(Path(p).resolve() for p in self.writable))
        object.__setattr__(self, "hidden", tuple(Path(p).resolve() for p in self.hidden))


def sandbox_tools() -> dict[str, str | None]:
    """The sandbox tools that are installed *and work here* (bwrap needs user namespaces,
    which some containers and CI runners forbid: then we fall back to rlimits only); the
    ``seccomp`` entry is the filter file that keeps Lean off Unix sockets."""
    bwrap = _working_bwrap()
    seccomp = _working_filter(bwrap) if bwrap else None
    return {"prlimit": sandbox_program("prlimit"), "bwrap": bwrap,
            "seccomp": str(seccomp) if seccomp else None}  # fmt: skip


# Where the sandbox's own programs are looked for first: directories of the system, not the
# user's (`~/.cargo/bin`, `~/.local/bin` often come first on PATH, and an agent may write
# there).
SYSTEM_PATH = os.pathsep.join(["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"])


@functools.cache
def sandbox_program(name: str) -> str | None:
    """``name`` (prlimit, bwrap) as the sandbox runs it: looked up once per process —
    ``LEANRIG_PRLIMIT`` / ``LEANRIG_BWRAP`` if set, else in the system's directories first,
    then on PATH — and resolved. Every Lean process, the
    verdict's included, starts through these: looked up again for each, a `prlimit` an agent
    put early on PATH (in a directory of its home) ran as the runner, outside every sandbox,
    and forged the verdict (a red-team sweep)."""
    variable = f"LEANRIG_{name.upper()}"
    explicit = os.environ.get(variable)  # the operator's own choice
    if explicit and not (os.path.isfile(explicit) and os.access(explicit, os.X_OK)):
        raise SandboxProgramMissing(variable, explicit)
    found = explicit or shutil.which(name, path=SYSTEM_PATH) or shutil.which(name)
    return str(Path(found).resolve()) if found else None


def sandbox_programs() -> list[Path]:
    """The sandbox's programs found here (for the agent's sandbox to keep read-only)."""
    return [Path(p) for p in (sandbox_program("prlimit"), sandbox_program("bwrap")) if p]


# As root, bwrap leaves the sandboxed program every capability: code Lean runs while it
# elaborates (on a full toolchain) could remount `/` read-write and write anywhere (measured:
# `mount -o remount,rw,bind /` then a write outside the writable paths, on the host). Without
# capabilities no mount can be changed. (An unprivileged bwrap drops them itself.)
CAP_DROP: tuple[str, ...] = ("--cap-drop", "ALL") if os.geteuid() == 0 else ()


@functools.cache
def _working_bwrap() -> str | None:
    bwrap = sandbox_program("bwrap")
    if bwrap is None:
        return None
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
             *CAP_DROP, "--die-with-parent", "--", "true"]  # fmt: skip
    return bwrap if probe_succeeds(probe) else None


def probe_succeeds(argv: list[str]) -> bool:
    """Does ``argv`` (a sandbox tool tried on ``true``) run and exit 0 within 10 s?"""
    try:
        return subprocess.run(argv, capture_output=True, timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# Kernel state a process may write through /proc: read-only in every sandbox (the list
# container runtimes keep read-only). As root, bwrap's own /proc leaves `/proc/sys` writable,
# `kernel/core_pattern` included, whose `|/path` form the kernel runs as root on the host.
PROC_READ_ONLY: tuple[str, ...] = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# Entries that read kernel memory, keys or timings: masked (the container runtimes' list).
PROC_MASKED: tuple[str, ...] = ("kcore", "keys", "timer_list", "timer_stats", "sched_debug",
                                "latency_stats", "acpi", "asound", "scsi")  # fmt: skip
SYS_MASKED: tuple[str, ...] = ("/sys/firmware", "/sys/devices/virtual/powercap")


@functools.cache
def kernel_guards() -> tuple[str, ...]:
    """bwrap's options, after ``--proc /proc``, that make the kernel's writable /proc entries
    read-only and mask the sensitive ones (``PROC_READ_ONLY``, ``PROC_MASKED``, ``SYS_MASKED``;
    those this kernel has)."""
    parts: list[str] = []
    for name in PROC_READ_ONLY:
        path = Path("/proc", name)
        if path.exists():
            parts += ["--ro-bind", str(path), str(path)]
    for path in [*(Path("/proc", n) for n in PROC_MASKED), *map(Path, SYS_MASKED)]:
        parts += hiding(path)
    return tuple(parts)


def socket_dirs() -> list[Path]:
    """The host's directories of Unix sockets (``/run``, ``/var/run``, ``$XDG_RUNTIME_DIR``):
    hidden in every sandbox. A read-only mount does not stop a connection to a socket in it,
    and these hold the session bus (``systemd-run --user``), ``docker.sock`` and databases."""
    found: list[Path] = []
    for name in ("/run", "/var/run", os.environ.get("XDG_RUNTIME_DIR") or ""):
        if not name.startswith("/"):
            continue
        path = Path(name).resolve()
        if path != Path("/") and path.is_dir() and path not in found:
            found.append(path)
    return found


def listening_sockets() -> list[Path]:
    """The file-system Unix sockets bound on this host now (``/proc/net/unix``; abstract ones,
    which a network namespace already cuts off, left out), each still a socket on disk."""
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
    """A seccomp program (classic BPF, as ``bwrap --seccomp`` reads it) refusing
    ``socket(AF_UNIX, …)`` with EACCES: Lean needs no Unix socket, and a socket file in any
    directory a sandbox can see would otherwise still connect. Written once into leanrig's
    cache (read-only to agents); None without libseccomp."""
    try:
        import pyseccomp
    except (ImportError, RuntimeError):  # (RuntimeError: the package, without libseccomp)
        return None
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    rules.add_rule(pyseccomp.ERRNO(errno.EACCES), "socket",
                   pyseccomp.Arg(0, pyseccomp.EQ, socket.AF_UNIX))  # fmt: skip
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
    probe = [*_with_filter(program), bwrap, "--ro-bind", "/", "/", "--dev", "/dev",
             "--unshare-all", *CAP_DROP, "--seccomp", str(FILTER_FD), "--", "true"]  # fmt: skip
    return program if probe_succeeds(probe) else None


FILTER_FD = 9  # the descriptor bwrap reads the seccomp program from


def _with_filter(program: Path) -> list[str]:
    # bwrap reads its seccomp program from a descriptor: a shell opens the file on it and
    # becomes bwrap (the wrapper is a command prefix, and its callers pass no descriptors).
    return ["/bin/sh", "-c", f'exec "$@" {FILTER_FD}< "$0"', str(program)]


def hiding(path: Path, tmpfs: Sequence[str] = ()) -> list[str]:
    """bwrap's options that make ``path`` unreadable: an empty directory (a tmpfs, with
    ``tmpfs``' options, e.g. its size) over a directory, the null device over a file; none for
    a path gone since (nothing to hide, and bwrap could not mount over it)."""
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
        parts += [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                  *kernel_guards()]  # fmt: skip
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
