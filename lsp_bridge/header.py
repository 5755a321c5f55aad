"""The module header of a Lean file, as Lean sees it, and its normalized pool key. Pure.

Grammar: ``module``? ``prelude``? then ``[public|meta] import [all] Name`` lines; ``/--`` and
``/-!`` end the header. Headers with different import sets never share a key."""

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
    # The header depends only on the text before this offset: an edit from here on keeps it
    # (it includes the whitespace after the last token: `meta.` + `X` would be one name).
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
    """The header's significant tokens, read lazily: an identifier's text, or None for others."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._tokens = lean_tokens(text)
        self._read: list[tuple[str | None, int]] = []  # (word or None, end offset)
        self.pos = 0
        self.read_to = 0

    def word(self) -> str | None:
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
        """Step past the word ``word`` read; returns its end offset."""
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
