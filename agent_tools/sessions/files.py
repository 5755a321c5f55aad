"""Files leanrig writes whole: a submission, an attempt's state."""

from __future__ import annotations

import os
from pathlib import Path


def replace_file(path: Path, data: bytes) -> None:
    """``path`` now holds ``data``, atomically (a new file beside it, then a rename), and never
    written through a link someone left there: the directory may be one an agent or an editor
    can write (a ``Submission.lean`` linked to the run's results.jsonl made the runner overwrite
    it with a forged line). The temporary name is unique, so two writers never share one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)  # replaces a link itself, never its target
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
