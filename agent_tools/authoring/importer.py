"""``leanrig suite import``: one task per placeholder ``theorem``/``lemma`` in a benchmark's files.

Lean, not text, decides what depends on sorry and what each statement is; a task file that does
not elaborate cleanly is skipped, never written. Must keep hand-edited metadata in suite.toml."""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import tomli_w
from pydantic import BaseModel

from lsp_bridge import LeanInstall, LeanrigError, find_lean

from ..tasks import (
    DEFAULT_AXIOMS,
    TaskKind,
    load_suite,
    locate_body,
    statement_bounds,
    writes_statement,
)
from ..verdict import escape_name, parse_axioms, parse_check
from .one_shot_lean import AuthoringError, LeanAnswer, OneShotLean, lake_lean_path, line_of
from .sources import (
    LAKE_FILES,
    Placeholder,
    SourceFile,
    add_proved_targets,
    code_words,
    declaration_spans,
    imported_modules,
    library_order,
    meta_for,
    read_meta,
    read_sources,
    task_id,
    title_of,
    unlocated_reason,
)
from .statements import read_printed

TASK_DIR = "tasks"
REFERENCE_DIR = "References"  # statement tasks' references (hidden)
# A statement task's target before the attempt writes its own statement.
PLACEHOLDER_STATEMENT = " : True "
# Lean's own libraries, which use no sorry.
CORE_MODULES = frozenset({"Init", "Std", "Lean"})
WALL_SECONDS = 60.0


class ImportedTask(BaseModel):
    id: str
    theorem: str
    file: str
    source: str
    title: str
    field: str
    difficulty: int
    defaults: list[str]  # which of title/field/difficulty fell back to a default
    kind: TaskKind = "proof"
    claim: str = ""  # statement kinds: from --meta
    reference: str | None = None  # statement kinds: the hidden reference file


class SkippedTheorem(BaseModel):
    theorem: str
    source: str
    reason: str


class ImportReport(BaseModel):
    out: str
    name: str
    lean: str
    library: list[str]
    tasks: list[ImportedTask]
    skipped: list[SkippedTheorem]
    removed: list[str]  # task ids of an earlier import whose theorem is gone


@dataclass(slots=True)
class _Facts:
    tainted: set[str] = field(default_factory=set)  # declarations depending on sorryAx
    statements: dict[str, str] = field(default_factory=dict)  # theorem → pp.all type
    broken: dict[str, str] = field(default_factory=dict)  # module → why it does not compile
    unprinted: dict[str, str] = field(default_factory=dict)  # theorem → why Lean printed nothing


def import_suite(
    paths: list[Path],
    out: Path,
    *,
    name: str | None = None,
    meta: Path | None = None,
    kind: TaskKind = "proof",
) -> ImportReport:
    """Import the Lean files under ``paths`` as the suite at ``out``.

    With ``kind`` "statement", statements become hidden references and targets state ``: True``."""
    sources, lake = read_sources(paths, exclude=out.resolve())
    prelude = all(s.header.prelude for s in sources)
    install = find_lean(paths[0].resolve() if paths[0].is_dir() else paths[0].resolve().parent)
    if not prelude and install.mode != "toolchain":
        raise AuthoringError(
            "these files import Init (no `prelude` header): importing them needs a full Lean "
            "toolchain (elan/lake); the bootstrap Lean elaborates prelude files only"
        )
    metadata = read_meta(meta) if meta is not None else {}
    if writes_statement(kind):
        for source in sources:
            add_proved_targets(source, metadata)
    plan = anyio.run(_plan, sources, lake, install)
    return _write_suite(plan, sources, lake, prelude, out.resolve(), name, metadata, kind)


@dataclass(slots=True)
class _Plan:
    library: list[SourceFile]
    planned: list[tuple[SourceFile, Placeholder, str]]  # (source, target, task text)
    verdicts: list[str]  # per planned task: '' or why its file is not sound
    skipped: list[SkippedTheorem]


async def _plan(sources: list[SourceFile], lake: bool, install: LeanInstall) -> _Plan:
    """The library, each task's file with Lean's verdict on it, and what is skipped."""
    imported = {m for s in sources for m in imported_modules(s.header)}
    library = [s for s in library_order(sources) if s.module in imported]
    skipped: list[SkippedTheorem] = []
    planned: list[tuple[SourceFile, Placeholder, str]] = []
    lake_path: list[Path] = []
    for root in sorted({s.root for s in sources}) if lake else []:
        lake_path += await lake_lean_path(root, install)
    async with OneShotLean.scratch(install, lake_path, WALL_SECONDS) as lean:
        facts = await _ask_lean(lean, sources)
        for source in sources:
            where = str(source.rel)
            for theorem in sorted(facts.tainted & {d.full_name for d in source.declarations}):
                why = unlocated_reason(source, theorem)
                if why is not None:
                    said = f"it uses sorry, but {why}"
                    skipped.append(SkippedTheorem(theorem=theorem, source=where, reason=said))
            for target in source.placeholders:
                why = _why_not(source, target, facts, source.module in imported)
                if why:
                    skipped.append(SkippedTheorem(theorem=target.name, source=where, reason=why))
                    continue
                planned.append((source, target, _task_text(source, target, facts.tainted)))
        verdicts = await _elaborate_all(lean, planned)
    return _Plan(library, planned, verdicts, skipped)


