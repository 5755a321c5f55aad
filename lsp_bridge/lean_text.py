"""Lean 4 source text, lexically: where comments, literals and identifiers are. Pure.

The one place that knows Lean's lexical trivia (everything else — header parsing, locating
proof bodies, scope prechecks, the verifier's construct search — asks this module). The rules
follow Lean's own token functions (``Lean.Parser.Basic``: ``whitespace``, ``finishCommentBlock``,
``tokenFnAux``, ``identFnAux``, ``strLitFnAux``, ``charLitFnAux``, ``rawStrLitFnAux``):

- ``--`` starts a line comment up to (not including) the next ``\\n``.
- ``/-`` starts a block comment; ``/--`` a doc comment and ``/-!`` a module doc (tokens, not
  whitespace, to Lean's parser). All three nest: ``/-`` and ``-/`` are read left to right, two
  characters at a time, from the *fourth* character on (Lean skips the character after a plain
  ``/-`` unread, so ``/-/-/`` is one whole comment).
- ``"…"`` strings: a backslash escapes the next character (``\\"``, ``\\\\``, gaps); they may
  span lines. ``r"…"``, ``r#"…"#``, ``r##"…"##``: raw strings, no escapes, closed by ``"``
  followed by as many ``#`` as opened them; the ``r`` must start a token (``br"x"`` is the
  identifier ``br`` and a string).
- ``'`` starts a char literal (``'a'``, ``'\\''``, ``'\\x41'``, ``'\\u03b1'``) only where a token
  starts and the next character is not ``'`` — never inside an identifier, so the primes of
  ``h'`` and ``x''`` are part of the name. After a number, a ``«»`` escape or a symbol, ``'``
  starts a token.
- Identifiers: Lean's ``isIdFirst``/``isIdRest`` (ASCII letters, ``_``, Greek except ``λ Π Σ``,
  letter-like symbols, mathematical alphanumerics, Latin-1/Latin Extended-A letters; digits,
  ``'``, ``!``, ``?`` and subscripts after the first character), dotted, with ``«…»`` escaped
  parts whose content is arbitrary (``«a -- b»`` contains no comment).
- Whitespace is ``' '``, ``\\t``, ``\\r``, ``\\n`` (Lean's ``Char.isWhitespace``).

Unterminated comments, strings, raw strings and ``«`` escapes run to the end of the text (as
in Lean, which reports an error there) and are reported with ``terminated=False``; a char
literal without its closing ``'`` ends where it stopped. Nothing here raises on any input.

Known simplifications (no token table): a symbol token is one code point, so a ``--`` or ``/-``
that Lean would read inside a longer symbol token (``<--``, ``//-``) starts a comment here;
``{…}`` in ``s!"…"`` strings is not interpolated, so a ``"`` inside the braces ends the string
here. Offsets are code point offsets into the Python string.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import NamedTuple


class TokenKind(enum.Enum):
    __hash__ = object.__hash__  # members are singletons; Enum's own hash is Python code (hot path)

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
    """One token: its kind and code point span. A named tuple, not a frozen dataclass: a
    frozen dataclass sets each field through ``object.__setattr__`` (~1.4 µs a token against
    ~0.45), and every edit's body is lexed several times on the step's path."""

    kind: TokenKind
    start: int  # code point offsets: text[start:end]
    end: int
    terminated: bool = True  # False: an unclosed comment/string/«escape» (runs to the end) or char

    def text(self, source: str) -> str:
        return source[self.start : self.end]


@dataclass(frozen=True, slots=True)
class TextScan:
    """The opaque spans of a text: comments, string/char literals and identifiers with ``«»``
    escapes (the places where text does not mean what it looks like), in text order."""

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
        """``text`` with every character inside a span of ``kinds`` replaced by a space, except
        line breaks: same length, same lines, code untouched."""
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


# -- character classes (Lean: isIdFirst, isIdRest, isLetterLike, isSubScriptAlnum) ------------

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

# Every token, one match at a time (the full lexer), with the whitespace before it.
_TOKEN = re.compile(
    rf"[ \t\r\n]*+(?:{_SPECIALS}|(?P<ident>{_IDENT})|(?P<number>{_NUMBER})|(?P<symbol>.))",
    re.DOTALL,
)
# The opaque spans only: stretches of ordinary code are one match each. An identifier that
# continues into a «» escape (a.b.«c») is matched whole by the `escaped` alternative.
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
    """(end, terminated) of the block/doc comment opening at ``start`` (``text[start:]`` begins
    with ``/-``). Lean reads nesting from the fourth character: the third is ``-``/``!`` of a doc
    comment, or skipped unread after a plain ``/-``."""
    depth = 1
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
    """The token for a match of one of the _SPECIALS alternatives."""
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
    # char
    closed = m.group("cbody") is not None and m.group("cclose") is not None
    return LeanToken(TokenKind.CHAR, start, end, closed)


def _ident(text: str, start: int, end: int) -> LeanToken:
    if text.find("«", start, end) == -1:
        return LeanToken(TokenKind.IDENT, start, end)
    # An escape's content cannot contain », so a « after the last » is an unclosed escape.
    open_escape = text.rfind("«", start, end) > text.rfind("»", start, end)
    return LeanToken(TokenKind.IDENT, start, end, not open_escape)


def lean_tokens(text: str, start: int = 0) -> Iterator[LeanToken]:
    """Every token of ``text`` from ``start`` (which must be a token boundary), lazily, in
    order: comments and doc comments included, whitespace skipped. A symbol is one code point.
    """
    pos, n = start, len(text)
    # (Locals: every edit's body is lexed on the step's path, ~30 tokens a time.)
    match, find, token_of = _TOKEN.match, text.find, LeanToken
    ident, number, symbol = TokenKind.IDENT, TokenKind.NUMBER, TokenKind.SYMBOL
    while pos < n:
        m = match(text, pos)
        if m is None:  # only whitespace is left
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
    """The comments, string/char literals and ``«»``-escaped identifiers of ``text``: the same
    spans ``lean_tokens`` yields for them, found without building the other tokens."""
    spans: list[LeanToken] = []
    pos, n = 0, len(text)
    match = _SCAN.match
    while pos < n:
        m = match(text, pos)
        if m is None:  # unreachable: every character starts one alternative
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
    """The offset of the first carriage return not followed by a line feed (Lean refuses one:
    "isolated carriage returns are not allowed"), or None."""
    m = _LONE_CR.search(text)
    return m.start() if m is not None else None


def name_parts(name: str) -> tuple[str, ...]:
    """The components of a (dotted, possibly ``«»``-escaped) Lean name as written:
    ``Foo.«a.b c».bar`` → ``("Foo", "a.b c", "bar")``."""
    return tuple(
        m.group(1) if m.group(1) is not None else m.group(2) for m in _NAME_PART.finditer(name)
    )


# Tokens after which Lean elaborates a tactic block: the keyword `by`, `decreasing_by` (a
# termination proof) and `‹`, whose notation `‹t›` is `(by assumption : t)`.
_TACTIC_OPENERS = frozenset({"by", "decreasing_by", "‹"})


def has_tactic_block(text: str) -> bool:
    """Whether the code ``text`` (e.g. a proof body) opens a tactic block: a `by`,
    `decreasing_by` or `‹` token, not in a comment or literal nor part of a longer name —
    or maybe one: an interpolated string (``s!"…"``, ``m!"…"``) with `by` in it, whose
    ``{…}`` parts are code. Without one, no tactic written in the text runs, so no position
    in it has tactic goals of its own (a notation that expands to `by`, or an auto-param
    tactic Lean runs unwritten, aside)."""
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
    """Does every bracket of ``text`` (outside comments and literals) close the innermost one
    it opened, all closed at the end, and every comment, literal and ``«»`` name end within
    ``text``? Such a text put between parentheses cannot end them early: it stays one term."""
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
