"""Lean 4 source text, lexically: where comments, literals and identifiers are. Pure.

Follows Lean's token functions (``Lean.Parser.Basic``); offsets are code points. Never raises:
unterminated comments, strings and ``«`` escapes run to the end with ``terminated=False``."""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import NamedTuple


class TokenKind(enum.Enum):
    __hash__ = object.__hash__  # members are singletons; Enum's hash is slow Python (hot path)

    LINE_COMMENT = "line comment"
    BLOCK_COMMENT = "block comment"
    DOC_COMMENT = "doc comment"
    MODULE_DOC = "module doc"
    STRING = "string"
    RAW_STRING = "raw string"
    CHAR = "char"
    IDENT = "identifier"
    NUMBER = "number"
    SYMBOL = "symbol"


COMMENT_KINDS = frozenset(
    {
        TokenKind.LINE_COMMENT,
        TokenKind.BLOCK_COMMENT,
        TokenKind.DOC_COMMENT,
        TokenKind.MODULE_DOC,
    }
)
LITERAL_KINDS = frozenset({TokenKind.STRING, TokenKind.RAW_STRING, TokenKind.CHAR})
_DEFAULT_KINDS = COMMENT_KINDS | LITERAL_KINDS


class LeanToken(NamedTuple):
    """One token: its kind and code point span (a named tuple: built on the hot path)."""

    kind: TokenKind
    start: int  # code point offsets: text[start:end]
    end: int
    terminated: bool = True  # False: an unclosed comment/string/«escape» (runs to the end) or char

    def text(self, source: str) -> str:
        return source[self.start : self.end]


@dataclass(frozen=True, slots=True)
class TextScan:
    """The opaque spans of a text, in order: comments, literals and ``«»``-escaped identifiers."""

    length: int
    spans: tuple[LeanToken, ...]

    def of(self, kinds: Collection[TokenKind] = _DEFAULT_KINDS) -> tuple[LeanToken, ...]:
        return tuple(s for s in self.spans if s.kind in kinds)

    def mask(self, kinds: Collection[TokenKind] = _DEFAULT_KINDS) -> list[bool]:
        """Per offset: inside a span of one of ``kinds`` (default: comments and literals)?"""
        mask = [False] * self.length
        for s in self.spans:
            if s.kind in kinds:
                mask[s.start : s.end] = [True] * (s.end - s.start)
        return mask

    def blank(self, text: str, kinds: Collection[TokenKind] = _DEFAULT_KINDS) -> str:
        """``text`` with spans of ``kinds`` blanked to spaces, keeping line breaks and length."""
        out: list[str] = []
        pos = 0
        for s in self.spans:
            if s.kind in kinds:
                out.append(text[pos : s.start])
                out.append(_NOT_NEWLINE.sub(" ", text[s.start : s.end]))
                pos = s.end
        out.append(text[pos:])
        return "".join(out)

    def unterminated(self, kinds: Collection[TokenKind] = _DEFAULT_KINDS) -> tuple[LeanToken, ...]:
        return tuple(s for s in self.spans if not s.terminated and s.kind in kinds)


