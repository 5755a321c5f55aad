"""A benchmark's Lean files as the importer reads them: modules, declarations, placeholders, meta.

Pure text and file reading: must not write the suite (importer.py) nor run Lean."""

from __future__ import annotations

import bisect
import csv
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from lsp_bridge import COMMENT_KINDS, Declaration, TokenKind, declarations, lean_tokens, scan_text
from repl_pool import Header, parse_header

from ..tasks import (
    BodySpan,
    LocateError,
    all_wrappers,
    commands,
    declaration_end,
    declaration_head,
    locate_body,
)
from .one_shot_lean import AuthoringError

LAKE_FILES = ("lakefile.toml", "lakefile.lean", "lean-toolchain", "lake-manifest.json")
_SKIPPED_DIRS = {".lake", "lake-packages", "build", ".git"}
_ID_CHAR = re.compile(r"[A-Za-z0-9_\-]")
_PLACEHOLDER_WORDS = frozenset({"sorry", "sorryAx", "admit"})


@dataclass(frozen=True, slots=True)
class Placeholder:
    """A ``theorem``/``lemma`` to import as a task: its proof is a placeholder, or (statement
    kinds, ``proved``) it is proved and only its statement is taken."""

    name: str  # full name, as Lean prints it
    declaration: Declaration
    span: BodySpan
    doc: str  # its doc comment's text ('' if none)
    proved: bool = False


@dataclass(slots=True)
class SourceFile:
    root: Path  # the directory module names are relative to
    path: Path
    module: str
    text: str
    header: Header
    declarations: list[Declaration] = field(default_factory=list)
    placeholders: list[Placeholder] = field(default_factory=list)
    unlocated: dict[str, str] = field(default_factory=dict)  # theorem → why its body is not found

    @property
    def rel(self) -> Path:
        return self.path.relative_to(self.root)

    @property
    def field_name(self) -> str:
        """The default field: the file's directory (``Bench/Logic/X.lean`` → ``logic``)."""
        parent = self.rel.parent
        return parent.name.lower() if parent.parts else ""


def is_placeholder(body: str) -> bool:
    """Is ``body`` just ``sorry``, ``by sorry``, ``admit`` or ``sorryAx …`` (no proof using one)?"""
    words = [t.text(body) for t in lean_tokens(body) if t.kind not in COMMENT_KINDS]
    if words[:1] == ["by"]:
        words = words[1:]
    if words[:1] in (["sorry"], ["admit"]):
        return len(words) == 1
    return words[:1] == ["sorryAx"] or (words[:2] == ["(", "sorryAx"])


def doc_text(text: str, decl_start: int) -> str:
    """The doc comment right before the declaration at ``decl_start``, as one line."""
    start, _ = declaration_head(text, decl_start)
    if start == decl_start:
        return ""
    raw = text[start:decl_start].strip()
    raw = raw.removeprefix("/--").removesuffix("-/")
    return " ".join(raw.split())


def title_of(doc: str) -> str:
    """A title from a doc comment: its first sentence, at most 100 characters."""
    first = re.split(r"(?<=[.!?])\s", doc, maxsplit=1)[0].rstrip(".")
    return first if len(first) <= 100 else first[:99] + "…"


def task_id(name: str) -> str:
    """A stable ASCII task id from a theorem's full name (``congr_φ'`` → ``congr_u3c6_prime``)."""
    out = []
    for part in name.replace("«", "").replace("»", "").split("."):
        out.append(
            "".join(
                ch if _ID_CHAR.fullmatch(ch) else "_prime" if ch == "'" else f"_u{ord(ch):x}"
                for ch in part
            )
        )
    return ".".join(out)


def declaration_spans(text: str, decls: list[Declaration]) -> list[tuple[int, int]]:
    """Each declaration's whole command, with its doc comment and any wrapping ``… in``."""
    cmds = commands(text, 0, len(text))
    starts = [c.start for c in cmds]
    wrapper_ins = all_wrappers(text)

    def wraps(k: int) -> bool:
        return any(cmds[k].start <= at < cmds[k].end for at in wrapper_ins)

    spans = []
    for decl in decls:
        line_start = text.rfind("\n", 0, decl.keyword_start) + 1
        start, _ = declaration_head(text, line_start)
        k = bisect.bisect_right(starts, start) - 1
        if k >= 0 and cmds[k].start == start:  # its own column-0 command, not an indented one
            while k > 0 and wraps(k - 1):
                k -= 1
            start = cmds[k].start
        spans.append((start, declaration_end(text, decl.keyword_start)))
    return spans


def read_sources(paths: list[Path], exclude: Path | None = None) -> tuple[list[SourceFile], bool]:
    """The Lean files under ``paths`` but not ``exclude``, and whether a path is a Lake project."""
    found: dict[Path, SourceFile] = {}
    lake = False
    for given in paths:
        path = given.resolve()
        if not path.exists():
            raise AuthoringError(f"no such file or directory: {given}")
        if path.is_file():
            if path.suffix != ".lean":
                raise AuthoringError(f"{given} is not a .lean file")
            root, files = path.parent, [path]
        else:
            root = path
            lake = lake or any((path / f).exists() for f in LAKE_FILES[:2])
            files = sorted(
                p
                for p in path.rglob("*.lean")
                if not _SKIPPED_DIRS & set(p.relative_to(path).parts[:-1])
                and p.name != "lakefile.lean"
                and not (exclude is not None and p.is_relative_to(exclude))
            )
        for file in files:
            if file in found:
                continue
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise AuthoringError(f"cannot read {file}: {exc}") from exc
            module = ".".join(file.relative_to(root).with_suffix("").parts)
            found[file] = SourceFile(root, file, module, text, parse_header(text))
    if not found:
        raise AuthoringError("no .lean files under the given paths")
    for source in found.values():
        read_declarations(source)
    return list(found.values()), lake


