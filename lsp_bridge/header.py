"""The module header of a Lean file, as Lean sees it, and its normalized pool key. Pure.

Header grammar (Lean 4.2x–4.3x): ``module``? ``prelude``? then ``import`` lines, each optionally
``public``/``meta`` before and ``all`` after ``import``. Whitespace, ``--`` line comments and
(nested) ``/- -/`` block comments are insignificant. ``/--`` (a docstring) and ``/-!`` (a module
doc command) start the first command, so they end the header. The lexing (comments, ``«»``
names) is ``lean_text``'s; only the tokens of the header are read. Here, at the bottom, because
the pool keys processes by it and the client restarts a direct file worker when it changes.

The key ignores whitespace, comments, duplicates and the order of imports; two headers with
different import sets never share a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lean_text import TokenKind, lean_tokens

_KEYWORDS = {"module", "prelude", "import", "public", "meta", "all"}
_SPACE = re.compile(r"\s")


@dataclass(frozen=True, slots=True)
class Header:
    module: bool
    prelude: bool
    imports: tuple[str, ...]  # in file order, with modifiers, e.g. "public import all Foo.Bar"
    end: int  # code point offset just after the last header token
    # How far the parse read: the header depends only on the text before this offset (up to
    # and including the first whitespace after the last token read — text joined to that
    # token can change it: `meta.` + `X` is the name `meta.X`, `r##` + `"` a raw string;
    # past the end of the text when the text ended the header). An edit from here on keeps
    # the header.
    read_to: int = 0

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


class _Words:
    """The header's significant tokens, read lazily (the header is a file's first lines): each
    an identifier's text, or None for anything else (a doc comment, a symbol, a literal)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = lean_tokens(text)
        self._read: list[tuple[str | None, int]] = []  # (word or None, end offset)
        self.pos = 0  # index into _read
        self.read_to = 0  # Header.read_to

    def word(self) -> str | None:
        """The word at the cursor (None: not an identifier, or the end of the text)."""
        if self.pos == len(self._read):
            for token in self._tokens:
                space = _SPACE.search(self._text, token.end)
                self.read_to = space.end() if space else len(self._text) + 1
                kind = token.kind
                if kind is TokenKind.LINE_COMMENT or kind is TokenKind.BLOCK_COMMENT:
                    continue
                ident = kind is TokenKind.IDENT and token.terminated
                self._read.append((token.text(self._text) if ident else None, token.end))
                break
            else:
                self.read_to = len(self._text) + 1
                return None
        return self._read[self.pos][0]

    def take(self) -> int:
        """Step past the word at the cursor (which ``word`` has read); its end offset."""
        self.pos += 1
        return self._read[self.pos - 1][1]


def parse_header(text: str) -> Header:
    words = _Words(text)
    take = words.take
    module = prelude = False
    imports: list[str] = []
    end = 0
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
    return Header(
        module=module, prelude=prelude, imports=tuple(imports), end=end, read_to=words.read_to
    )
