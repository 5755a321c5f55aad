"""Suites of Lean tasks: ``suite.toml`` + Lean files (docs/suite-format.md), loaded and checked.

Loading validates everything up front and names the task in every error. A prelude suite's own
library is compiled once per content hash."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import subprocess
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lsp_bridge import LeanInstall, LeanrigError, cache_root
from repl_pool import Header, SandboxPolicy, parse_header, sandbox_wrapper

from .body_scope import precheck_body, uses_sorry
from .locate import BodySpan, LocateError, is_public, locate_body
from .target_split import scope_wrappers, unwrap
from .task_kinds import TaskKind, reference_statement, statement_bounds, writes_statement

DEFAULT_AXIOMS = ("propext", "Classical.choice", "Quot.sound")


class SuiteError(LeanrigError):
    hint = "fix suite.toml or the task file it names"


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    wall_seconds: float = Field(
        default=60.0, gt=0, description="verifier wall-clock limit per check"
    )
    cpu_seconds: int = Field(default=120, gt=0, description="verifier CPU-time limit per check")
    memory_mb: int = Field(default=4096, gt=0, description="verifier resident-memory cap")
    equiv_seconds: float = Field(
        default=20.0,
        gt=0,
        description="a statement task's grader: seconds per direction of "
        "the equivalence proof (`leanrig run --equiv-budget` overrides it)",
    )
    attempt_memory_mb: int | None = Field(
        default=None,
        gt=0,
        description="what one attempt needs on a cluster node (its agent, "
        "its Lean and the verifier's; `leanrig run --ray` reserves it); default: memory_mb",
    )


class TaskSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Not starting with a dot: an id names directories (`attempts/<id>/`).
    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$")
    file: str
    theorem: str
    title: str = ""
    field: str = ""
    difficulty: int = Field(ge=1, le=10)
    kind: TaskKind = Field(
        default="proof",
        description="what an attempt writes: the proof body (proof), the target's statement "
        "(statement), or both (statement_and_proof)",
    )
    claim: str = Field(default="", description="the natural-language claim a statement states")
    claim_file: str | None = Field(
        default=None, description="a text file holding the claim, relative to the suite"
    )
    reference: str | None = Field(
        default=None,
        description="a statement task's reference: a Lean file (inside a `hidden` path) holding "
        "one theorem whose statement the attempt's must be equivalent to",
    )


class LadSpec(BaseModel):
    """The LAD condition's library: Lean files for consultation only, never imported by a task."""

    model_config = ConfigDict(extra="forbid")
    library: list[str] = Field(
        min_length=1, description="Lean files relative to the suite directory, e.g. Lib/Logic.lean"
    )


class LintSpec(BaseModel):
    """Findings of `leanrig suite lint` the suite's author accepts: code → task ids."""

    model_config = ConfigDict(extra="forbid")
    allow: dict[str, list[str]] = Field(
        default_factory=dict, description="finding code → the task ids it is accepted for"
    )


class SuiteSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    version: str = "1.0"
    lean: Literal["prelude", "full"] = "full"
    axioms: list[str] = Field(default_factory=lambda: list(DEFAULT_AXIOMS))
    library: list[str] = Field(default_factory=list)
    limits: Limits = Field(default_factory=lambda: Limits())
    lad: LadSpec | None = None
    lint: LintSpec | None = None
    hidden: list[str] = Field(
        default_factory=list,
        description="files or directories (relative to the suite directory) agents under "
        "`leanrig run` cannot read: reference solutions, notes",
    )
    tasks: list[TaskSpec]