def read_declarations(source: SourceFile) -> None:
    text = source.text
    source.declarations = declarations(text)
    starts = [d.keyword_start for d in source.declarations] + [len(text)]
    for decl, end in zip(source.declarations, starts[1:], strict=True):
        region = text[decl.keyword_start : end]
        # Locating a body reads the whole file: only try where a placeholder word occurs.
        if decl.keyword not in ("theorem", "lemma") or not any(
            word in region for word in _PLACEHOLDER_WORDS
        ):
            continue
        try:
            span = locate_body(text, decl.full_name)
        except LocateError as exc:
            source.unlocated[decl.full_name] = str(exc)  # reported if Lean says it uses sorry
            continue
        if is_placeholder(span.body(text)):
            doc = doc_text(text, span.decl_start)
            source.placeholders.append(Placeholder(decl.full_name, decl, span, doc))


def add_proved_targets(source: SourceFile, claims: dict[str, dict[str, Any]]) -> None:
    """Add the proved ``theorem``/``lemma`` declarations of ``source`` that ``claims`` (--meta)
    gives a claim for to its targets: a statement suite's references may come proved."""
    taken = {p.name for p in source.placeholders}
    for decl in source.declarations:
        name = decl.full_name
        if name in taken or decl.keyword not in ("theorem", "lemma"):
            continue
        if not str(meta_for(claims, name).get("claim", "")).strip():
            continue
        try:
            span = locate_body(source.text, name)
        except LocateError as exc:
            source.unlocated[name] = str(exc)
            continue
        doc = doc_text(source.text, span.decl_start)
        source.placeholders.append(Placeholder(name, decl, span, doc, proved=True))


def unlocated_reason(source: SourceFile, theorem: str) -> str | None:
    """Why the body of ``theorem`` in ``source`` cannot be located, or None."""
    if theorem in source.unlocated:
        return source.unlocated[theorem]
    if not any(
        d.full_name == theorem and d.keyword in ("theorem", "lemma") for d in source.declarations
    ):
        return None
    try:
        locate_body(source.text, theorem)
    except LocateError as exc:
        return str(exc)
    return None


def imported_modules(header: Header) -> list[str]:
    return [i.split()[-1] for i in header.imports]


def library_order(sources: list[SourceFile]) -> list[SourceFile]:
    """All sources, every local import before its importer (a cycle is an error)."""
    by_module = {s.module: s for s in sources}
    order: list[SourceFile] = []
    state: dict[str, int] = {}

    def visit(source: SourceFile, trail: tuple[str, ...]) -> None:
        if state.get(source.module) == 2:
            return
        if state.get(source.module) == 1:
            raise AuthoringError(f"import cycle: {' → '.join((*trail, source.module))}")
        state[source.module] = 1
        for module in imported_modules(source.header):
            if module in by_module:
                visit(by_module[module], (*trail, source.module))
        state[source.module] = 2
        order.append(source)

    for source in sorted(sources, key=lambda s: s.module):
        visit(source, ())
    return order


META_KEYS = ("title", "field", "difficulty", "claim")


def read_meta(path: Path) -> dict[str, dict[str, Any]]:
    """``--meta`` (TOML, CSV or JSONL) as theorem name → {title, field, difficulty, claim}."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthoringError(f"cannot read --meta {path}: {exc}") from exc
    rows: list[dict[str, Any]] = []
    try:
        if path.suffix == ".toml":
            data = tomllib.loads(raw)
            if isinstance(data.get("tasks"), list):
                rows = [dict(r) for r in data["tasks"]]
            else:
                rows = [{"theorem": k, **v} for k, v in data.items() if isinstance(v, dict)]
        elif path.suffix == ".csv":
            rows = [dict(r) for r in csv.DictReader(raw.splitlines())]
        elif path.suffix in (".jsonl", ".ndjson"):
            rows = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        else:
            raise AuthoringError(f"--meta {path}: use a .toml, .csv or .jsonl file")
    except (tomllib.TOMLDecodeError, orjson.JSONDecodeError, csv.Error) as exc:
        raise AuthoringError(f"--meta {path}: cannot parse: {exc}") from exc
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        name = str(row.get("theorem") or row.get("name") or "").strip()
        if not name:
            raise AuthoringError(f"--meta {path}: a row without a theorem name: {row}")
        entry: dict[str, Any] = {}
        for key in META_KEYS:
            value = row.get(key)
            if value is None or value == "":
                continue
            if key == "difficulty":
                try:
                    value = int(value)
                except (TypeError, ValueError):
                    raise AuthoringError(
                        f"--meta {path}: {name}: difficulty {value!r} is not an integer"
                    ) from None
                if not 1 <= value <= 10:
                    raise AuthoringError(f"--meta {path}: {name}: difficulty {value} not in 1..10")
            entry[key] = value if key == "difficulty" else str(value)
        out[name] = entry
    return out


def meta_for(meta: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """The metadata for ``name`` by full name, else by last component when that is unambiguous."""
    if name in meta:
        return meta[name]
    short = name.rsplit(".", 1)[-1]
    matches = [v for k, v in meta.items() if k == short]
    return matches[0] if len(matches) == 1 else {}


def code_words(text: str) -> set[str]:
    """The identifiers of ``text`` outside comments and literals (Lean's printed terms)."""
    blank = scan_text(text).blank(text)
    return {t.text(blank) for t in lean_tokens(blank) if t.kind is TokenKind.IDENT}