def _write_suite(
    plan: _Plan,
    sources: list[SourceFile],
    lake: bool,
    prelude: bool,
    out: Path,
    name: str | None,
    metadata: dict[str, dict[str, Any]],
    kind: TaskKind = "proof",
) -> ImportReport:
    existing = _existing_manifest(out)
    old_tasks = {t.get("id"): t for t in existing.get("tasks", []) if isinstance(t, dict)}
    tasks: list[ImportedTask] = []
    skipped = list(plan.skipped)
    seen: dict[str, str] = {}
    for (source, target, text), why in zip(plan.planned, plan.verdicts, strict=True):
        where = str(source.rel)
        if why:
            skipped.append(SkippedTheorem(theorem=target.name, source=where, reason=why))
            continue
        ident = task_id(target.name)
        if ident in seen:
            taken = f"its id {ident} is taken by {seen[ident]}"
            skipped.append(SkippedTheorem(theorem=target.name, source=where, reason=taken))
            continue
        entry = _task_entry(ident, target, source, metadata, old_tasks.get(ident))
        if writes_statement(kind):
            stated = _as_statement_task(text, target.name)
            claim = str(meta_for(metadata, target.name).get("claim", "")).strip()
            claim = claim or str((old_tasks.get(ident) or {}).get("claim", ""))
            if isinstance(stated, str) and not claim:
                stated = (None, "no claim for it (a `claim` in --meta)")
            if isinstance(stated, tuple):
                skipped.append(SkippedTheorem(theorem=target.name, source=where, reason=stated[1]))
                continue
            reference = f"{REFERENCE_DIR}/{ident}.lean"
            _write(out / reference, _reference_text(text, target.name))
            entry = entry.model_copy(update={"kind": kind, "claim": claim, "reference": reference})
            text = stated
        seen[ident] = target.name
        tasks.append(entry)
        _write(out / TASK_DIR / f"{ident}.lean", text)
    for lib in plan.library:
        _write(out / lib.rel, lib.text)
    if lake:
        for config in LAKE_FILES:
            for source_root in {s.root for s in sources}:
                if (source_root / config).exists():
                    shutil.copy2(source_root / config, out / config)
    removed = _remove_stale(out, {t.id for t in tasks}, old_tasks)
    suite_name = name or str(existing.get("name") or out.name)
    libraries = [s.module for s in plan.library] if prelude else []
    if any(t.reference for t in tasks):
        hidden = [str(h) for h in existing.get("hidden", [])]
        existing = {
            **existing,
            "hidden": [*hidden, *([REFERENCE_DIR] * (REFERENCE_DIR not in hidden))],
        }
    _write(out / "suite.toml", _manifest(existing, suite_name, prelude, libraries, tasks))
    try:
        load_suite(out)
    except LeanrigError as exc:
        raise AuthoringError(f"the imported suite in {out} does not load: {exc}") from exc
    return ImportReport(
        out=str(out),
        name=suite_name,
        lean="prelude" if prelude else "full",
        library=libraries,
        tasks=tasks,
        skipped=skipped,
        removed=removed,
    )