# Lean's isIdFirst, isIdRest, isLetterLike, isSubScriptAlnum.
_LETTER_LIKE = (
    "\u03b1-\u03ba\u03bc-\u03c9"  # lower Greek but λ
    "\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"  # upper Greek but Π Σ
    "\u03ca-\u03fb"  # Coptic
    "\u1f00-\u1ffe"  # polytonic Greek
    "\u2100-\u214f"  # letter-like block (ℕ ℝ …)
    "\U0001d49c-\U0001d59f"  # script, double-struck, Fraktur
    "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff"  # Latin-1 letters (Lean ≥ 4.2x)
    "\u0100-\u017f"  # Latin Extended-A
)
_SUBSCRIPT = "\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a\u2c7c"
_ID_FIRST = f"A-Za-z_{_LETTER_LIKE}"
_ID_REST = f"A-Za-z_0-9'!?{_LETTER_LIKE}{_SUBSCRIPT}"
_PLAIN = f"[{_ID_FIRST}][{_ID_REST}]*"
_PART = f"(?:«[^»]*»?|{_PLAIN})"
_IDENT = f"{_PART}(?:\\.{_PART})*"
_NUMBER = (
    r"0[xX][0-9a-fA-F_]*|0[bB][01_]*|0[oO][0-7_]*"
    r"|[0-9][0-9_]*(?:\.(?:[0-9][0-9_]*)?)?(?:[eE][+-]?[0-9][0-9_]*)?"
)
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*(?P<sclose>")?'
_CHAR = r"'(?!')(?P<cbody>\\(?:x[0-9a-fA-F]{0,2}|u[0-9a-fA-F]{0,4}|.)?|.)?(?P<cclose>')?"
_SPECIALS = (
    rf"(?P<line>--[^\n]*)|(?P<block>/-)|(?P<string>{_STRING})|(?P<raw>r(?P<hashes>\#*)\")"
    rf"|(?P<char>{_CHAR})"
)

_TOKEN = re.compile(
    rf"[ \t\r\n]*+(?:{_SPECIALS}|(?P<ident>{_IDENT})|(?P<number>{_NUMBER})|(?P<symbol>.))",
    re.DOTALL,
)
# The opaque spans only: stretches of ordinary code are one match each.
_BORING = f"[^\"'«\\-/0-9{_ID_FIRST}]"
_SCAN = re.compile(
    rf"(?P<code>(?:{_BORING}+|(?!r\#*\")(?>{_PLAIN}(?:\.{_PLAIN})*)(?!\.«)|{_NUMBER}"
    rf"|-(?!-)|/(?!-)|'(?='))++)"
    rf"|{_SPECIALS}|(?P<escaped>(?:{_PLAIN}\.)*«[^»]*»?(?:\.{_PART})*)",
    re.DOTALL,
)
_NESTING = re.compile(r"/-|-/")
_NOT_NEWLINE = re.compile(r"[^\n]")
_NAME_PART = re.compile(r"«([^»]*)»?|([^.«]+)")


def _block_end(text: str, start: int) -> tuple[int, bool]:
    """(end, terminated) of the block comment opening at ``start``."""
    depth = 1
    # Lean reads nesting from the fourth character (``/-/-/`` is one whole comment).
    for m in _NESTING.finditer(text, min(start + 3, len(text))):
        if m.group() == "/-":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.end(), True
    return len(text), False


def _block_kind(text: str, start: int) -> TokenKind:
    third = text[start + 2 : start + 3]
    if third == "-":
        return TokenKind.DOC_COMMENT
    if third == "!":
        return TokenKind.MODULE_DOC
    return TokenKind.BLOCK_COMMENT


def _special(text: str, m: re.Match[str]) -> LeanToken:
    kind = m.lastgroup
    assert kind is not None
    start, end = m.start(kind), m.end(kind)
    n = len(text)
    if kind == "line":
        return LeanToken(TokenKind.LINE_COMMENT, start, end)
    if kind == "block":
        end, closed = _block_end(text, start)
        return LeanToken(_block_kind(text, start), start, end, closed)
    if kind == "string":
        if m.group("sclose") is None:
            return LeanToken(TokenKind.STRING, start, n, False)
        return LeanToken(TokenKind.STRING, start, end)
    if kind == "raw":
        close = text.find('"' + m.group("hashes"), end)
        if close == -1:
            return LeanToken(TokenKind.RAW_STRING, start, n, False)
        return LeanToken(TokenKind.RAW_STRING, start, close + 1 + len(m.group("hashes")))
    closed = m.group("cbody") is not None and m.group("cclose") is not None
    return LeanToken(TokenKind.CHAR, start, end, closed)


def _ident(text: str, start: int, end: int) -> LeanToken:
    if text.find("«", start, end) == -1:
        return LeanToken(TokenKind.IDENT, start, end)
    # An escape's content cannot contain », so a « after the last » is an unclosed escape.
    open_escape = text.rfind("«", start, end) > text.rfind("»", start, end)
    return LeanToken(TokenKind.IDENT, start, end, not open_escape)


def lean_tokens(text: str, start: int = 0) -> Iterator[LeanToken]:
    """Every token of ``text`` from token boundary ``start``, lazily, comments included."""
    pos, n = start, len(text)
    # Locals: every edit's body is lexed on the step's hot path.
    match, find, token_of = _TOKEN.match, text.find, LeanToken
    ident, number, symbol = TokenKind.IDENT, TokenKind.NUMBER, TokenKind.SYMBOL
    while pos < n:
        m = match(text, pos)
        if m is None:
            return
        group = m.lastgroup
        end = m.end()
        if group == "ident":
            begin = m.start(group)
            token = (
                token_of(ident, begin, end)
                if find("«", begin, end) == -1
                else _ident(text, begin, end)
            )
        elif group == "symbol":
            token = token_of(symbol, end - 1, end)
        elif group == "number":
            token = token_of(number, m.start(group), end)
        else:
            token = _special(text, m)
            end = token.end
        yield token
        pos = end


def scan_text(text: str) -> TextScan:
    """The opaque spans of ``text`` as ``lean_tokens`` yields them, without the other tokens."""
    spans: list[LeanToken] = []
    pos, n = 0, len(text)
    match = _SCAN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            pos += 1
            continue
        group = m.lastgroup
        if group == "code":
            pos = m.end()
            continue
        token = _ident(text, m.start(), m.end()) if group == "escaped" else _special(text, m)
        spans.append(token)
        pos = token.end
    return TextScan(n, tuple(spans))


_LONE_CR = re.compile(r"\r(?!\n)")


def lone_carriage_return(text: str) -> int | None:
    """The offset of the first carriage return without a line feed (Lean refuses it), or None."""
    m = _LONE_CR.search(text)
    return m.start() if m is not None else None


def name_parts(name: str) -> tuple[str, ...]:
    """The parts of a dotted Lean name: ``Foo.«a.b c».bar`` → ``("Foo", "a.b c", "bar")``."""
    return tuple(
        m.group(1) if m.group(1) is not None else m.group(2) for m in _NAME_PART.finditer(name)
    )


# `‹t›` is notation for `(by assumption : t)`.
_TACTIC_OPENERS = frozenset({"by", "decreasing_by", "‹"})


def has_tactic_block(text: str) -> bool:
    """Whether code ``text`` may open a tactic block (`by`, `decreasing_by`, `‹`, or in ``s!``)."""
    if "by" not in text and "‹" not in text:
        return False
    for token in lean_tokens(text):
        if token.kind in _CODE_WORDS:
            if token.text(text) in _TACTIC_OPENERS:
                return True
        elif token.kind is TokenKind.STRING and _interpolated(text, token):
            return True
    return False


def _interpolated(text: str, string: LeanToken) -> bool:
    return text[string.start - 1 : string.start] == "!" and "by" in string.text(text)


_CODE_WORDS = frozenset({TokenKind.IDENT, TokenKind.SYMBOL})


_CLOSING = {")": "(", "]": "[", "}": "{", "⟩": "⟨", "⦄": "⦃", "⟧": "⟦", "⦘": "⦗"}
_OPENING = frozenset(_CLOSING.values())


def brackets_balanced(text: str) -> bool:
    """Whether ``text`` stays one term in parentheses: brackets balanced, all tokens closed."""
    stack: list[str] = []
    for token in lean_tokens(text):
        if not token.terminated:
            return False
        if token.kind is not TokenKind.SYMBOL:
            continue
        char = text[token.start]
        if char in _OPENING:
            stack.append(char)
        elif char in _CLOSING and (not stack or stack.pop() != _CLOSING[char]):
            return False
    return not stack


def is_identifier(text: str) -> bool:
    """Is ``text`` exactly one identifier (``And.intro``, ``«my lemma».foo``, ``α.β``)?"""
    tokens = list(itertools.islice(lean_tokens(text), 2))
    return (
        len(tokens) == 1
        and tokens[0].kind is TokenKind.IDENT
        and tokens[0].terminated
        and tokens[0].start == 0
        and tokens[0].end == len(text)
    )