@dataclass(frozen=True, slots=True)
class Task:
    spec: TaskSpec
    path: Path
    text: str
    span: BodySpan
    header: Header
    wrappers: tuple[int, ...] = ()  # offsets of the `in` of `… in` commands around the target
    statement_span: tuple[int, int] = (0, 0)  # from the end of the name to the `:=`
    claim: str = ""  # the natural-language claim
    # Empty for the task file's own text; keeps caches of one text from serving another.
    derived: str = ""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def key(self) -> str:
        """What caches of this task's text are keyed by."""
        return self.spec.id if not self.derived else f"{self.spec.id}#{self.derived}"

    @property
    def is_restated(self) -> bool:
        return self.derived.startswith("as:")

    def restated(self, statement: str) -> Task:
        """This task with the target's statement replaced (a statement task's attempt)."""
        if statement == self.statement:
            return self
        text = self.with_statement(statement)
        shift = len(statement) - (self.statement_span[1] - self.statement_span[0])
        span = BodySpan(self.span.decl_start, self.span.start + shift, self.span.end + shift)
        bounds = (self.statement_span[0], self.statement_span[1] + shift)
        return dataclasses.replace(
            self, text=text, span=span, statement_span=bounds, derived=f"as:{_digest(text)}"
        )

    def statement_view(self) -> Task:
        """This task with the statement as its editable span (for set_statement)."""
        start, end = self.statement_span
        return dataclasses.replace(
            self,
            span=BodySpan(self.span.decl_start, start, end),
            derived=f"statement:{_digest(self.text)}",
        )

    @property
    def kind(self) -> TaskKind:
        return self.spec.kind

    @property
    def statement(self) -> str:
        """The target's statement as the task file has it."""
        return self.text[self.statement_span[0] : self.statement_span[1]]

    def with_statement(self, statement: str, body: str | None = None) -> str:
        """The task file with the target's statement (and, given, its body) replaced."""
        start, end = self.statement_span
        between = self.text[end : self.span.start]
        proof = self.body if body is None else body
        return self.text[:start] + statement + between + proof + self.text[self.span.end :]

    def unwrapped(self, text: str) -> str:
        """``text`` as Lean's scope parse must see it: the target's wrappers unwrapped."""
        return unwrap(text, self.wrappers) if self.wrappers else text

    @property
    def body(self) -> str:
        return self.span.body(self.text)

    def with_body(self, body: str) -> str:
        return self.text[: self.span.start] + body + self.text[self.span.end :]

    def summary(self) -> dict[str, object]:
        s = self.spec
        return {
            "id": s.id,
            "title": s.title,
            "field": s.field,
            "difficulty": s.difficulty,
            "theorem": s.theorem,
            "kind": s.kind,
            "claim": self.claim,
        }


@dataclass(frozen=True, slots=True)
class Suite:
    root: Path
    spec: SuiteSpec
    tasks: dict[str, Task]

    @property
    def name(self) -> str:
        return self.spec.name

    def reference_path(self, task: Task) -> Path:
        """A statement task's reference file (absolute). Raises SuiteError if it has none."""
        if task.spec.reference is None:
            raise SuiteError(f"task {task.id}: a {task.kind} task has no reference")
        return (self.root / task.spec.reference).resolve()

    @property
    def lad_files(self) -> tuple[Path, ...]:
        """The LAD library's files (absolute, in order); empty without ``[lad]``."""
        if self.spec.lad is None:
            return ()
        return tuple((self.root / f).resolve() for f in self.spec.lad.library)

    @property
    def hidden_paths(self) -> tuple[Path, ...]:
        """What an agent's sandbox hides (absolute, resolved)."""
        return tuple((self.root / h).resolve() for h in self.spec.hidden)

    def content_hash(self) -> str:
        """A hash of everything a run's results depend on; a resume refuses a changed one."""
        digest = hashlib.sha256((self.root / "suite.toml").read_bytes())
        for task_id in sorted(self.tasks):
            digest.update(
                b"\0task\0" + task_id.encode() + b"\0" + self.tasks[task_id].text.encode()
            )
        for module in self.spec.library:
            src = self.root / (module.replace(".", "/") + ".lean")
            data = src.read_bytes() if src.exists() else b""
            digest.update(b"\0library\0" + module.encode() + b"\0" + data)
        for path in self.lad_files:
            data = path.read_bytes() if path.exists() else b""
            digest.update(b"\0lad\0" + str(path.relative_to(self.root)).encode() + b"\0" + data)
        return digest.hexdigest()[:16]

    def task(self, task_id: str) -> Task:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise SuiteError(
                f"unknown task {task_id[:100]!r}" + ("…" if len(task_id) > 100 else ""),
                hint=_known_ids(list(self.tasks)),
            ) from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _known_ids(ids: list[str], shown: int = 12) -> str:
    listed = ", ".join(ids[:shown]) + (f", … ({len(ids)} in all)" if len(ids) > shown else "")
    return f"use one of the suite's task ids: {listed} (list_tasks lists them)"


