"""Edit scoping: a new proof body must stay inside the target declaration.

``precheck_body`` rejects what the text alone decides; ``check_scope``, the authority, reads
Lean's parse. A syntax error inside the declaration is a version with errors, not an escape."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsp_bridge import (
    COMMENT_KINDS,
    LITERAL_KINDS,
    LeanDiagnostic,
    LineIndex,
    LspPos,
    TokenKind,
    lean_tokens,
    lone_carriage_return,
    name_parts,
    scan_text,
    scopes_at,
)

if TYPE_CHECKING:  # slow to import; only annotations need it
    from lsprotocol.types import DocumentSymbol

MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    start: int  # code point offsets
    end: int
    container: bool = False  # namespace / section


_PARSE_ERROR = re.compile(r"^(unexpected|expected|unknown tactic|unterminated|missing end)")


def suffix_structure(symbols: Sequence[Symbol], body_end: int, text_len: int) -> list[str]:
    """Lean's parse after the body, independent of its length (later offsets count from the end)."""

    def where(offset: int) -> str:
        return f"-{text_len - offset}" if offset >= body_end else str(offset)

    return sorted(
        f"{s.name}@{where(s.start)}..{where(s.end)}"
        for s in symbols
        # Not the target: its end moves with the body.
        if s.start >= body_end or (s.container and s.end >= body_end)
    )


def flatten_symbols(symbols: Iterable[DocumentSymbol], index: LineIndex) -> list[Symbol]:
    """Every symbol, containers included, in file order."""
    out: list[Symbol] = []

    def walk(items: Iterable[DocumentSymbol]) -> Iterator[DocumentSymbol]:
        for s in items:
            yield s
            yield from walk(s.children or ())

    for s in walk(symbols):
        start = index.offset_of_lsp(LspPos(s.range.start.line, s.range.start.character))
        end = index.offset_of_lsp(LspPos(s.range.end.line, s.range.end.character))
        container = s.kind.name in ("Namespace", "Module", "Package")
        out.append(Symbol(s.name, start, end, container))
    out.sort(key=lambda sym: sym.start)
    return out


def precheck_body(body: str) -> str | None:
    """Why ``body`` cannot be a proof body, decided from its text alone (None: fine)."""
    if len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        return "the proof body is over 1 MB; shorten it"
    if "\x00" in body:
        return "the proof body contains a NUL character; remove it"
    if lone_carriage_return(body) is not None:
        return (
            "the proof body contains a carriage return not followed by a line feed, which Lean "
            "does not accept; end lines with LF (or CRLF)"
        )
    try:
        body.encode("utf-8")
    except UnicodeEncodeError:
        return "the proof body is not valid Unicode (a lone surrogate); remove it"
    scan = scan_text(body)
    if scan.unterminated(COMMENT_KINDS):
        return "an unterminated `/-` comment would swallow the rest of the file; close it with `-/`"
    if scan.unterminated({TokenKind.STRING, TokenKind.RAW_STRING}):
        return 'an unterminated string would swallow the rest of the file; close it with `"`'
    if scan.unterminated({TokenKind.IDENT}):
        return "an unterminated `«` name would swallow the rest of the file; close it with `»`"
    docs = scan.of({TokenKind.DOC_COMMENT})
    if docs and _only_comments(body[docs[-1].end :]):
        return (
            "a doc comment (`/-- … -/`) at the end of the proof documents the next declaration "
            "instead; write `--` or `/- … -/`"
        )
    literal: list[bool] | None = None
    opaque = COMMENT_KINDS | LITERAL_KINDS | {TokenKind.IDENT}
    if "\t" in body:
        literal = scan.mask(opaque)
        if any(ch == "\t" and not literal[i] for i, ch in enumerate(body)):
            return "the proof body contains a tab, which Lean does not accept; indent with spaces"
    offset = 0
    for i, line in enumerate(body.split("\n")):
        if i > 0 and line and not line[0].isspace():
            if literal is None:
                literal = scan.mask(opaque)
            if not literal[offset] and _WHERE.match(line):
                # Its declarations may stand in column 0: from here on Lean's parse judges.
                return None
            if not literal[offset] and not _COLUMN0_CLAUSE.match(line):
                return (
                    f"line {i + 1} of the proof starts in column 0, which starts a new "
                    "command; indent every line of the proof"
                )
        offset += len(line) + 1
    return None


def _only_comments(text: str) -> bool:
    return not scan_text(text).blank(text, COMMENT_KINDS).strip()


# A column-0 line may start a clause of the declaration, or a token no command starts with.
_WHERE = re.compile(r"where(?![\w'!?])")
_COLUMN0_CLAUSE = re.compile(r"(?:where|termination_by\??|decreasing_by)(?![\w'!?])|[)\]}⟩⦄|,]")


