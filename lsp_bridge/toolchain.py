"""Finding a Lean to run, and the command that starts its language server.

Order: ``LEANRIG_LEAN``/argument → project toolchain (``elan which``) → PATH → bootstrap build.
``mode`` is ``toolchain`` when the Lean has ``Init.olean``, else ``bootstrap`` (prelude-only)."""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .bootstrap import bootstrap_lean_path, ensure_bootstrap, keep_answers, kept_answers
from .errors import BootstrapError, LeanNotFound
from .programs import find_program
from .server_command import ServerCommand
from .timeouts import REPORT_DELAY_MS

Mode = Literal["toolchain", "bootstrap"]
Source = Literal["setting", "elan", "PATH", "bootstrap"]

_VERSION_RE = re.compile(r"version (\d+\.\d+\.\d+[^\s,]*)(?:.*?commit ([0-9a-f]+))?")


@dataclass(frozen=True, slots=True)
class LeanInstall:
    lean: Path
    version: str
    githash: str
    mode: Mode
    source: Source
    lake: Path | None = None

    @property
    def leanchecker(self) -> Path | None:
        """The kernel replay's ``leanchecker``: beside ``lean``, else on PATH (looked up once)."""
        sibling = self.lean.parent / "leanchecker"
        return sibling if sibling.exists() else _leanchecker_on_path()

    def programs(self) -> dict[str, str]:
        """The absolute paths of this install's programs leanrig starts, by name (if found)."""
        found = {"lean": self.lean, "lake": self.lake, "leanchecker": self.leanchecker}
        return {name: str(path) for name, path in found.items() if path is not None}

    def server_command(
        self,
        project: Path,
        *,
        env: Mapping[str, str] | None = None,
        use_lake: bool | None = None,
        edit_delay_ms: int = 1,
        report_delay_ms: int = REPORT_DELAY_MS,
        wrapper: tuple[str, ...] = (),
    ) -> ServerCommand:
        """``[*wrapper, lake serve]`` for a Lake project on a toolchain, else ``lean --server``."""
        has_lakefile = any((project / f).exists() for f in ("lakefile.lean", "lakefile.toml"))
        lake = use_lake if use_lake is not None else (self.lake is not None and has_lakefile)
        if lake and self.lake is not None:
            argv: tuple[str, ...] = (str(self.lake), "serve", "--")
        else:
            argv = (str(self.lean), "--server")
        return ServerCommand(
            argv=(*wrapper, *argv),
            cwd=project,
            env=env,
            report_delay_ms=report_delay_ms,
            edit_delay_ms=edit_delay_ms,
        )


@functools.cache
def _leanchecker_on_path() -> Path | None:
    return find_program("leanchecker")


def parse_version(line: str) -> tuple[str, str]:
    """(version, githash) from ``lean --version`` output."""
    match = _VERSION_RE.search(line)
    if match is None:
        raise LeanNotFound(f"unexpected `lean --version` output: {line[:120]!r}")
    return match.group(1), match.group(2) or ""


def _run(argv: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def describe(lean: Path, source: Source, lake: Path | None = None) -> LeanInstall:
    """Probe a lean executable: version, githash and what it can elaborate."""
    line, libdir = _answers(lean)
    if line is None:
        raise LeanNotFound(f"{lean} does not run (`{lean} --version` failed)")
    version, githash = parse_version(line)
    has_init = libdir is not None and (Path(libdir) / "Init.olean").exists()
    if lake is None and source != "bootstrap":
        sibling = lean.parent / "lake"
        lake = sibling if sibling.exists() else None
    return LeanInstall(
        lean=lean,
        version=version,
        githash=githash,
        mode="toolchain" if has_init else "bootstrap",
        source=source,
        lake=lake if has_init else None,
    )


def _answers(lean: Path) -> tuple[str | None, str | None]:
    """What ``lean --version`` and ``lean --print-libdir`` print (None: the command failed).

    A bootstrap launcher's answers are kept beside it (`kept_answers`); any other Lean is asked
    each time (an elan proxy answers per directory)."""
    kept = kept_answers(lean)
    if kept is not None:
        return kept
    line = _run([str(lean), "--version"])
    libdir = _run([str(lean), "--print-libdir"]) if line is not None else None
    if line is not None:
        keep_answers(lean, line, libdir)
    return line, libdir


def find_lean(
    project: Path | None = None,
    *,
    explicit: str | None = None,
    build_bootstrap: bool = True,
) -> LeanInstall:
    """The Lean to use for ``project``, by the documented resolution order."""
    setting = explicit or os.environ.get("LEANRIG_LEAN")
    if setting:
        path = Path(setting).expanduser()
        if not path.exists():
            resolved = find_program(setting)
            if resolved is None:
                raise LeanNotFound(f"LEANRIG_LEAN={setting} does not exist")
            path = resolved
        return describe(path.absolute(), "setting")

    elan = find_program("elan")
    if elan and project is not None and (project / "lean-toolchain").exists():
        lean_path = _run([str(elan), "which", "lean"], cwd=project)
        lake_path = _run([str(elan), "which", "lake"], cwd=project)
        if lean_path:
            return describe(Path(lean_path), "elan", Path(lake_path) if lake_path else None)

    on_path = find_program("lean")
    if on_path:
        return describe(on_path, "PATH")

    boot = bootstrap_lean_path()
    if boot is not None and boot.exists():
        try:
            return describe(boot, "bootstrap")
        except LeanNotFound:
            if not build_bootstrap:
                raise  # else rebuilt below (e.g. its library was reinstalled)
    if boot is not None and build_bootstrap:
        try:
            return describe(ensure_bootstrap(install=False).lean, "bootstrap")
        except BootstrapError as exc:
            raise LeanNotFound(f"no Lean found and the bootstrap is not built: {exc}") from exc
    raise LeanNotFound("no Lean found: no LEANRIG_LEAN, no elan toolchain, no lean on PATH")