def load_suite(root: Path, only: Collection[str] | None = None) -> Suite:
    """The suite in ``root``, every task checked; ``only``: load and check just these tasks."""
    root = root.resolve()
    manifest = root / "suite.toml"
    if root.is_file():
        raise SuiteError(
            f"{root} is a file; a suite is a directory",
            hint=f"pass the directory that holds suite.toml: {root.parent}"
            if root.name == "suite.toml"
            else "pass the suite's directory (the one that holds suite.toml)",
        )
    if not root.exists():
        raise SuiteError(
            f"no such suite directory: {root}",
            hint="pass the suite's directory (the one that holds suite.toml), e.g. "
            "lean_project/suites/demo in a leanrig checkout",
        )
    try:
        raw = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(
            f"no suite.toml in {root}",
            hint="pass the suite's directory (the one that holds suite.toml), "
            "or write a suite.toml there (docs/suite-format.md)",
        ) from None
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{manifest} is not UTF-8: {exc.reason} at byte {exc.start}") from exc
    except OSError as exc:
        raise SuiteError(f"cannot read {manifest}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SuiteError(f"{manifest}: invalid TOML: {exc}") from exc
    try:
        spec = SuiteSpec.model_validate(raw)
    except ValidationError as exc:
        raise SuiteError(f"{manifest}: {_describe(exc, raw)}") from exc
    tasks: dict[str, Task] = {}
    if only is not None and (unknown := sorted(set(only) - {t.id for t in spec.tasks})):
        raise SuiteError(
            f"unknown task {unknown[0][:100]!r}", hint=_known_ids([t.id for t in spec.tasks])
        )
    for t in spec.tasks:
        if t.id in tasks:
            raise SuiteError(f"task {t.id}: duplicate id")
        if only is not None and t.id not in only:
            continue
        path = (root / t.file).resolve()
        if not path.is_relative_to(root):
            raise SuiteError(f"task {t.id}: file {t.file} is outside the suite directory")
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SuiteError(f"task {t.id}: file {t.file} does not exist") from None
        except UnicodeDecodeError as exc:
            raise SuiteError(f"task {t.id}: file {t.file} is not UTF-8") from exc
        except OSError as exc:
            raise SuiteError(f"task {t.id}: cannot read {t.file}: {exc.strerror or exc}") from exc
        if text.startswith("\ufeff"):
            raise SuiteError(
                f"task {t.id}: file {t.file} starts with a UTF-8 byte order mark, which Lean "
                "does not accept (its header is then not read); save it without one"
            )
        try:
            span = locate_body(text, t.theorem)
        except LocateError as exc:
            raise SuiteError(f"task {t.id}: {exc} in {t.file}") from exc
        problem = precheck_body(span.body(text))
        if problem is not None:
            raise SuiteError(
                f"task {t.id}: the placeholder proof of {t.theorem} in {t.file} fails the checks "
                f"every body must pass: {problem}"
            )
        if not uses_sorry(span.body(text)):
            # Else an attempt that only opened the task would score it.
            after = text[span.end :]
            where = (
                " (its `where` clause, which starts in column 0, is not part of the body an "
                "attempt edits: the sorry there does not count; put the helpers' sorry in the "
                "body, or indent the `where`)"
                if after.lstrip("\n").startswith("where") and uses_sorry(after)
                else ""
            )
            raise SuiteError(
                f"task {t.id}: the placeholder proof of {t.theorem} in {t.file} does not use "
                f"sorry{where}: write `sorry` as its body (in a prelude suite, `sorryAx T …` "
                "with the axiom declared)"
            )
        header = parse_header(text)
        if header.module and not is_public(text, span.decl_start):
            # The verdict names the target from a module of its own.
            raise SuiteError(
                f"task {t.id}: theorem {t.theorem} in {t.file} is not public in a file of the "
                "module system (`module` header): the verdict cannot name it from another "
                "module (mark it `public`, or put it in a `public section`)"
            )
        wrappers = scope_wrappers(text, header.end, span.decl_start)
        try:
            bounds = statement_bounds(text, span)
        except LocateError as exc:
            raise SuiteError(f"task {t.id}: {exc} in {t.file}") from exc
        claim = _claim(root, t)
        tasks[t.id] = Task(t, path, text, span, header, wrappers, bounds, claim)
    suite = Suite(root, spec, tasks)
    _check_lad(suite)
    _check_hidden(suite)
    for task in suite.tasks.values():
        _check_reference(suite, task)
    return suite


def _claim(root: Path, t: TaskSpec) -> str:
    """``claim``, or the text of ``claim_file``; a statement task needs one."""
    if t.claim and t.claim_file is not None:
        raise SuiteError(f"task {t.id}: give `claim` or `claim_file`, not both")
    claim = t.claim
    if t.claim_file is not None:
        path = (root / t.claim_file).resolve()
        if not path.is_relative_to(root):
            raise SuiteError(f"task {t.id}: claim_file {t.claim_file} is outside the suite")
        try:
            claim = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SuiteError(f"task {t.id}: cannot read claim_file {t.claim_file}: {exc}") from exc
    if writes_statement(t.kind) and not claim.strip():
        raise SuiteError(
            f"task {t.id}: a {t.kind} task needs the claim its statement states",
            hint='add `claim = "…"` (or `claim_file = "….md"`) to the task',
        )
    return claim


def _check_reference(suite: Suite, task: Task) -> None:
    """A statement task's reference: one theorem, in a ``hidden`` path; its text is not kept."""
    if not writes_statement(task.kind):
        if task.spec.reference is not None:
            raise SuiteError(f"task {task.id}: only statement tasks have a `reference`")
        return
    if task.spec.reference is None:
        raise SuiteError(
            f"task {task.id}: a {task.kind} task needs a `reference`",
            hint="a Lean file, inside a `hidden` path, holding the theorem whose statement "
            "the claim's is graded against",
        )
    path = suite.reference_path(task)
    if not path.is_relative_to(suite.root):
        raise SuiteError(f"task {task.id}: reference {task.spec.reference} is outside the suite")
    if not any(path == h or path.is_relative_to(h) for h in suite.hidden_paths):
        raise SuiteError(
            f"task {task.id}: reference {task.spec.reference} is not in a `hidden` path",
            hint="agents could read it: list it (or its directory) in `hidden`",
        )
    try:
        reference_statement(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteError(f"task {task.id}: cannot read reference {task.spec.reference}") from exc
    except LocateError as exc:
        raise SuiteError(f"task {task.id}: reference {task.spec.reference}: {exc}") from exc


def _check_hidden(suite: Suite) -> None:
    """``hidden`` paths exist, strictly inside the suite: a typo must not leave a solution open."""
    root = suite.root.resolve()
    for name, path in zip(suite.spec.hidden, suite.hidden_paths, strict=True):
        if not path.is_relative_to(root) or path == root:
            raise SuiteError(f"hidden path {name!r} is not inside the suite directory")
        if not path.exists():
            raise SuiteError(f"hidden path {name!r} does not exist")


def _check_lad(suite: Suite) -> None:
    """``[lad] library``: existing ``.lean`` files in the suite, listed once, no task imports."""
    if suite.spec.lad is None:
        return
    seen: set[Path] = set()
    for name, path in zip(suite.spec.lad.library, suite.lad_files, strict=True):
        if not path.is_relative_to(suite.root):
            raise SuiteError(f"[lad] library file {name} is outside the suite directory")
        if path.suffix != ".lean":
            raise SuiteError(f"[lad] library file {name} is not a .lean file")
        if not path.is_file():
            raise SuiteError(f"[lad] library file {name} does not exist")
        if path in seen:
            raise SuiteError(f"[lad] library file {name} is listed twice")
        seen.add(path)
        module = ".".join(path.relative_to(suite.root).with_suffix("").parts)
        for task in suite.tasks.values():
            if any(i.split()[-1] == module for i in task.header.imports):
                raise SuiteError(
                    f"task {task.id}: imports the [lad] library module {module}",
                    hint="the LAD library is for consultation only: tasks must not import it",
                )


def _describe(exc: ValidationError, raw: dict[str, object]) -> str:
    parts = []
    for err in exc.errors():
        loc = list(err["loc"])
        where = ".".join(str(p) for p in loc)
        if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
            tasks = raw.get("tasks")
            if isinstance(tasks, list) and loc[1] < len(tasks) and isinstance(tasks[loc[1]], dict):
                where = f"task {tasks[loc[1]].get('id', loc[1])}: " + ".".join(
                    str(p) for p in loc[2:]
                )
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def library_sources(suite: Suite) -> list[tuple[str, Path]]:
    """The suite's own library modules and their source files."""
    sources = []
    for module in suite.spec.library:
        src = suite.root / (module.replace(".", "/") + ".lean")
        if not src.exists():
            raise SuiteError(f"library module {module}: {src} does not exist")
        sources.append((module, src))
    return sources


def library_dir(suite: Suite, install: LeanInstall) -> Path | None:
    """Build (once per content hash) the suite's own prelude library; its ``LEAN_PATH`` dir."""
    if not suite.spec.library:
        return None
    digest = hashlib.sha256(f"{install.lean}@{install.githash}".encode())
    sources = library_sources(suite)
    for module, src in sources:
        digest.update(module.encode() + b"\0" + src.read_bytes())
    out = cache_root() / "suites" / f"{suite.name}-{digest.hexdigest()[:16]}"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / ".built").exists():
            return out
        env = {**os.environ, "LEAN_PATH": str(out)}
        prefix = list(sandbox_wrapper(SandboxPolicy(writable=(out,))))
        for module, src in sources:  # dependencies first
            olean = out / (module.replace(".", "/") + ".olean")
            olean.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                [*prefix, str(install.lean), "-R", str(suite.root), "-o", str(olean), str(src)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                env=env,
                timeout=300,
                check=False,
            )
            if proc.returncode != 0:
                output = (proc.stdout + proc.stderr).strip()
                first = output.find(": error")
                start = output.rfind("\n", 0, first) + 1 if first >= 0 else 0
                shown = "\n".join(output[start:].splitlines()[:8])[:800]
                raise SuiteError(f"library module {module} failed to compile: {shown}")
        (out / ".built").touch()
    return out
