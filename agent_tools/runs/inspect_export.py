"""`leanrig export inspect RUN_DIR… --out FILE.eval`: runs as Inspect eval logs.

Must not recompute a metric, change the run directory, or import inspect_ai at import time."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from lsp_bridge import LeanrigError

from ..models import MODEL_IO_FILE, MODEL_IO_SCHEMA
from .attempt_dir import PROMPT_FILE, SUBMISSION_FILE
from .inspect_attempt import AttemptRecord
from .loaded_run import LoadedRun, load_run
from .results import AttemptResult, read_results

INSPECT_HINT: Final = "install the extra: pip install -e '.[inspect]' (`make setup` does)"
LEDGER_FILE: Final = "ledger.jsonl"
TRANSCRIPT_FILE: Final = "transcript.jsonl"
MAX_RECORD_BYTES: Final = 256 * 2**20  # of one attempt's model_io.jsonl read at most
# Where the harnesses keep their own session logs in the attempt's fresh home.
SESSION_LOGS: Final = {
    "claude-code": ".claude/projects/*/*.jsonl",
    "codex": ".codex/sessions/**/rollout-*.jsonl",
}


class InspectMissing(LeanrigError):
    hint = INSPECT_HINT


class ExportError(LeanrigError):
    hint = "pass run directories written by `leanrig run`, and --out FILE.eval or a directory"


def require_inspect() -> None:
    """Raises `InspectMissing` unless inspect_ai can be imported."""
    if importlib.util.find_spec("inspect_ai") is None:
        raise InspectMissing("the Inspect export needs inspect_ai, which is not installed")


def _lines(path: Path, limit: int = MAX_RECORD_BYTES) -> tuple[list[dict[str, Any]], int]:
    """The JSON objects of a JSON-lines file and how many lines were not one."""
    try:
        with path.open("rb") as f:
            data = f.read(limit)
    except OSError:
        return [], 0
    found, bad = [], 0
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            bad += 1
            continue
        if isinstance(value, dict):
            found.append(value)
        else:
            bad += 1
    return found, bad


def attempt_root(run_dir: Path, r: AttemptResult) -> Path | None:
    """The directory of the attempt a results line describes."""
    base = run_dir / "attempts" / r.task
    for name in (f"{r.attempt}-retry", str(r.attempt)) if r.infra_retry else (str(r.attempt),):
        if (base / name).is_dir():
            return base / name
    return None


def _final_body(root: Path, task: str) -> str | None:
    best: tuple[int, str] | None = None
    for path in sorted((root / "serve").glob("submission-*.json")):
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if isinstance(record, dict) and record.get("task") == task:
            body, ts = record.get("body"), record.get("ts_ns")
            if isinstance(body, str) and isinstance(ts, int) and (best is None or ts > best[0]):
                best = (ts, body)
    return best[1] if best else None


def _session_log(home: Path) -> tuple[str, list[dict[str, Any]]] | None:
    """The largest harness session log in the attempt's home."""
    for harness, pattern in SESSION_LOGS.items():
        found = sorted(home.glob(pattern), key=lambda p: p.stat().st_size, reverse=True)
        if found:
            return harness, _lines(found[0])[0]
    return None


def read_attempt(run_dir: Path, r: AttemptResult) -> AttemptRecord:
    """What the attempt of results line ``r`` left; what is missing becomes a note."""
    root = attempt_root(run_dir, r)
    record = AttemptRecord(result=r, root=root)
    if root is None:
        record.notes.append("the attempt's directory is gone: its verdict and figures only")
        return record
    try:
        record.prompt = (root / "workspace" / PROMPT_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        record.notes.append(f"no {PROMPT_FILE} in the attempt's workspace")
    record.body = _final_body(root, r.task)
    record.ledger = [e for e in _lines(root / LEDGER_FILE)[0] if e.get("closed_by") != "server"]
    record.transcript = _lines(root / "workspace" / TRANSCRIPT_FILE)[0]
    exchanges, bad = _lines(root / MODEL_IO_FILE)
    record.exchanges = [x for x in exchanges if x.get("v") == MODEL_IO_SCHEMA]
    if bad or len(record.exchanges) < len(exchanges):
        record.notes.append(
            f"{MODEL_IO_FILE}: {bad + len(exchanges) - len(record.exchanges)} "
            "line(s) unreadable or of another schema, left out"
        )
    if (root / "home").is_dir():
        record.session_log = _session_log(root / "home")
    return record


def submission_text(record: AttemptRecord) -> str | None:
    """The judged file (``Submission.lean`` in the workspace), when it is there."""
    if record.root is None:
        return None
    try:
        return (record.root / "workspace" / SUBMISSION_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class ExportedLog:
    """One run written as one Inspect log."""

    run_dir: Path
    log: Path
    samples: int
    with_model_io: int  # samples whose transcript came from recorded model I/O
    score: float

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "log": str(self.log),
            "samples": self.samples,
            "with_model_io": self.with_model_io,
            "score": self.score,
        }


def _targets(runs: Sequence[LoadedRun], out: Path) -> list[Path]:
    """``out`` itself for one run given as ``*.eval``/``*.json``, else ``out/<run>`` each."""
    if out.suffix in (".eval", ".json"):
        if len(runs) > 1:
            raise ExportError(
                f"--out {out}: one file holds one run, and {len(runs)} were given",
                hint="give --out a directory: one <run>.eval per run",
            )
        return [out]
    names = [run.path.resolve().name or "run" for run in runs]
    return [out / (f"{n}-{i + 1}" if names.count(n) > 1 else n) for i, n in enumerate(names)]


def export_inspect(run_dirs: Sequence[Path], out: Path) -> list[ExportedLog]:
    """Each run of ``run_dirs`` as an Inspect eval log in ``out`` (see `_targets`)."""
    require_inspect()
    from .inspect_log import eval_log, write_log

    if not run_dirs:
        raise ExportError("no run directory given")
    runs = [load_run(Path(p)) for p in run_dirs]
    written = []
    for run, target in zip(runs, _targets(runs, out), strict=True):
        attempts = [read_attempt(run.path, r) for r in _results(run)]
        log = eval_log(run, attempts)
        path = write_log(log, target if target.suffix else target.with_suffix(".eval"))
        written.append(
            ExportedLog(
                run_dir=run.path,
                log=path,
                samples=len(attempts),
                with_model_io=sum(1 for a in attempts if a.exchanges),
                score=run.metrics.score,
            )
        )
    return written


def _results(run: LoadedRun) -> list[AttemptResult]:
    return sorted(read_results(run.path).results, key=lambda r: (r.task, r.attempt))


__all__ = [
    "INSPECT_HINT",
    "AttemptRecord",
    "ExportError",
    "ExportedLog",
    "InspectMissing",
    "attempt_root",
    "export_inspect",
    "read_attempt",
    "require_inspect",
    "submission_text",
]
