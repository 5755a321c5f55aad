"""The sandbox every Lean process runs in: rlimits (prlimit) and, where available, bwrap.

A policy becomes a command prefix (``sandbox_wrapper()``), so pool servers, their workers
(inherited) and verifier processes are confined the same way:

- rlimits: address space, CPU seconds, open files, no core dumps (``prlimit``, util-linux);
- namespaces (``bwrap``, Debian's bubblewrap): no network, the whole file system read-only
  (toolchain, suite, everything), only the listed directories writable, all processes killed
  when the sandbox's parent dies.

Without bwrap the wrapper is rlimits only; ``sandbox_tools()`` says so and callers log a warning.
See docs/threat-model.md for what this does and does not defend.

Paths in a policy are absolute: the wrapped program usually runs in another working directory
(a Lean server's is its project), so a relative ``writable`` entry is resolved against *our*
working directory when the policy is made, and ``sandbox_wrapper()`` refuses one that is not
absolute.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

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
    which some containers and CI runners forbid: then we fall back to rlimits only)."""
    return {"prlimit": sandbox_program("prlimit"), "bwrap": _working_bwrap()}


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
        parts += [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        for path in policy.hidden:
            parts += hiding(path)
        for path in policy.writable:
            if not path.is_absolute():  # unreachable through __init__; never bind relative
                raise ValueError(f"sandbox paths must be absolute, got {str(path)!r}")
            parts += ["--bind", str(path), str(path)]
        parts += ["--unshare-all", *CAP_DROP]
        if policy.network:
            parts.append("--share-net")
        parts += ["--die-with-parent", "--"]
    elif policy.use_bwrap:
        raise RuntimeError("bwrap was required but is not installed")
    return tuple(parts)


def uses_namespaces(policy: SandboxPolicy) -> bool:
    return policy.use_bwrap is not False and sandbox_tools()["bwrap"] is not None
