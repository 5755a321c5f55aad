"""The tamper-proof final check: the verdict a benchmark reports.

Independent of the agent's warm session: every check starts fresh Lean processes (never a pool
slot) in a fresh directory, inside the sandbox, under the suite's limits.

1. Structure: outside the body the submission is byte-identical to the task file; the body
   passes the text prechecks (scope.py) and carries none of the constructs that escape the
   kernel's view (``run_tac``, ``open private``, ``set_option debug.``, ``implemented_by``,
   ``extern``, ``unsafe``, ``#exit``...).
2. Lean's parse (a fresh ``lean --server``): no errors; the body stays inside the target
   declaration (document symbols; scope.check_scope).
3. Compile the submission to ``.olean`` (module ``LeanrigSubmission``), then query it from a
   separate trusted file that imports it: ``#print axioms`` (``sorryAx`` absent, axioms in the
   allow-list) and ``#check @T`` under ``pp.all`` (fully explicit terms): the target's universe
   parameters and type (a ``Statement``), compared with the same query against the untouched
   task file compiled as ``LeanrigOriginal``.
4. Where the toolchain has ``leanchecker``, replay the submission's environment in the kernel.

A timeout or a crash is a rejection with that reason, never an acceptance.

Must not block the event loop: every process is awaited under a deadline (``run_once``, the
LSP client), scratch directories are removed in a worker thread. Scratch paths are absolute
whatever ``work_root`` is given (they become file URIs and sandbox bind mounts).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from lsp_bridge import (
    COMMENT_KINDS,
    SETUP_ARTEFACT_NOTE,
    LeanClient,
    LeanInstall,
    LeanrigError,
    LineIndex,
    Pos,
    Timeouts,
    TokenKind,
    lean_tokens,
    lone_carriage_return,
    name_parts,
    scan_text,
    without_setup_artefacts,
)
from repl_pool import Completed, SandboxPolicy, base_env, run_once, sandbox_wrapper

from ..tasks import (
    Suite,
    Task,
    body_bounds,
    check_scope,
    declaration_head,
    editor_trimmed,
    flatten_symbols,
    precheck_body,
    suffix_structure,
)

FORBIDDEN = {
    "run_tac": "`run_tac` runs arbitrary code during elaboration",
    # The same in term, tactic or command position (a red-team sweep found `by_elab` missing).
    "by_elab": "`by_elab` runs arbitrary code during elaboration",
    "run_elab": "`run_elab` runs arbitrary code during elaboration",
    "run_meta": "`run_meta` runs arbitrary code during elaboration",
    "run_cmd": "`run_cmd` runs arbitrary code during elaboration",
    "open private": "`open private` reaches private declarations",
    "set_option debug.": "`set_option debug.*` can switch off kernel checks",
    "implemented_by": "`implemented_by` swaps code the kernel never checks",
    "extern": "`extern` binds unchecked native code",
    "unsafe": "`unsafe` escapes the kernel",
    "#exit": "`#exit` stops processing: later checks would never run",
    "#eval": "`#eval` runs arbitrary code during elaboration",
    "native_decide": "`native_decide` trusts the compiler (Lean.ofReduceBool)",
    "include_str": "`include_str` reads a file while Lean elaborates",
}
# What acts while Lean elaborates (runs code, reads files): a session refuses these before
# its Lean sees them (``effects_when_elaborated``), where an agent would read what its sandbox
# hides through Lean's messages; the rest Lean elaborates, and the session says the verdict
# rejects them.
ELABORATION_EFFECTS = frozenset(
    {"run_tac", "by_elab", "run_elab", "run_meta", "run_cmd", "#eval", "include_str"}
)


# `#print axioms T`: "'T' does not depend on any axioms" / "'T' depends on axioms: [a, b]" (the
# list may be broken over lines; names print escaped where needed: 'Demo.«my thm»').
_AXIOMS_RE = re.compile(
    r"'(?P<name>.+)' (?:does not depend on any axioms|depends on axioms: \[(?P<list>.*)\])",
    re.DOTALL,
)
# `#check @T` under pp.all: "@T.{u_1, u_2} : type" ("@" only when T has implicit arguments, the
# universe list only when T is universe polymorphic, both possibly broken over lines).
_NAME_PART = r"(?:«[^»]*»|[^\s.«»{}:]+)"
_CHECK_RE = re.compile(
    rf"@?(?P<name>{_NAME_PART}(?:\.{_NAME_PART})*)(?:\.\{{(?P<levels>[^}}]*)\}})? : (?P<type>.*)",
    re.DOTALL,
)
# How long `lake env` may take to report a Lake suite's LEAN_PATH (it may build dependencies).
LAKE_ENV_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class Verdict:
    accepted: bool
    reasons: tuple[str, ...]
    axioms: tuple[str, ...]
    elapsed_ms: float
    lean_version: str
    stages: dict[str, float] = field(default_factory=dict)  # stage -> ms

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "reasons": list(self.reasons),
            "axioms": list(self.axioms),
            "elapsed_ms": round(self.elapsed_ms, 1),
            "lean_version": self.lean_version,
            "stages_ms": {k: round(v, 1) for k, v in self.stages.items()},
        }


@dataclass(frozen=True, slots=True)
class Statement:
    """A theorem's statement as the trusted query prints it (``#check @T`` under ``pp.all``):
    its universe parameters, renamed ``u_1, u_2, …`` in declaration order, and its fully
    explicit type in terms of them. Two statements are equal iff the theorems have the same
    type up to the names of their universe parameters (count and order count)."""

    universes: tuple[str, ...]
    type: str

    def universe_list(self) -> str:
        return ".{" + ", ".join(self.universes) + "}"


class _Rejected(Exception):
    def __init__(self, *reasons: str) -> None:
        self.reasons = reasons


def escape_name(name: str) -> str:
    """``name`` with every component escaped (``«Demo».«X».«main»``): any theorem name, also
    one with keywords or spaces in it, reads back as exactly that name."""
    return ".".join(f"«{part}»" for part in name_parts(name))


def _split_names(listing: str) -> tuple[str, ...]:
    """``a, «b, c»,\n d`` → ``("a", "«b, c»", "d")``: commas inside «» do not separate."""
    names: list[str] = []
    current: list[str] = []
    escaped = False
    for ch in listing:
        if ch == "," and not escaped:
            names.append("".join(current).strip())
            current = []
            continue
        escaped = escaped or ch == "«"
        escaped = escaped and ch != "»"
        current.append(ch)
    names.append("".join(current).strip())
    return tuple(n for n in names if n)


def parse_check(data: str, theorem: str, module: str | None = None) -> Statement | None:
    """The statement in ``#check @theorem``'s answer (pp.all), or None if the answer is not
    about ``theorem``. ``module``: the compiled module the answer is about, whose name Lean
    puts into its private names (``_private.LeanrigSubmission.0.N.two``): left out, so a
    statement naming a private declaration of the task file reads the same from the
    submission and from the untouched task, compiled under two names (a red-team sweep:
    every proof of such a task was rejected, "elaborated types differ")."""
    match = _CHECK_RE.fullmatch(data.strip())
    if match is None or name_parts(match["name"]) != name_parts(theorem):
        return None
    levels = tuple(level.strip() for level in (match["levels"] or "").split(",") if level.strip())
    statement = match["type"]
    if module is not None:
        statement = statement.replace(f"_private.{module}.0.", "_private.0.")
    return Statement(universes=levels, type=statement)


def forbidden_constructs(body: str) -> list[str]:
    """Reasons for constructs in the body's code (comments and strings ignored).

    Two views, either one suffices to reject: the masked text (any whitespace between the words
    of a construct) and Lean's tokens with ``«»``-escaped names resolved, so that
    ``set_option «debug».skipKernelTC`` or ``«native_decide»`` cannot slip past the text.
    And an attribute on the body's own declarations (a ``where`` helper's ``@[…]``) must be
    one of ``BODY_ATTRIBUTES``.

    Only the constructs whose every word occurs in the body, guillemets dropped, are looked
    for (either view needs those characters), and attributes only where a `[` follows `@` or
    `attribute`: a session runs this on every complete step, and the two views cost
    0.25-0.5 ms for a short body."""
    plain = body.replace("«", "").replace("»", "")
    candidates = _present(plain, FORBIDDEN)
    attributed = "[" in body and ("@" in body or "attribute" in plain)
    if not candidates and not attributed:
        return []
    words = _code_words(body)  # lexed once, for both
    names, inside = _attributes(words)
    found = _forbidden_in_code(body, candidates, words, inside) if candidates else []
    return found + [
        f"forbidden construct in the proof: attribute `{name}` (a proof's helpers may carry "
        f"only {', '.join(sorted(BODY_ATTRIBUTES))}: other attributes can run code when the "
        "proof is imported or change how later commands elaborate)"
        for name in dict.fromkeys(names)
        if name not in BODY_ATTRIBUTES and name not in ATTRIBUTE_ONLY
    ]


# Attributes a proof's own declarations (its `where` helpers) may carry: hints to the
# elaborator, simp and the compiler, which run no code of the proof's and leave the trusted
# query's `#check` and `#print axioms` as they are. Any other attribute may: `@[init]` runs its
# helper whenever the compiled submission is imported — in the verdict's query, where it could
# print the query's expected answers itself and exit (found by a red-team sweep) —,
# `@[command_elab]`/`@[macro]`/`@[term_elab]` change how the query's commands elaborate.
BODY_ATTRIBUTES = frozenset({
    "simp", "reducible", "irreducible", "semireducible", "inline", "noinline", "always_inline",
    "specialize", "nospecialize", "match_pattern", "ext", "norm_cast", "grind",
})  # fmt: skip


def effects_when_elaborated(body: str) -> list[str]:
    """``forbidden_constructs``' reasons for the constructs that act while Lean elaborates
    (``ELABORATION_EFFECTS``)."""
    candidates = _present(body.replace("«", "").replace("»", ""), sorted(ELABORATION_EFFECTS))
    return _forbidden_in_code(body, candidates) if candidates else []


def _present(plain: str, constructs: Iterable[str]) -> list[str]:
    """The constructs whose every word occurs in ``plain`` (the body, guillemets dropped): the
    only ones worth lexing the body for."""
    return [c for c in constructs if all(word in plain for word in c.split(" "))]


def _forbidden_in_code(
    body: str,
    constructs: Iterable[str],
    words: list[str] | None = None,
    in_attributes: set[str] | None = None,
) -> list[str]:
    """The reasons for ``constructs`` (``words``, ``in_attributes``: the body's, when the
    caller has them already)."""
    if words is None:
        words = _code_words(body)
    if in_attributes is None:
        in_attributes = _attributes(words)[1]
    # Comments only: a string literal may be interpolated (`s!"{include_str …}"`, and
    # `throwError "… {e}"`), its `{…}` code; a construct's words in a plain string refuse a
    # proof that no proof needs.
    mask = scan_text(body).mask(COMMENT_KINDS)
    code = "".join(" " if mask[i] else ch for i, ch in enumerate(body))
    found = []
    for construct in constructs:
        if construct in ATTRIBUTE_ONLY:
            hit = construct in in_attributes
        else:
            hit = _FORBIDDEN_TEXT[construct].search(code) is not None or _has_words(
                words, construct
            )
        if hit:
            found.append(f"forbidden construct in the proof: {FORBIDDEN[construct]}")
    return found


# Constructs that are attributes: they act only inside `@[…]` (or `attribute […]`); anywhere
# else the word is an ordinary identifier (`fun extern h => …` is a proof like any other).
ATTRIBUTE_ONLY = frozenset({"extern", "implemented_by"})


def _attributes(words: list[str]) -> tuple[list[str], set[str]]:
    """Inside attribute brackets — ``@[…]`` (also written ``@ […]``) and ``attribute […]``,
    nested brackets included —: the attribute of each instance (the first word after ``[`` or
    a top-level ``,``, past ``local`` / ``scoped``: ``@[local simp, init f]`` → ``simp``,
    ``init``; a bracket or symbol there names itself, never on the list), and every word."""
    names: list[str] = []
    inside: set[str] = set()
    depth = 0
    expect = False  # the next word names an attribute
    for i, word in enumerate(words):
        if depth:
            if expect and word not in ("local", "scoped"):
                names.append(word)
                expect = False
            if word == "[":
                depth += 1
            elif word == "]":
                depth -= 1
            else:
                inside.add(word)
                expect = expect or (word == "," and depth == 1)
        elif word == "[" and i > 0 and words[i - 1] in ("@", "attribute"):
            depth, expect = 1, True
    return names, inside


def _forbidden_text(construct: str) -> re.Pattern[str]:
    pattern = r"\s+".join(re.escape(word) for word in construct.split(" "))
    tail = r"(?![\w'])" if construct[-1].isalnum() else ""
    return re.compile(r"(?<![\w.])" + pattern + tail)


_FORBIDDEN_TEXT = {construct: _forbidden_text(construct) for construct in FORBIDDEN}


def _code_words(body: str) -> list[str]:
    """The body's code tokens as Lean reads them: identifiers unescaped (``«debug».x`` →
    ``debug.x``), ``#`` glued to the identifier it prefixes (``#exit``), trivia dropped."""
    words: list[str] = []
    glue = -1  # end offset of a `#` that the next identifier belongs to
    for tok in lean_tokens(body):
        if tok.kind in COMMENT_KINDS:
            continue
        text = tok.text(body)
        if tok.kind is TokenKind.IDENT:
            name = ".".join(name_parts(text))
            if tok.start == glue and words:
                words[-1] = "#" + name
            else:
                words.append(name)
        else:
            words.append(text)
        glue = tok.end if text == "#" else -1
    return words


