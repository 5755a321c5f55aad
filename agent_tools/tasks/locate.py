"""Locating a theorem's proof body in Lean source text. Pure functions.

The **body** is everything after the ``:=`` that ends the target theorem's signature, up to the
end of that declaration. The declaration ends where the next command starts: the next line
that begins in column 0 with non-blank text outside a comment (Lean requires proof lines to be
indented relative to the command, and suite files are written that way), or the end of the
file; trailing blank lines and whitespace are not part of the body.

This is the *suite author's* contract, used to find the body in a trusted task file. Whether an
*edited* body stays inside the declaration is decided by Lean's own parse (see scope.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from repl_pool.header import block_comment_span

_DECL_RE = re.compile(
    r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|noncomputable|nonrec|unsafe|partial)\s+)*"
    r"(theorem|lemma)\s+(\S+)",
    re.MULTILINE,
)
_NAMESPACE_RE = re.compile(r"^(namespace|section|end)\b[ \t]*([^\s-]*)", re.MULTILINE)
_OPEN = "([{⟨⦃"
_CLOSE = ")]}⟩⦄"


class LocateError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class BodySpan:
    decl_start: int  # offset of the `theorem` keyword line (modifiers/attributes included)
    start: int  # offset just after `:=`
    end: int  # offset just after the last non-whitespace character of the declaration

    def body(self, text: str) -> str:
        return text[self.start : self.end]


@dataclass(frozen=True, slots=True)
class Trivia:
    mask: list[bool]  # per offset: inside a comment or a string/char literal
    unterminated_comment: bool
    unterminated_string: bool


def scan_trivia(text: str) -> Trivia:
    """Comments (``--``, nested ``/- -/``), string and char literals of Lean source."""
    mask = [False] * len(text)
    open_comment = open_string = False
    i, n = 0, len(text)
    while i < n:
        if text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j == -1 else j
        elif text.startswith("/-", i):
            j, closed = block_comment_span(text, i)
            open_comment = open_comment or not closed
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                open_string = True
            j = min(j + 1, n)
        elif text[i] == "'" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_'")):
            # A char literal ('a', '\n', '"'), not the prime of a name like h'.
            close = i + 3 if i + 1 < n and text[i + 1] == "\\" else i + 2
            j = close + 1 if close < n and text[close] == "'" else i + 1
        else:
            i += 1
            continue
        for k in range(i, j):
            mask[k] = True
        i = j
    return Trivia(mask, open_comment, open_string)


def comment_mask(text: str) -> list[bool]:
    """For every offset: is it inside a comment or string literal?"""
    return scan_trivia(text).mask


def _namespace_at(text: str, offset: int, mask: list[bool]) -> list[str]:
    stack: list[tuple[str, str]] = []
    for m in _NAMESPACE_RE.finditer(text, 0, offset):
        if mask[m.start()]:
            continue
        kind, name = m.group(1), m.group(2)
        if kind in ("namespace", "section"):
            stack.append((kind, name))
        elif stack:
            stack.pop()
    return [part for kind, name in stack if kind == "namespace" for part in name.split(".")]


def declaration_end(text: str, start: int, mask: list[bool] | None = None) -> int:
    """Offset just after the last non-whitespace character of the command containing
    ``start``: the next line starting in column 0 (code or a comment that starts there) ends it.
    """
    mask = mask if mask is not None else comment_mask(text)
    stop = len(text)
    pos = text.find("\n", start)
    while pos != -1 and pos + 1 < len(text):
        line_start = pos + 1
        if not text[line_start].isspace():
            starts_comment = text.startswith(("--", "/-"), line_start)
            if not mask[line_start] or starts_comment:
                stop = line_start
                break
        pos = text.find("\n", line_start)
    end = stop
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def locate_body(text: str, theorem: str) -> BodySpan:
    """Find the proof body of ``theorem`` (fully qualified) in ``text``."""
    mask = comment_mask(text)
    matches = []
    for m in _DECL_RE.finditer(text):
        if mask[m.start()]:
            continue
        declared = m.group(2).removeprefix("_root_.")
        namespace = _namespace_at(text, m.start(), mask)
        full = (
            ".".join([*namespace, declared]) if not m.group(2).startswith("_root_.") else declared
        )
        if full == theorem:
            matches.append(m)
    if not matches:
        raise LocateError(f"theorem {theorem} not found")
    if len(matches) > 1:
        raise LocateError(f"theorem {theorem} is declared {len(matches)} times")
    m = matches[0]
    depth = 0
    i = m.end()
    while i < len(text):
        ch = text[i]
        if mask[i]:
            i += 1
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(":=", i):
            break
        elif (
            depth == 0
            and ch == "\n"
            and i + 1 < len(text)
            and not text[i + 1].isspace()
            and not mask[i + 1]
        ):
            raise LocateError(f"theorem {theorem} has no `:=` body (pattern matching?)")
        i += 1
    else:
        raise LocateError(f"theorem {theorem} has no `:=` body")
    start = i + 2
    end = declaration_end(text, start, mask)
    if end <= start:
        raise LocateError(f"theorem {theorem} has an empty body")
    return BodySpan(decl_start=m.start(), start=start, end=end)
