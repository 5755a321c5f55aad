"""Finding the programs leanrig starts (Lean, elan, leanchecker, a C compiler, a harness).

Each is looked up once, when the command starts, before any agent runs, and kept as an
absolute path: a later lookup could find a program an agent planted.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def find_program(name: str) -> Path | None:
    """``name`` as PATH finds it, made absolute, looking only in PATH's absolute directories (a
    relative entry, ``.`` or ``bin``, names whatever directory leanrig was started in, which may
    be one an agent writes). Links are kept: an elan or npm shim dispatches on its name."""
    directories = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d.startswith("/")]
    found = shutil.which(name, path=os.pathsep.join(directories))
    return Path(os.path.abspath(found)) if found else None