async def _ask_lean(lean: OneShotLean, sources: list[SourceFile]) -> _Facts:
    """Compile every file, imports first; ask Lean what depends on sorryAx and what is stated."""
    facts = _Facts()
    sorry_free: set[str] = set()  # modules in which nothing can depend on sorryAx
    for source in library_order(sources):
        imports = imported_modules(source.header)
        if any(m in facts.broken for m in imports):
            facts.broken[source.module] = "a file it imports does not compile"
            continue
        compiled = await lean.compile(source.module, source.text)
        if not compiled.ok:
            facts.broken[source.module] = compiled.why()
            continue
        # Taint needs a direct sorry, which Lean warns of; without one, nothing here is tainted.
        if (
            not source.placeholders
            and not any(m.uses_sorry for m in compiled.messages)
            and all(m in sorry_free or m.split(".")[0] in CORE_MODULES for m in imports)
        ):
            sorry_free.add(source.module)
            continue
        # An axiom is never tainted, even `sorryAx` declared in a preamble.
        names = [
            d.full_name
            for d in source.declarations
            if "private" not in d.modifiers and d.keyword != "axiom"
        ]
        lines = [*(["prelude"] if source.header.prelude else []), f"import {source.module}"]
        axiom_lines: dict[int, str] = {}
        check_lines: dict[int, str] = {}
        for decl in names:
            lines.append(f"#print axioms {escape_name(decl)}")
            axiom_lines[len(lines)] = decl
        for target in source.placeholders:
            lines += [
                "set_option pp.all true in",
                "set_option pp.rawOnError true in",
                f"#check @{escape_name(target.name)}",
            ]
            check_lines[len(lines)] = target.name
        answer = await lean.elaborate("Query", "\n".join(lines) + "\n")
        for line, decl in axiom_lines.items():
            axioms = parse_axioms([_data(m) for m in answer.at_lines(line, line)], decl)
            if axioms is not None and "sorryAx" in axioms:
                facts.tainted.add(decl)
        for line, theorem in check_lines.items():
            for m in answer.at_lines(line, line):
                statement = parse_check(m.text, theorem)
                if statement is None:
                    continue
                # Only the constants it names are read, which the raw text names too.
                printed = read_printed(statement.type)
                facts.statements[theorem] = printed.text or printed.raw
                if not facts.statements[theorem]:
                    facts.unprinted[theorem] = printed.failure
    return facts


def _data(message: Any) -> dict[str, Any]:
    return {"data": message.text}


def _why_not(source: SourceFile, target: Placeholder, facts: _Facts, is_library: bool) -> str:
    if source.module in facts.broken:
        return f"its file does not compile: {facts.broken[source.module]}"
    if is_library:
        return "its file is imported by other files (it is part of the suite's library)"
    statement = facts.statements.get(target.name)
    if target.name in facts.unprinted:
        return f"Lean could not print its statement ({facts.unprinted[target.name]})"
    if statement is None:
        return "Lean did not report its statement"
    if "sorryAx" in code_words(statement):
        return "its statement itself uses sorry"
    used = sorted((code_words(statement) & facts.tainted) - {target.name})
    if used:
        return (
            f"its statement uses {', '.join(used)}, which depends on sorry itself: "
            "prove or define it first"
        )
    return ""


def _task_text(source: SourceFile, target: Placeholder, tainted: set[str]) -> str:
    """The source file without its other declarations that depend on sorry; a ``proved``
    target's proof becomes ``sorry``, and what uses it after it is dropped too."""
    text = source.text
    dropped = (tainted | _users(source, target)) if target.proved else tainted
    drops = declaration_spans(
        text,
        [d for d in source.declarations if d.full_name in dropped and d.full_name != target.name],
    )
    for start, end in sorted(drops, reverse=True):
        while end < len(text) and text[end] == "\n":
            end += 1
        text = text[:start] + text[end:]
    if target.proved:
        span = locate_body(text, target.name)
        body = span.body(text)
        lead = body[: len(body) - len(body.lstrip())] or " "
        # `sorry` needs Init; a prelude file states the placeholder with its own `sorryAx`.
        placeholder = "sorryAx _ Bool.false" if source.header.prelude else "sorry"
        text = text[: span.start] + lead + placeholder + text[span.end :]
    return text


def _users(source: SourceFile, target: Placeholder) -> set[str]:
    """The declarations after ``target`` that name it, or name one that does (by their
    last name component: more than Lean would say, never less)."""
    decls = source.declarations
    ends = [d.keyword_start for d in decls[1:]] + [len(source.text)]
    used = {target.name}
    for decl, end in zip(decls, ends, strict=True):
        if decl.keyword_start <= target.declaration.keyword_start:
            continue
        words = {w.rsplit(".", 1)[-1] for w in code_words(source.text[decl.keyword_start : end])}
        if any(name.rsplit(".", 1)[-1] in words for name in used):
            used.add(decl.full_name)
    return used - {target.name}


async def _elaborate_all(
    lean: OneShotLean, planned: list[tuple[SourceFile, Placeholder, str]]
) -> list[str]:
    results = [""] * len(planned)
    limiter = anyio.CapacityLimiter(2)

    async def one(i: int, target: Placeholder, text: str) -> None:
        async with limiter:
            answer = await lean.elaborate(f"Task{i}", text)
        results[i] = task_file_problem(answer, text, locate_body(text, target.name).decl_start)

    async with anyio.create_task_group() as tg:
        for i, (_, target, text) in enumerate(planned):
            tg.start_soon(one, i, target, text)
    return results


def task_file_problem(answer: LeanAnswer, text: str, decl_start: int) -> str:
    """'' when ``answer`` has no error and sorry only on the target at ``decl_start``; else why."""
    if not answer.ok:
        return f"its task file does not elaborate: {answer.why()}"
    target_line = line_of(text, decl_start)
    sorries = [m for m in answer.messages if m.uses_sorry]
    others = [m.line for m in sorries if m.line != target_line]
    if others:
        return f"its task file has other declarations using sorry (line {others[0]})"
    if not sorries:
        return "its placeholder does not use sorry"
    return ""


