"""The module header of a Lean file, as Lean sees it, and its normalized pool key. Pure.

Header grammar (Lean 4.2x–4.3x): ``module``? ``prelude``? then ``import`` lines, each optionally
``public``/``meta`` before and ``all`` after ``import``. Whitespace, ``--`` line comments and
(nested) ``/- -/`` block comments are insignificant. ``/--`` (a docstring) and ``/-!`` (a module
doc command) start the first command, so they end the header.

The key ignores whitespace, comments, duplicates and the order of imports; two headers with
different import sets never share a key.
"""

from __future__ import annotations

from dataclasses import dataclass

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


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_trivia(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            ch = text[self.pos]
            if ch.isspace():
                self.pos += 1
            elif text.startswith("--", self.pos):
                nl = text.find("\n", self.pos)
                self.pos = n if nl == -1 else nl + 1
            elif text.startswith("/-", self.pos) and not text.startswith(("/--", "/-!"), self.pos):
                self.pos = block_comment_end(text, self.pos)
            else:
                return

    def peek_word(self) -> tuple[str, int] | None:
        """The identifier (dotted, «escaped» parts allowed) at the current position."""
        text, start = self.text, self.pos
        i = start
        n = len(text)
        while i < n:
            if text[i] == "«":
                close = text.find("»", i)
                if close == -1:
                    return None
                i = close + 1
            elif text[i].isalnum() or text[i] in "_'!?" or (ord(text[i]) > 127 and text[i] != "»"):
                i += 1
            else:
                break
            if i < n and text[i] == "." and i + 1 < n and not text[i + 1].isspace():
                i += 1
        return (text[start:i], i) if i > start else None


def block_comment_end(text: str, start: int) -> int:
    """Offset after the (nested) ``/- ... -/`` comment opening at ``start``; the text's end if
    it is unterminated."""
    return block_comment_span(text, start)[0]


def block_comment_span(text: str, start: int) -> tuple[int, bool]:
    """(offset after the comment opening at ``start``, whether it is terminated)."""
    depth = 0
    i = start
    n = len(text)
    while i < n:
        if text.startswith("/-", i):
            depth += 1
            i += 2
        elif text.startswith("-/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i, True
        else:
            i += 1
    return n, False  # unterminated: the rest of the file is a comment


def parse_header(text: str) -> Header:
    scanner = _Scanner(text)
    module = prelude = False
    imports: list[str] = []
    end = 0
    scanner.skip_trivia()
    word = scanner.peek_word()
    if word and word[0] == "module":
        module, end, scanner.pos = True, word[1], word[1]
        scanner.skip_trivia()
        word = scanner.peek_word()
    if word and word[0] == "prelude":
        prelude, end, scanner.pos = True, word[1], word[1]
    while True:
        scanner.skip_trivia()
        save = scanner.pos
        modifiers: list[str] = []
        word = scanner.peek_word()
        while word and word[0] in ("public", "meta"):
            modifiers.append(word[0])
            scanner.pos = word[1]
            scanner.skip_trivia()
            word = scanner.peek_word()
        if not word or word[0] != "import":
            scanner.pos = save
            break
        modifiers.append("import")
        scanner.pos = word[1]
        scanner.skip_trivia()
        word = scanner.peek_word()
        if word and word[0] == "all":
            modifiers.append("all")
            scanner.pos = word[1]
            scanner.skip_trivia()
            word = scanner.peek_word()
        if not word or word[0] in _KEYWORDS:
            scanner.pos = save
            break
        imports.append(" ".join([*modifiers, word[0]]))
        scanner.pos = end = word[1]
    return Header(module=module, prelude=prelude, imports=tuple(imports), end=end)