def _has_words(words: list[str], construct: str) -> bool:
    parts = construct.split(" ")
    last = parts[-1]
    prefix = last.endswith(".")  # `set_option debug.`: any option under debug
    for i in range(len(words) - len(parts) + 1):
        *head, tail = words[i : i + len(parts)]
        if head != parts[:-1]:
            continue
        if tail == last or (prefix and tail.startswith(last)):
            return True
    return False


def axioms_outside(axioms: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """The axioms the verdict rejects as outside the allow-list (``sorryAx`` is rejected as an
    incomplete proof instead)."""
    permitted = set(allowed)
    return [a for a in axioms if a not in permitted and a != "sorryAx"]


def parse_axioms(messages: list[dict[str, Any]], theorem: str) -> tuple[str, ...] | None:
    """The axioms ``#print axioms theorem`` lists (as Lean prints them), or None if no message
    answers it."""
    for m in messages:
        match = _AXIOMS_RE.fullmatch(str(m.get("data", "")).strip())
        if match is None or name_parts(match["name"]) != name_parts(theorem):
            continue
        return _split_names(match["list"]) if match["list"] is not None else ()
    return None


def compile_failure(
    errors: list[dict[str, Any]],
    text: str,
    body_start: int,
    body_end: int,
    declaration: tuple[int, int],
) -> str:
    """The verdict's reason for Lean's ``errors`` (``--json`` messages, at least one) compiling
    the submission ``text``: the proof body's first error if it has one, else Lean's first;
    its position, and whether it is in the proof body ``[body_start, body_end]`` or in the
    task file's own text — an error there means the proof changed how the rest reads, or the
    task file itself does not compile (a suite to fix) — or on the target's declaration itself
    (``declaration``: its doc comment to its name, ``tasks.declaration_head``), where Lean
    reports some of a proof's errors."""
    index = LineIndex(text)

    def position(error: dict[str, Any]) -> Pos | None:
        pos = error.get("pos")
        if not isinstance(pos, dict) or not isinstance(pos.get("line"), int):
            return None
        # Lean's column is 0-based; the verdict's positions are 1-based, as the agent's are.
        column = pos.get("column", 0)
        return Pos(pos["line"], (column if isinstance(column, int) else 0) + 1)

    def in_body(error: dict[str, Any]) -> bool:
        at = position(error)
        return at is not None and body_start <= index.offset_of(at) <= body_end

    error = next((e for e in errors if in_body(e)), errors[0])
    message = str(error.get("data", "")).splitlines()[0] if error.get("data") else "(no message)"
    at = position(error)
    if at is None:
        return f"compilation failed: {message}"
    where = error_place(index.offset_of(at), body_start, body_end, declaration)
    return f"compilation failed at {at.line}:{at.column} ({where}): {message}"


# A suite whose placeholder proves the theorem (one that mentions sorry without depending on
# it: the suite's load-time rule is lexical): the task file unchanged is no one's proof.
PLACEHOLDER_PROVES = (
    "the proof body is the task's placeholder, unchanged, and the placeholder already proves "
    "the theorem: the suite is broken (tell its author); no attempt is scored for it"
)


def _as_lean_reads(submission: str) -> str:
    """``submission`` with its CRLF line ends as LF; a carriage return not followed by a line
    feed is refused (Lean refuses one outside comments and strings: "isolated carriage returns
    are not allowed"; the verdict everywhere, as a session refuses one in a body). Checked on
    the text as submitted: normalizing first made ``\r\r\n`` a CRLF."""
    lone = lone_carriage_return(submission)
    if lone is not None:
        pos = LineIndex(submission).pos_of(lone)
        raise _Rejected(
            f"the file has a carriage return not followed by a line feed at {pos.line}:"
            f"{pos.column}, which Lean does not accept"
        )
    return submission.replace("\r\n", "\n")


def error_place(offset: int, body_start: int, body_end: int, declaration: tuple[int, int]) -> str:
    """Whether an error at ``offset`` of a submission is the proof's — in its body, or on the
    target's declaration itself (``declaration``: ``tasks.declaration_head``), where Lean puts
    e.g. a recursive proof's failed termination — or the task file's (its statement included)."""
    if body_start <= offset <= body_end:
        return "in the proof body"
    if declaration[0] <= offset <= declaration[1]:
        return (
            "on the target theorem's declaration, not its statement: Lean reports some errors "
            "of a proof there, e.g. a recursive proof's failed termination"
        )
    return (
        "outside the proof body, in the task file's own text: the proof changed how the "
        "rest of the file reads, or the task file does not compile without it"
    )


def _absolute_temp_dir(prefix: str, root: Path | None) -> Path:
    # The default temp dir can be relative (the current directory as the last resort).
    return Path(os.path.abspath(tempfile.mkdtemp(prefix=prefix, dir=root)))


def parse_json_messages(stdout: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue
    return out


class Verifier:
    def __init__(
        self,
        suite: Suite,
        install: LeanInstall,
        *,
        library: Path | None,
        sandbox: SandboxPolicy | None = None,
        work_root: Path | None = None,
    ) -> None:
        self.suite = suite
        self.install = install
        self.library = library
        self.sandbox = sandbox or SandboxPolicy()
        # Absolute now, in the caller's working directory: scratch paths become file URIs and
        # sandbox bind mounts, and Lean runs in another working directory.
        self.work_root = work_root.resolve() if work_root is not None else None
        self._lake_path: list[Path] | None = None
        self._lake_lock = anyio.Lock()
        self._ref_types: dict[str, Statement] = {}  # task id -> statement of the untouched task
        self._ref_suffix: dict[str, list[str]] = {}  # task id -> Lean's parse after the body
        self._reference_lock = anyio.Lock()
        checker = install.leanchecker  # (the toolchain's; looked up once per process)
        self._checker = str(checker) if checker is not None else None

    # -- public -------------------------------------------------------------------------------

    async def verify(self, task: Task, submission: str) -> Verdict:
        """The verdict on ``submission``, the task file's whole text as submitted. Its CRLF
        line ends are read as LF, as Lean reads them; a lone carriage return is refused
        (``_as_lean_reads``)."""
        started = time.perf_counter()
        stages: dict[str, float] = {}
        axioms: tuple[str, ...] = ()
        try:
            submission = _as_lean_reads(submission)
            body = self._structure(task, submission)
            submission = task.with_body(body)  # the task file's own text around the body
            stages["structure"] = (time.perf_counter() - started) * 1000
            await self._project_lean_path()  # Lake suites: asked once, before the stages share it
            async with self._scratch("leanrig-verify-") as work:
                # The three Lean runs are independent: run them at once (each in its own
                # fresh, sandboxed process); report the first failing stage in pipeline order.
                outcomes: dict[str, Any] = {}

                async def stage(name: str, run: Callable[[], Awaitable[Any]]) -> None:
                    t = time.perf_counter()
                    try:
                        outcomes[name] = await run()
                    except _Rejected as rejected:
                        outcomes[name] = rejected
                    stages[name] = (time.perf_counter() - t) * 1000

                # The parse stage's Lean writes only a directory of its own: what elaborating
                # the body may run there cannot reach the compiled submission the query imports.
                parse_work = work / "parse"
                await anyio.Path(parse_work).mkdir()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        stage,
                        "parse",
                        lambda: self._parse_check(task, submission, body, parse_work),
                    )
                    tg.start_soon(
                        stage,
                        "compile_query",
                        lambda: self._compile_and_query(
                            task, submission, work, "LeanrigSubmission"
                        ),
                    )
                    tg.start_soon(stage, "reference", lambda: self._reference_type(task))
                for name in ("parse", "compile_query", "reference"):
                    if isinstance(outcomes[name], _Rejected):
                        raise outcomes[name]
                statement, axioms = outcomes["compile_query"]
                reference = outcomes["reference"]
                reasons = self._judge(task, statement, reference, axioms)
                if not reasons and self._leanchecker() is not None:
                    t = time.perf_counter()
                    reasons = await self._replay(work)
                    stages["leanchecker"] = (time.perf_counter() - t) * 1000
                if not reasons and body == task.body:
                    reasons = [PLACEHOLDER_PROVES]
                if reasons:
                    raise _Rejected(*reasons)
        except _Rejected as rejected:
            return self._verdict(False, rejected.reasons, axioms, started, stages)
        return self._verdict(True, (), axioms, started, stages)

    # -- stages -------------------------------------------------------------------------------

    def _structure(self, task: Task, submission: str) -> str:
        prefix, suffix = task.text[: task.span.start], task.text[task.span.end :]
        # What editors add or trim on save (spaces at line ends, the final line break) does
        # not change what Lean reads (tasks.frame): the file compiled is the task file's own
        # text around the body.
        bounds = body_bounds(submission, prefix, suffix)
        if bounds is None:
            # Where the difference is, in the trimmed texts (the same lines; a line's trimmed
            # spaces come after any difference on it): not at whitespace that counts for nothing.
            submission = editor_trimmed(submission)
            prefix, suffix = editor_trimmed(prefix, end=False), editor_trimmed(suffix)
            index = LineIndex(submission)
            limit = min(len(submission), len(prefix))
            first = next((i for i in range(limit) if submission[i] != prefix[i]), limit)
            if first < len(prefix):
                pos = index.pos_of(first)
                where = f"first difference near {pos.line}:{pos.column}"
            else:  # the text before the body is the task's: the difference is after it
                room = min(len(submission) - len(prefix), len(suffix))
                same = next((k for k in range(room) if submission[-1 - k] != suffix[-1 - k]), room)
                pos = index.pos_of(max(len(prefix), len(submission) - same - 1))
                where = f"after the proof body: last difference near {pos.line}:{pos.column}"
            raise _Rejected(f"text outside the proof body differs from the task file ({where})")
        body = submission[bounds[0] : bounds[1]]
        reasons = [r for r in [precheck_body(body)] if r] + forbidden_constructs(body)
        if reasons:
            raise _Rejected(*reasons)
        return body

    @asynccontextmanager
    async def _scratch(self, prefix: str) -> AsyncIterator[Path]:
        """A fresh absolute directory under ``work_root``, removed afterwards (in a thread:
        it may hold .olean files), also when cancelled."""
        path = await anyio.to_thread.run_sync(_absolute_temp_dir, prefix, self.work_root)
        try:
            yield path
        finally:
            remove = functools.partial(shutil.rmtree, path, ignore_errors=True)
            with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                await anyio.to_thread.run_sync(remove, abandon_on_cancel=True)

    async def _env(self, *extra: Path) -> dict[str, str]:
        paths = [*extra]
        if self.library is not None:
            paths.append(self.library)
        paths.extend(await self._project_lean_path())
        return base_env(paths)

    async def _project_lean_path(self) -> list[Path]:
        """For Lake suites on a toolchain: the package's LEAN_PATH (its dependencies' oleans),
        asked once from ``lake env`` in the suite root (awaited, under a deadline)."""
        async with self._lake_lock:
            if self._lake_path is not None:
                return self._lake_path
            lake = self.install.lake
            root = anyio.Path(self.suite.root)
            has_lakefile = [await (root / f).exists() for f in ("lakefile.toml", "lakefile.lean")]
            if lake is None or not any(has_lakefile):
                self._lake_path = []
                return self._lake_path
            try:
                out = await run_once(
                    [str(lake), "env", "printenv", "LEAN_PATH"],
                    cwd=self.suite.root, env=base_env(), timeout=LAKE_ENV_SECONDS,
                )  # fmt: skip
            except LeanrigError as exc:  # lake could not even start
                raise _Rejected(f"crash: lake could not start: {exc.message}") from exc
            if out.returncode != 0:
                why = "timed out" if out.timed_out else f"exited with {out.returncode}"
                raise _Rejected(
                    f"the suite's Lake project did not report its LEAN_PATH (`lake env` {why}):"
                    f" {out.stderr.strip()[-200:]}"
                )
            self._lake_path = [Path(p) for p in out.stdout.strip().split(":") if p]
            return self._lake_path

    def _wrapped(self, argv: list[str], work: Path) -> list[str]:
        # The caller's policy (what it hides included: a body's code that runs while the
        # verdict elaborates must not show a file the agent's sandbox hides), this check's
        # limits and directory.
        limits = self.suite.spec.limits
        policy = dataclasses.replace(self.sandbox, cpu_seconds=limits.cpu_seconds, writable=(work,))
        return [*sandbox_wrapper(policy), *argv]

    async def _parse_check(self, task: Task, submission: str, body: str, work: Path) -> None:
        limits = self.suite.spec.limits
        command = self.install.server_command(
            work, env=await self._env(), use_lake=False,
            wrapper=tuple(self._wrapped([], work)),
        )  # fmt: skip
        uri = (work / "LeanrigSubmission.lean").as_uri()
        try:
            with anyio.fail_after(limits.wall_seconds):
                async with LeanClient.start(
                    command,
                    timeouts=Timeouts(spawn=limits.wall_seconds, barrier=limits.wall_seconds),
                ) as client:
                    # Lean's parse of the target inside its `… in` wrappers, if it has any
                    # (scope_wrappers): the document symbols leave such a declaration out.
                    await client.open(uri, task.unwrapped(submission))
                    report = await client.wait_for(uri)
                    symbols = await client.document_symbols(uri)
        except TimeoutError:
            raise _Rejected(
                f"timeout: Lean did not finish within {limits.wall_seconds:g} s"
            ) from None
        except LeanrigError as exc:
            raise _Rejected(f"crash: the Lean process failed ({type(exc).__name__})") from exc
        index = LineIndex(submission)
        # Errors are judged here unless the target is wrapped: unwrapped, the wrappers' scope
        # runs on over the rest of the file, which may then read differently; the compile
        # stage judges the submission itself.
        diagnostics = without_setup_artefacts(report.diagnostics)
        errors = [d for d in diagnostics if d.is_error and not task.wrappers]
        if report.status == "fatal" or errors:
            # The proof's own first, if it has one (the order Lean reports in depends on which
            # of its threads finishes first); else the first Lean reported.
            start, end = task.span.start, task.span.start + len(body)
            first = next(
                (d for d in errors if start <= index.offset_of_lsp(d.range.start) <= end),
                errors[0] if errors else None,
            )
            where = index.from_lsp(first.range.start) if first else None
            msg = first.message.splitlines()[0] if first else "processing stopped"
            if first is not None and first.is_setup_artefact:
                msg = f"{msg}: {SETUP_ARTEFACT_NOTE}"
            at = f": {msg}"
            if where is not None:
                place = error_place(
                    index.offset_of(where), start, end,
                    declaration_head(task.text, task.span.decl_start),
                )  # fmt: skip
                at = f"; first at {where.line}:{where.column} ({place}): {msg}"
            raise _Rejected(f"Lean reports {len(errors)} error(s){at}")
        start = task.span.start
        end = start + len(body)
        original_index = LineIndex(task.text)
        expected_suffix = await self._original_suffix(task, original_index)
        reason = check_scope(
            text=submission,
            body_start=start,
            body_end=end,
            decl_start=task.span.decl_start,
            symbols=flatten_symbols(symbols, index),
            expected_suffix=expected_suffix,
            diagnostics=report.diagnostics,
        )
        if reason:
            raise _Rejected(reason)

    async def _original_suffix(self, task: Task, index: LineIndex) -> list[str]:
        # Lean's parse of the untouched file after the body (computed once per task).
        cached = self._ref_suffix.get(task.id)
        if cached is not None:
            return cached
        async with self._scratch("leanrig-ref-") as work:
            command = self.install.server_command(
                work, env=await self._env(), use_lake=False, wrapper=tuple(self._wrapped([], work))
            )
            uri = (work / "LeanrigOriginal.lean").as_uri()
            wall = self.suite.spec.limits.wall_seconds
            try:
                with anyio.fail_after(wall):
                    async with LeanClient.start(command) as client:
                        await client.open(uri, task.unwrapped(task.text))
                        await client.wait_for(uri)
                        symbols = await client.document_symbols(uri)
            except (TimeoutError, LeanrigError) as exc:
                raise _Rejected(
                    f"the task file itself could not be read by Lean within {wall:g} s"
                ) from exc
        suffix = suffix_structure(flatten_symbols(symbols, index), task.span.end, len(task.text))
        self._ref_suffix[task.id] = suffix
        return suffix

    async def _compile_and_query(
        self, task: Task, text: str, work: Path, module: str
    ) -> tuple[Statement, tuple[str, ...]]:
        limits = self.suite.spec.limits
        build = work / "build"
        await anyio.Path(build).mkdir(exist_ok=True)
        src = work / f"{module}.lean"
        await anyio.Path(src).write_text(text, encoding="utf-8")
        lean = str(self.install.lean)
        compiled = await self._run(
            [lean, "--json", "-R", str(work), "-o", str(build / f"{module}.olean"), str(src)],
            work, build, limits.wall_seconds,
        )  # fmt: skip
        messages = parse_json_messages(compiled.stdout)
        errors = [m for m in messages if m.get("severity") == "error"]
        if compiled.returncode != 0 or errors:
            if not errors:
                raise _Rejected(f"compilation failed: {compiled.stderr[-200:]}")
            body_end = len(text) - (len(task.text) - task.span.end)
            declaration = declaration_head(task.text, task.span.decl_start)
            raise _Rejected(compile_failure(errors, text, task.span.start, body_end, declaration))
        theorem = task.spec.theorem
        name = escape_name(theorem)
        lines = [
            *(["prelude"] if task.header.prelude else []),
            f"import {module}",
            "set_option pp.all true in",
            f"#check @{name}",
            f"#print axioms {name}",
        ]
        check_line, axioms_line = len(lines) - 1, len(lines)  # Lean's lines are 1-based
        query = work / "LeanrigQuery.lean"
        await anyio.Path(query).write_text("\n".join(lines) + "\n", encoding="utf-8")
        answered = await self._run([lean, "--json", str(query)], work, build, limits.wall_seconds)
        answers = parse_json_messages(answered.stdout)
        if answered.returncode != 0:
            said = next((str(a.get("data", "")) for a in answers if a.get("severity") == "error"),
                        answered.stderr[-200:])  # fmt: skip
            raise _Rejected(f"the trusted query of the compiled submission failed: {said[:300]}")

        def answer_at(line: int) -> list[dict[str, Any]]:
            return [
                m for m in answers
                if m.get("severity") == "information" and (m.get("pos") or {}).get("line") == line
            ]  # fmt: skip

        # Exactly one answer per query line, about the target: anything else is not trusted.
        checked = answer_at(check_line)
        statement = (
            parse_check(str(checked[0].get("data", "")), theorem, module) if checked else None
        )
        axioms = parse_axioms(answer_at(axioms_line), theorem)
        if len(checked) != 1 or statement is None or axioms is None:
            raise _Rejected("the trusted query did not find the target theorem")
        return statement, axioms

    async def _reference_type(self, task: Task) -> Statement:
        async with self._reference_lock:
            cached = self._ref_types.get(task.id)
            if cached is None:
                async with self._scratch("leanrig-ref-") as work:
                    try:
                        reference, _ = await self._compile_and_query(
                            task, task.text, work, "LeanrigOriginal"
                        )
                    except _Rejected as exc:
                        raise _Rejected(
                            f"the task file itself does not check: {exc.reasons[0]}"
                        ) from exc
                cached = self._ref_types[task.id] = reference
            return cached

    def _judge(
        self, task: Task, statement: Statement, reference: Statement, axioms: tuple[str, ...]
    ) -> list[str]:
        reasons = []
        if statement.universes != reference.universes:
            reasons.append(
                "the theorem's statement differs from the task's (universe parameters "
                f"{statement.universe_list()} instead of {reference.universe_list()})"
            )
        elif statement.type != reference.type:
            reasons.append(
                "the theorem's statement differs from the task's (elaborated types differ)"
            )
        if "sorryAx" in axioms:
            reasons.append("the proof depends on sorryAx (an incomplete proof)")
        extra = axioms_outside(axioms, self.suite.spec.axioms)
        if extra:
            reasons.append(f"the proof uses axioms outside the allow-list: {', '.join(extra)}")
        return reasons

    def _leanchecker(self) -> str | None:
        return self._checker

    @property
    def programs(self) -> list[Path]:
        """The programs a verdict runs: Lean (and Lake), and the kernel replay's leanchecker
        (which may come from PATH)."""
        found = [self.install.lean, *([self.install.lake] if self.install.lake else [])]
        return found + ([Path(self._checker)] if self._checker else [])

    async def _replay(self, work: Path) -> list[str]:
        checker = self._leanchecker()
        assert checker is not None
        result = await self._run(
            [checker, "LeanrigSubmission"],
            work,
            work / "build",
            self.suite.spec.limits.wall_seconds,
        )
        if result.returncode != 0:
            return [f"kernel replay (leanchecker) failed: {(result.stdout + result.stderr)[-300:]}"]
        return []

    async def _run(self, argv: list[str], work: Path, build: Path, timeout: float) -> Completed:
        try:
            result = await run_once(
                self._wrapped(argv, work),
                cwd=work,
                env=await self._env(build),
                timeout=timeout,
                rss_limit_mb=self.suite.spec.limits.memory_mb,
            )
        except LeanrigError as exc:  # could not even start
            raise _Rejected(f"crash: {exc.message}") from exc
        if result.over_memory:
            raise _Rejected(
                f"memory: Lean exceeded {self.suite.spec.limits.memory_mb} MB resident memory"
            )
        if result.timed_out:
            raise _Rejected(f"timeout: Lean did not finish within {timeout:g} s")
        if result.returncode is not None and result.returncode < 0:
            raise _Rejected(f"crash: Lean was killed by signal {-result.returncode}")
        if result.returncode is not None and result.returncode >= 128 and not result.stdout:
            raise _Rejected(f"crash: Lean exited with status {result.returncode}")
        return result

    def _verdict(
        self,
        accepted: bool,
        reasons: tuple[str, ...],
        axioms: tuple[str, ...],
        started: float,
        stages: dict[str, float],
    ) -> Verdict:
        return Verdict(
            accepted=accepted,
            reasons=reasons,
            axioms=axioms,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            lean_version=self.install.version,
            stages=stages,
        )
