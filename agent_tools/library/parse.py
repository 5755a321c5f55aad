"""The declarations of library files, from Lean's own parse: symbols, then a hover per name.

A file that does not elaborate is refused and a declaration using `sorry` left out: the
library promises verified Lean. Nothing here writes files or talks to SQLite."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import lsprotocol.types as lsp
import structlog

from lsp_bridge import (
    COMMENT_KINDS,
    LeanClient,
    LeanrigError,
    LeanToken,
    LineIndex,
    LspPos,
    Severity,
    Timeouts,
    TokenKind,
    lean_tokens,
    name_parts,
)
from repl_pool import LeanEnvironment, parse_header

from ..tasks import all_wrappers, unwrap

log = structlog.get_logger("leanrig.library")

# Quotes vary across Lean versions.
_USES_SORRY = re.compile(r"declaration uses ['`]sorry['`]")
PARSE_SECONDS = 300.0  # the whole library: every file opened, elaborated and queried
HOVERS_AT_ONCE = 8
CONTAINERS = frozenset({"Namespace", "Module", "Package"})
MODIFIERS = frozenset(
    {"private", "protected", "public", "noncomputable", "unsafe", "partial", "nonrec", "meta"}
)
KINDS = frozenset(
    {
        "theorem",
        "lemma",
        "def",
        "abbrev",
        "instance",
        "structure",
        "inductive",
        "class",
        "axiom",
        "opaque",
        "example",
        "coinductive",
    }
)


INDUCTIVES = frozenset({"inductive", "coinductive"})
_OPEN = frozenset({"(", "[", "{", "⟨", "⦃"})
_CLOSE = frozenset({")", "]", "}", "⟩", "⦄"})


class LibraryError(LeanrigError):
    hint = "fix the [lad] library files in suite.toml (each must elaborate on its own)"


@dataclass(frozen=True, slots=True)
class Declaration:
    """One library declaration, as Lean parsed and elaborated it."""

    name: str  # fully qualified, as Lean prints it
    kind: str  # the keyword: theorem, def, inductive, structure, …
    statement: str  # Lean's signature (hover / #check form), e.g. `N.foo {α : Sort u} … : …`
    file: str  # relative to the suite directory, POSIX separators
    line: int  # 1-based line of the declaration's name
    docstring: str | None
    source: str  # the full declaration: doc comment, attributes, signature, proof


async def parse_library(
    environment: LeanEnvironment,
    root: Path,
    files: Sequence[Path],
    *,
    timeout: float = PARSE_SECONDS,
) -> list[Declaration]:
    """Every declaration of ``files`` (absolute, under ``root``) in order, or ``LibraryError``."""
    texts = [await anyio.Path(f).read_text(encoding="utf-8") for f in files]
    out: list[Declaration] = []
    try:
        with anyio.fail_after(timeout):
            async with LeanClient.start(
                environment.server_command(),
                timeouts=Timeouts(spawn=min(60.0, timeout), barrier=timeout),
            ) as client:
                for path, text in zip(files, texts, strict=True):
                    out += await _file_declarations(client, root, path, text)
    except TimeoutError:
        raise LibraryError(f"Lean did not finish the library within {timeout:g} s") from None
    except LibraryError:
        raise
    except LeanrigError as exc:
        raise LibraryError(f"Lean failed while reading the library: {exc.message}") from exc
    return out


async def _file_declarations(
    client: LeanClient, root: Path, path: Path, text: str
) -> list[Declaration]:
    rel = path.relative_to(root).as_posix()
    uri = path.as_uri()
    await client.open(uri, text)
    report = await client.wait_for(uri)
    index = LineIndex(text)
    errors = [d for d in report.diagnostics if d.is_error]
    if errors or report.status == "fatal":
        first = errors[0] if errors else None
        message = " ".join(first.message.split())[:300] if first else ""
        where = f"{first.range.start.line + 1}: {message}" if first else ""
        raise LibraryError(
            f"library file {rel} does not elaborate"
            + (f" ({len(errors)} error(s); first at line {where})" if first else ": Lean stopped")
        )
    symbols = await _symbols(client, uri, text)
    unproved = [
        index.offset_of_lsp(d.range.start)
        for d in report.diagnostics
        if d.severity == Severity.WARNING and _USES_SORRY.search(d.message)
    ]
    found = []
    for symbol, namespace in declarations_in(symbols, ()):
        start = index.offset_of_lsp(LspPos(symbol.range.start.line, symbol.range.start.character))
        end = index.offset_of_lsp(LspPos(symbol.range.end.line, symbol.range.end.character))
        source = text[start:end].rstrip()
        kind = declaration_kind(source)
        if any(start <= at <= end for at in unproved):
            log.warning(
                "library.unproved_left_out",
                file=rel,
                name=symbol.name,
                line=symbol.selection_range.start.line + 1,
            )
        elif kind != "example":  # anonymous: nothing to search for or read by name
            found.append((symbol, namespace, source, kind, start))
    # Bounded: each hover costs Lean a walk over the file's info trees.
    signatures: list[str | None] = [None] * len(found)
    limiter = anyio.CapacityLimiter(HOVERS_AT_ONCE)

    async def sign(i: int, symbol: lsp.DocumentSymbol) -> None:
        async with limiter:
            pos = symbol.selection_range.start
            hover = await client.hover(uri, LspPos(pos.line, pos.character))
            signatures[i] = hover_signature(hover)

    members: list[list[tuple[LspPos, str | None, str]]] = []
    for _, _, source, kind, at in found:
        names = member_names(kind, source)
        members.append([(index.lsp_of_offset(at + off), doc, what) for off, doc, what in names])
    member_signatures: list[list[str | None]] = [[None] * len(m) for m in members]

    async def sign_member(i: int, k: int) -> None:
        async with limiter:
            hover = await client.hover(uri, members[i][k][0])
            member_signatures[i][k] = hover_signature(hover)

    async with anyio.create_task_group() as tg:
        for i, (symbol, *_) in enumerate(found):
            tg.start_soon(sign, i, symbol)
            for k in range(len(members[i])):
                tg.start_soon(sign_member, i, k)
    out = []
    for i, (symbol, namespace, source, kind, _) in enumerate(found):
        signature = signatures[i]
        name = signature_name(signature) if signature else None
        if name is None:  # no constant under the name (e.g. an anonymous instance)
            name = ".".join([*namespace, symbol.name])
        out.append(
            Declaration(
                name=name,
                kind=kind,
                statement=signature or source_signature(source),
                file=rel,
                line=symbol.selection_range.start.line + 1,
                docstring=docstring(source),
                source=source,
            )
        )
        for (pos, doc, what), sig in zip(members[i], member_signatures[i], strict=True):
            member = signature_name(sig) if sig else None
            # Keep only names Lean's hover confirms as constants of this type.
            if sig is not None and member is not None and member.startswith(name + "."):
                out.append(Declaration(member, what, sig, rel, pos.line + 1, doc, source))
    await client.close_document(uri)
    return out


async def _symbols(client: LeanClient, uri: str, text: str) -> list[lsp.DocumentSymbol]:
    """The file's document symbols, via a copy with ``… in`` blanked (Lean omits those)."""
    wrappers = all_wrappers(text, parse_header(text).end)
    if not wrappers:
        return await client.document_symbols(uri)
    copy = uri.removesuffix(".lean") + ".leanrig-unwrapped.lean"
    await client.open(copy, unwrap(text, wrappers))
    try:
        await client.wait_for(copy)
        return await client.document_symbols(copy)
    finally:
        await client.close_document(copy)


