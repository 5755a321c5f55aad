"""Peers measured beside leanrig: lean-lsp-mcp and leanclient, installed from PyPI into a separate
venv under bench/.peers (never into leanrig's own environment), and started against the same
bootstrap Lean through a tiny `lake` stand-in that execs `lean --server`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PEERS = Path(__file__).with_name(".peers")
VENV = PEERS / "venv"
PACKAGES = ["lean-lsp-mcp==0.32.0", "leanclient==0.13.2"]


def ensure_peers() -> Path:
    """The peer venv's python (created on first use; idempotent)."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".installed"
    if not stamp.exists() or stamp.read_text() != " ".join(PACKAGES):
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PACKAGES], check=True,
                       capture_output=True)  # fmt: skip
        stamp.write_text(" ".join(PACKAGES))
    return python


def lake_standin(lean: Path, directory: Path) -> Path:
    """A `lake` that serves with the given lean: `lake serve -- ARGS` → `lean --server ARGS`."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "lake"
    script.write_text(
        "#!/bin/sh\n"
        "# Stand-in for lake (bench only): the bootstrap Lean has no lake.\n"
        'if [ "$1" = "serve" ]; then shift; [ "$1" = "--" ] && shift; '
        f'exec "{lean}" --server "$@"; fi\n'
        'if [ "$1" = "env" ]; then shift; [ $# -gt 0 ] && exec "$@"; env; exit 0; fi\n'
        "exit 0\n"
    )
    script.chmod(0o755)
    return script


def peer_env(lake_dir: Path, lean_path: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{lake_dir}{os.pathsep}{env.get('PATH', '')}"
    if lean_path is not None:
        env["LEAN_PATH"] = str(lean_path)
    return env
