"""Files leanrig writes whole: a submission, an attempt's state."""

from __future__ import annotations

import os
from pathlib import Path


def replace_file(path: Path, data: bytes, *, durable: bool = False) -> None:
    """``path`` now holds ``data``, atomically (a new file beside it, then a rename), and never
    written through a link someone left there: the directory may be one an agent or an editor
    can write (a ``Submission.lean`` linked to the run's results.jsonl made the runner overwrite
    it with a forged line). The temporary name is unique, so two writers never share one.

    ``durable``: on the disk before this returns (the data, then the rename: fsync of the file
    and of its directory), for state a crash of the machine must not roll back or leave empty —
    a human attempt's clock (a rename can reach the disk before the data it names). Costs a
    few ms on a real disk: not for a proof step's path."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, path)  # replaces a link itself, never its target
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