def declarations_in(
    symbols: Iterable[lsp.DocumentSymbol], namespace: tuple[str, ...]
) -> Iterator[tuple[lsp.DocumentSymbol, tuple[str, ...]]]:
    for s in symbols:
        if s.kind.name in CONTAINERS:
            yield from declarations_in(s.children or (), (*namespace, s.name))
        else:
            yield s, namespace


def _inductive(kind: str, source: str) -> bool:
    """Whether this is an inductive type's declaration (``class inductive`` included)."""
    if kind in INDUCTIVES:
        return True
    if kind != "class":
        return False
    words = [w for k, w in _code_tokens(source) if k is TokenKind.IDENT and w not in MODIFIERS]
    at = words.index("class") if "class" in words else len(words)
    return words[at + 1 : at + 2] == ["inductive"]


def member_names(kind: str, source: str) -> list[tuple[int, str | None, str]]:
    """Candidate constructors and fields of a type declaration: (offset, doc comment, kind)."""
    if _inductive(kind, source):
        return [(at, doc, "constructor") for at, doc in constructor_names(source)]
    if kind in ("structure", "class"):
        return field_names(source)
    return []


def field_names(source: str) -> list[tuple[int, str | None, str]]:
    """Candidate fields (and ``name ::`` constructor) after ``where``: (offset, doc, kind)."""
    tokens = [
        t
        for t in lean_tokens(source)
        if t.kind not in COMMENT_KINDS or t.kind is TokenKind.DOC_COMMENT
    ]
    found: list[tuple[int, str | None, str]] = []
    depth = 0
    after_where = False
    naming = False  # at a field's names: a line's start, or just inside its opening bracket
    doc: str | None = None
    line_of = LineIndex(source)
    last_line = -1
    for i, t in enumerate(tokens):
        word = source[t.start : t.end]
        if t.kind is TokenKind.DOC_COMMENT:
            doc = source[t.start + 3 : t.end - 2].strip() or None
            continue
        line = line_of.lsp_of_offset(t.start).line
        first_on_line = line != last_line
        last_line = line
        if not after_where:
            depth += 1 if word in _OPEN else -1 if word in _CLOSE and depth else 0
            after_where = depth == 0 and word == "where"
            naming = after_where  # a field may follow on the same line (`where x : N`)
            doc = None
            continue
        if depth == 0 and first_on_line:
            if word == "deriving":
                break
            naming = True
        if word in _OPEN:
            depth += 1
            naming = naming and depth == 1
            continue
        if word in _CLOSE:
            depth = max(0, depth - 1)
            naming = False
            continue
        if naming and t.kind is TokenKind.IDENT and word not in MODIFIERS:
            named = "constructor" if _followed_by(source, tokens, i, "::") else "field"
            found.append((t.start, doc, named))
            doc = None
            continue
        naming = False
        doc = None
    return found


