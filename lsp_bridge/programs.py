"""Finding the programs leanrig starts (Lean, elan, leanchecker, a C compiler, a harness).

Look each up once, before any agent runs: a later lookup could find a program an agent planted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def find_program(name: str) -> Path | None:
    """``name`` on PATH's absolute directories only, made absolute but not resolved (shims)."""
    directories = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d.startswith("/")]
    found = shutil.which(name, path=os.pathsep.join(directories))
    return Path(os.path.abspath(found)) if found else None
