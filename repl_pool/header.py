"""The module header of a Lean file, as Lean sees it, and its normalized pool key. Pure.

Header grammar (Lean 4.2x–4.3x): ``module``? ``prelude``? then ``import`` lines, each optionally
``public``/``meta`` before and ``all`` after ``import``. Whitespace, ``--`` line comments and
(nested) ``/- -/`` block comments are insignificant. ``/--`` (a docstring) and ``/-!`` (a module
doc command) start the first command, so they end the header. The lexing (comments, ``«»``
names) is lsp_bridge's ``lean_text``; only the tokens of the header are read.

The key ignores whitespace, comments, duplicates and the order of imports; two headers with
different import sets never share a key.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsp_bridge import TokenKind, lean_tokens

_KEYWORDS = {"module", "prelude", "import", "public", "meta", "all"}


@dataclass(frozen=True, slots=True)
class Header:
    module: bool
    prelude: bool
    imports: tuple[str, ...]  # in file order, with modifiers, e.g. "public import all Foo.Bar"
    end: int  # code point offset just after the last header token

    @property
    def key(self) -> str:
        """Normalized: what a warm process must have loaded to serve this file."""
        parts = []
        if self.module:
            parts.append("module")
        if self.prelude:
            parts.append("prelude")
        parts.extend(sorted(set(self.imports)))
        return "\n".join(parts)

    def text(self) -> str:
        """A canonical header text that loads exactly this environment."""
        return self.key + "\n"


_SKIPPED = frozenset({TokenKind.LINE_COMMENT, TokenKind.BLOCK_COMMENT})


class _Words:
    """The header's significant tokens, read lazily (the header is a file's first lines): each
    an identifier's text, or None for anything else (a doc comment, a symbol, a literal)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = (t for t in lean_tokens(text) if t.kind not in _SKIPPED)
        self._read: list[tuple[str | None, int]] = []
        self.pos = 0  # index into the words read so far

    def peek(self) -> tuple[str | None, int] | None:
        """(the word at the cursor or None, its end offset); None at the end of the text."""
        while len(self._read) <= self.pos:
            token = next(self._tokens, None)
            if token is None:
                return None
            word = (
                token.text(self._text)
                if token.kind is TokenKind.IDENT and token.terminated
                else None
            )
            self._read.append((word, token.end))
        return self._read[self.pos]

    def word(self) -> str | None:
        current = self.peek()
        return current[0] if current else None


def parse_header(text: str) -> Header:
    words = _Words(text)
    module = prelude = False
    imports: list[str] = []
    end = 0

    def take() -> int:
        current = words.peek()
        assert current is not None
        words.pos += 1
        return current[1]

    if words.word() == "module":
        module, end = True, take()
    if words.word() == "prelude":
        prelude, end = True, take()
    while True:
        save = words.pos
        modifiers: list[str] = []
        while (word := words.word()) in ("public", "meta"):
            modifiers.append(str(word))
            take()
        if words.word() != "import":
            words.pos = save
            break
        modifiers.append("import")
        take()
        if words.word() == "all":
            modifiers.append("all")
            take()
        name = words.word()
        if name is None or name in _KEYWORDS:
            words.pos = save
            break
        imports.append(" ".join([*modifiers, name]))
        end = take()
    return Header(module=module, prelude=prelude, imports=tuple(imports), end=end)