def _followed_by(source: str, tokens: Sequence[LeanToken], i: int, text: str) -> bool:
    return i + 1 < len(tokens) and source.startswith(text, tokens[i + 1].start)


def constructor_names(source: str) -> list[tuple[int, str | None]]:
    """Candidate constructor names (after each top-level ``|``): (offset, doc comment)."""
    found: list[tuple[int, str | None]] = []
    depth = 0
    doc: str | None = None  # the doc comment just read
    bar = False  # a `|` read, its constructor's name not yet
    bar_doc: str | None = None
    for t in lean_tokens(source):
        word = source[t.start : t.end]
        if t.kind is TokenKind.DOC_COMMENT:
            doc = source[t.start + 3 : t.end - 2].strip() or None
            if bar:  # `| /-- doc -/ name`
                bar_doc, doc = doc, None
            continue
        if t.kind in COMMENT_KINDS:
            continue
        if word in _OPEN:
            depth += 1
        elif word in _CLOSE:
            depth = max(0, depth - 1)
        elif depth == 0 and word == "|":
            bar, bar_doc, doc = True, doc, None
            continue
        elif depth == 0 and bar and word not in MODIFIERS and word != "@":
            if t.kind is TokenKind.IDENT:
                found.append((t.start, bar_doc))
            bar = False
        doc = None
    return found


def _code_tokens(text: str) -> Iterator[tuple[TokenKind, str]]:
    for t in lean_tokens(text):
        if t.kind not in COMMENT_KINDS:
            yield t.kind, text[t.start : t.end]


def declaration_kind(source: str) -> str:
    """The declaration keyword of ``source`` after its doc comment, attributes and modifiers."""
    depth = 0
    previous = ""
    for kind, word in _code_tokens(source):
        if depth:
            depth += {"[": 1, "]": -1}.get(word, 0)
        elif previous == "@" and word == "[":
            depth = 1
        elif kind is TokenKind.IDENT and word not in MODIFIERS:
            return word if word in KINDS else "declaration"
        previous = word
    return "declaration"


def docstring(source: str) -> str | None:
    """The leading ``/-- … -/`` of a declaration's source, without its delimiters."""
    first = next(iter(lean_tokens(source)), None)
    if first is None or first.kind is not TokenKind.DOC_COMMENT:
        return None
    return source[first.start + 3 : first.end - 2].strip() or None


def hover_signature(hover: lsp.Hover | None) -> str | None:
    """The signature in Lean's hover on a declaration name (its first ```lean block)."""
    if hover is None:
        return None
    contents = hover.contents
    value = contents.value if isinstance(contents, lsp.MarkupContent) else str(contents)
    start = value.find("```lean\n")
    if start < 0:
        return None
    end = value.find("\n```", start + 8)
    signature = value[start + 8 : end if end >= 0 else len(value)].strip()
    return signature or None


def signature_name(signature: str) -> str | None:
    """The constant's name at the start of a signature (``A.b.{u} …`` → ``A.b``)."""
    for kind, word in _code_tokens(signature):
        if kind is TokenKind.IDENT and name_parts(word):
            return word
        return None
    return None


def source_signature(source: str) -> str:
    """Fallback statement: the source from its keyword to the ``:=`` (one line)."""
    head = source.split(":=", 1)[0]
    lines = [ln.strip() for ln in head.splitlines()]
    doc = docstring(source)
    text = " ".join(ln for ln in lines if ln)
    if doc is not None:
        text = text.split("-/", 1)[-1].strip()
    return text