_SORRY_WORDS = frozenset({"sorry", "sorryAx", "admit"})


def uses_sorry(text: str) -> bool:
    """Does ``text`` use ``sorry`` (``sorryAx``, ``admit``)? Lexical."""
    return sorry_outside(text, 0, 0)


def sorry_outside(text: str, start: int, end: int) -> bool:
    """Does ``text`` use ``sorry`` outside ``[start, end)``? Lexical: may say yes wrongly, never
    no wrongly. A name right after ``axiom`` is declared, not used."""
    declared = False
    for token in lean_tokens(text):
        if token.kind in COMMENT_KINDS:
            continue
        word = token.text(text)
        if token.kind is TokenKind.IDENT and not declared and not start <= token.start < end:
            parts = name_parts(word)
            if parts and parts[-1] in _SORRY_WORDS:
                return True
        declared = token.kind is TokenKind.IDENT and word == "axiom"
    return False


def axioms_declared(text: str, start: int = 0, end: int = 0) -> list[str]:
    """Full names ``text`` declares with ``axiom`` outside ``[start, end)``, as Lean prints them.
    ``unsafe axiom`` is left out: the kernel lets no theorem depend on one."""
    found: list[tuple[int, tuple[str, ...]]] = []  # (offset, the name as written)
    previous = following = ""
    for token in lean_tokens(text):
        if token.kind in COMMENT_KINDS:
            continue
        word = token.text(text) if token.kind is TokenKind.IDENT else ""
        outside = not start <= token.start < end
        if word and following == "axiom" and previous != "unsafe" and outside:
            found.append((token.start, name_parts(word)))
        previous, following = following, word
    names = []
    for (_, parts), scopes in zip(
        found, scopes_at(text, [at for at, _ in found], (start, end)), strict=True
    ):
        full = parts[1:] if parts[:1] == ("_root_",) else (*scopes.namespace, *parts)
        names.append(".".join(p if _PLAIN_PART.fullmatch(p) else f"«{p}»" for p in full))
    return names


_PLAIN_PART = re.compile(r"[^\s.«»]+")


def code_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Offsets of the first code character in ``text[start:end]`` and after the last one
    (whitespace and comments are not code); ``(start, start)`` if there is none."""
    mask = scan_text(text[start:end]).mask(COMMENT_KINDS)
    n = end - start
    i = 0
    while i < n and (text[start + i].isspace() or mask[i]):
        i += 1
    j = n
    while j > i and (text[start + j - 1].isspace() or mask[j - 1]):
        j -= 1
    return (start + i, start + j) if i < n else (start, start)


def code_end(text: str, start: int, end: int) -> int:
    """Offset after the last code character in ``text[start:end]`` (``start`` if none)."""
    return code_span(text, start, end)[1]


def check_scope(
    *,
    text: str,
    body_start: int,
    body_end: int,
    decl_start: int,
    symbols: Sequence[Symbol],
    expected_suffix: Sequence[str],
    diagnostics: Sequence[LeanDiagnostic],
) -> str | None:
    """Why Lean's parse of ``text`` shows the body escaping its declaration (None: it doesn't).

    ``expected_suffix`` is ``suffix_structure`` of the untouched task file.
    """
    index = LineIndex(text)
    decls = [s for s in symbols if not s.container]
    last = code_end(text, body_start, body_end)
    target = next((s for s in decls if s.start <= decl_start < s.end), None)
    if target is None:
        candidates = [s for s in decls if s.start <= body_start <= s.end]
        target = candidates[-1] if candidates else None
    if target is None:
        return "Lean no longer sees the target theorem; the edit broke its declaration"
    inside = [s for s in decls if body_start <= s.start < body_end and s is not target]
    if inside:
        pos = index.pos_of(inside[0].start)
        return (
            f"the proof body declares `{inside[0].name}` (at {pos.line}:{pos.column}); "
            "only the proof of the target theorem may be edited"
        )
    if suffix_structure(symbols, body_end, len(text)) != sorted(expected_suffix):
        return (
            "the edit changes how Lean reads the rest of the file: the body holds a command "
            "(`end`, `#exit`, `namespace`, …) or an unterminated comment or string; remove it"
        )
    if target.end < last:
        # A syntax error ends the declaration early: a version with errors, not an escape.
        parse_broke = any(
            d.is_error
            and _PARSE_ERROR.match(d.message)
            and body_start <= index.offset_of_lsp(d.range.start) <= last
            for d in diagnostics
        )
        if not parse_broke:
            pos = index.pos_of(target.end)
            return (
                f"Lean's parse ends the theorem at {pos.line}:{pos.column}, before the end of the "
                "proof body; the text after it would run as separate commands "
                "(e.g. #exit, end, set_option, attribute): remove them"
            )
    return None
