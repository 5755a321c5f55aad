"""Edit scoping: a new proof body must stay inside the target declaration.

Two stages. ``precheck_body`` (pure, before Lean sees anything) rejects what can be decided from
the text alone: oversize bodies, NUL bytes, column-0 lines (by the suite contract they start a
new command) and unterminated comments, strings or ``«`` names (they would swallow the rest of
the file).
``check_scope`` is the authority: it reads Lean's own parse of the edited file (document
symbols and diagnostics) and rejects a body if

- another declaration starts inside the body, or
- Lean's parse ends the target declaration before the body's last code character without a
  parse error inside the declaration (the rest parsed as separate commands: ``#exit``,
  ``end``, ``attribute``, ``set_option``, ...), or
- the declarations after the body are not the ones the task file has (something swallowed
  or added them).

A body whose parse simply fails inside the declaration (a syntax error) is *not* an escape: it
stays a version with errors, as in an editor.
"""

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

if TYPE_CHECKING:  # (lsprotocol's types: ~0.5 s to import; only annotations need them)
    from lsprotocol.types import DocumentSymbol

MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    start: int  # code point offsets in the file text
    end: int
    container: bool = False  # namespace / section


_PARSE_ERROR = re.compile(r"^(unexpected|expected|unknown tactic|unterminated|missing end)")


def suffix_structure(symbols: Sequence[Symbol], body_end: int, text_len: int) -> list[str]:
    """What Lean's parse says about the file after the body, independent of the body's length:
    every symbol ending after the body, with positions after the body counted from the end."""

    def where(offset: int) -> str:
        return f"-{text_len - offset}" if offset >= body_end else str(offset)

    return sorted(
        f"{s.name}@{where(s.start)}..{where(s.end)}"
        for s in symbols
        # Declarations after the body, and the containers (namespaces) spanning it. Not the
        # target itself: its end moves with the body (a trailing comment is not part of it).
        if s.start >= body_end or (s.container and s.end >= body_end)
    )


def flatten_symbols(symbols: Iterable[DocumentSymbol], index: LineIndex) -> list[Symbol]:
    """Every symbol (declarations and namespace containers), in file order."""
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
    # In comments, literals or «» names (a line break may stand in any of them)? When needed.
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
                # The `where` clause's declarations may stand in column 0 too (Lean reads
                # them up to the next command keyword): from here on Lean's parse judges
                # (check_scope), as for any body.
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


# What a column-0 line may start with: the clauses of the declaration that Lean reads after
# its body (often written in column 0), and tokens no command starts with — a closing
# bracket, a `|` alternative, a `,` (a term's layout, e.g. an argument list closed in column 0).
_WHERE = re.compile(r"where(?![\w'!?])")
_COLUMN0_CLAUSE = re.compile(r"(?:where|termination_by\??|decreasing_by)(?![\w'!?])|[)\]}⟩⦄|,]")


_SORRY_WORDS = frozenset({"sorry", "sorryAx", "admit"})


def uses_sorry(text: str) -> bool:
    """Does ``text`` (a proof body) use ``sorry`` (``sorryAx``, ``admit``)? Lexical."""
    return sorry_outside(text, 0, 0)


def sorry_outside(text: str, start: int, end: int) -> bool:
    """Does ``text`` use ``sorry`` (``sorryAx``, ``admit``) outside ``[start, end)`` — a helper
    lemma left unproved that a proof could depend on? Lexical, so it may say yes for a name
    that only looks like one: the caller only does extra work then. A name right after
    ``axiom`` (a prelude library declaring ``sorryAx`` itself) is declared, not used."""
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
    """The full names ``text`` declares with ``axiom`` outside ``[start, end)``: the enclosing
    ``namespace``s prefixed (lsp_bridge's ``scopes_at``, which locating the target reads too), a
    ``_root_.`` prefix dropped, a part that needs it escaped (``A.«my ax»``, as Lean prints
    it). An ``unsafe axiom`` is left out: no theorem can depend on one (the kernel refuses)."""
    found: list[tuple[int, tuple[str, ...]]] = []  # (where, the name as written)
    previous = following = ""  # the code words before the current one
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
    """(first, last): the offset of the first character in ``text[start:end]`` that is neither
    whitespace nor inside a comment, and the offset after the last such one (``start, start``
    if there is none). One lexical scan."""
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
    """Offset after the last character in ``text[start:end]`` that is neither whitespace nor
    inside a comment (``start`` if there is none)."""
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
        # A syntax error in the body ends the declaration early (`h ]`: Lean's parse stops at
        # `]`): that is a version with errors, as in an editor, not an escape. Commands Lean
        # then reads after it cannot make such a version pass.
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