def _task_entry(
    ident: str,
    target: Placeholder,
    source: SourceFile,
    metadata: dict[str, dict[str, Any]],
    old: dict[str, Any] | None,
) -> ImportedTask:
    given = meta_for(metadata, target.name)
    defaults = {
        "title": title_of(target.doc) or target.name,
        "field": source.field_name,
        "difficulty": 1,
    }
    values: dict[str, Any] = {}
    used_default = []
    for key, fallback in defaults.items():
        if old is not None and key in old:
            values[key] = old[key]
        elif key in given:
            values[key] = given[key]
        else:
            values[key] = fallback
            used_default.append(key)
    return ImportedTask(
        id=ident,
        theorem=target.name,
        file=f"{TASK_DIR}/{ident}.lean",
        source=str(source.rel),
        defaults=used_default,
        **values,
    )


def _as_statement_task(text: str, theorem: str) -> str | tuple[None, str]:
    """The task file with the target's statement replaced by ``: True``, or (None, why not)."""
    span = locate_body(text, theorem)
    start, end = statement_bounds(text, span)
    body = span.body(text)
    # The body stays while the statement changes: it must not name the statement's type.
    flag = _typed_sorry_flag(body.strip())
    if flag is not None:
        lead = body[: len(body) - len(body.lstrip())]
        body = f"{lead}sorryAx _ {flag}"
    elif body.strip() != "sorry":
        return None, "its placeholder body is neither `sorry` nor `sorryAx T …`"
    return text[:start] + PLACEHOLDER_STATEMENT + text[end : span.start] + body + text[span.end :]


def _typed_sorry_flag(body: str) -> str | None:
    """``b`` of a typed placeholder ``sorryAx T b``, or None when ``body`` is not one."""
    if not body.startswith("sorryAx") or body[len("sorryAx") : len("sorryAx") + 1] not in " (":
        return None
    rest = body[len("sorryAx") :].lstrip()
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                rest = rest[i + 1 :]
                break
        else:
            return None
    else:
        rest = rest.split(maxsplit=1)[1] if len(rest.split(maxsplit=1)) == 2 else ""
    flag = rest.strip()
    return flag if flag and " " not in flag else None


def _reference_text(text: str, theorem: str) -> str:
    """The reference file of ``theorem``: its statement, as one theorem (its body a sorry)."""
    span = locate_body(text, theorem)
    start, end = statement_bounds(text, span)
    return (
        f"-- The reference statement of {theorem} (hidden from agents).\n"
        f"theorem reference{text[start:end]}:=\n  sorry\n"
    )


def _existing_manifest(out: Path) -> dict[str, Any]:
    manifest = out / "suite.toml"
    if not manifest.exists():
        return {}
    try:
        return tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AuthoringError(f"{manifest} exists and cannot be read: {exc}") from exc


def _remove_stale(out: Path, kept: set[str], old: dict[Any, dict[str, Any]]) -> list[str]:
    removed = []
    for ident, entry in old.items():
        if ident in kept:
            continue
        removed.append(str(ident))
        file = str(entry.get("file", ""))
        if file.startswith(f"{TASK_DIR}/") and (out / file).is_file():
            (out / file).unlink()
    return removed


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _manifest(
    existing: dict[str, Any],
    name: str,
    prelude: bool,
    library: list[str],
    tasks: list[ImportedTask],
) -> str:
    top: dict[str, Any] = {
        "name": name,
        "version": existing.get("version", "1.0"),
        "lean": "prelude" if prelude else "full",
        "axioms": existing.get("axioms", list(DEFAULT_AXIOMS)),
    }
    if library:
        top["library"] = library
    for key, value in existing.items():
        if (
            key not in top
            and key not in ("tasks", "library", "lean")
            and not isinstance(value, dict)
        ):
            top[key] = value
    tables = {k: v for k, v in existing.items() if isinstance(v, dict) and k != "tasks"}
    manifest = {
        **top,
        **tables,
        "tasks": [
            {
                "id": t.id,
                "file": t.file,
                "theorem": t.theorem,
                "title": t.title,
                "field": t.field,
                "difficulty": t.difficulty,
                **(
                    {"kind": t.kind, "claim": t.claim, "reference": t.reference}
                    if t.reference
                    else {}
                ),
            }
            for t in tasks
        ],
    }
    return (
        "# Written by `leanrig suite import`; titles, fields and difficulties edited here\n"
        "# are kept by the next import.\n\n" + tomli_w.dumps(manifest)
    )
