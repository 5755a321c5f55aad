"""Locate a theorem's proof body in a trusted task file (the suite author's contract). Pure.

The body runs from the signature's ``:=`` to the next column-0 line or indented command, trailing
whitespace excluded. Whether an *edited* body stays inside is Lean's parse's call (body_scope)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lsp_bridge import (
    COMMAND_KEYWORDS,
    COMMENT_KINDS,
    LITERAL_KINDS,
    LeanrigError,
    LeanToken,
    TokenKind,
    lean_tokens,
    name_parts,
    scan_text,
    scopes_at,
)

# One level of nested brackets inside (`@[aesop safe [constructors]]`).
_ATTRS = r"@\[(?:[^\[\]]|\[[^\]]*\])*\]"
_DECL_RE = re.compile(
    rf"^(?:{_ATTRS}\s*)?"
    r"(?:(?:private|protected|public|noncomputable|nonrec|unsafe|partial)\s+)*"
    r"(?:theorem|lemma)\s+",
    re.MULTILINE,
)
# Term binders whose own `:=` may come before the signature's (`: let r := … ; r :=`).
_BINDER_RE = re.compile(r"(?<![\w.'!?])(?:let|have|haveI|letI)(?![\w.'!?])")
_OPEN = "([{⟨⦃"
_CLOSE = ")]}⟩⦄"
_OPAQUE = COMMENT_KINDS | LITERAL_KINDS | {TokenKind.IDENT}


class LocateError(LeanrigError, ValueError):
    """A theorem's body cannot be found in a file; callers re-raise it with their own hint."""


@dataclass(frozen=True, slots=True)
class BodySpan:
    decl_start: int  # offset of the declaration, modifiers/attributes included
    start: int  # offset just after `:=`
    end: int  # offset just after the declaration's last non-whitespace character

    def body(self, text: str) -> str:
        return text[self.start : self.end]


@dataclass(frozen=True, slots=True)
class Trivia:
    mask: list[bool]  # per offset: inside a comment or a string/char literal
    unterminated_comment: bool
    unterminated_string: bool
    unterminated_escape: bool = False  # an unclosed «name»


def scan_trivia(text: str) -> Trivia:
    """Where the comments and literals of Lean source are, and whether any is unterminated."""
    scan = scan_text(text)
    return Trivia(
        scan.mask(),
        unterminated_comment=bool(scan.unterminated(COMMENT_KINDS)),
        unterminated_string=bool(scan.unterminated({TokenKind.STRING, TokenKind.RAW_STRING})),
        unterminated_escape=bool(scan.unterminated({TokenKind.IDENT})),
    )


def comment_mask(text: str) -> list[bool]:
    """For every offset: is it inside a comment or string literal?"""
    return scan_text(text).mask()


def _word_at(text: str, offset: int) -> str:
    token = next(lean_tokens(text, offset), None)
    if token is None or token.start != offset or token.kind is not TokenKind.IDENT:
        return ""
    return token.text(text)


def declaration_head(text: str, decl_start: int) -> tuple[int, int]:
    """Where Lean reports an error of the whole declaration: from its doc comment (if right
    before it) or ``decl_start`` to the end of its name."""
    start = decl_start
    docs = scan_text(text[:decl_start]).of({TokenKind.DOC_COMMENT})
    if docs and docs[-1].terminated and not text[docs[-1].end : decl_start].strip():
        start = docs[-1].start
    m = _DECL_RE.match(text, decl_start)
    end = m.end() + len(_word_at(text, m.end())) if m is not None else decl_start
    return start, end


def declaration_end(text: str, start: int, mask: list[bool] | None = None) -> int:
    """Offset after the last non-whitespace of the command containing ``start``.

    ``mask``: ``comment_mask(text)`` or a wider mask, if the caller has it."""
    mask = mask if mask is not None else comment_mask(text)
    stop = len(text)
    pos = text.find("\n", start)
    while pos != -1 and pos + 1 < len(text):
        line_start = pos + 1
        # A line break is masked only inside a span that continues on the next line.
        continued = mask[line_start] and mask[pos]
        if not continued and (
            not text[line_start].isspace() or _starts_command(text, start, line_start)
        ):
            stop = line_start
            break
        pos = text.find("\n", line_start)
    end = stop
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


# `open` and `set_option` also start terms and tactics (`open Foo in e`).
_COMMAND_STARTS = COMMAND_KEYWORDS - {"open", "set_option", "unsafe"}
_SCOPED_STARTS = frozenset({"open", "set_option"})
# Not `#[1, 2]`, `#v[…]`, nor Mathlib's `#adaptation_note` (used inside proofs).
_HASH_COMMANDS = frozenset(
    {
        "check",
        "check_failure",
        "eval",
        "eval!",
        "print",
        "exit",
        "reduce",
        "synth",
        "guard_msgs",
        "guard",
        "guard_expr",
        "help",
        "lint",
        "where",
        "version",
        "find",
        "time",
        "count_heartbeats",
        "simp",
        "norm_num",
        "conv",
        "align",
        "align_import",
        "noalign",
    }
)


def _starts_command(text: str, body_start: int, line_start: int) -> bool:
    """Does the line at ``line_start`` start a command (Lean needs no column 0)?"""
    line_end = text.find("\n", line_start)
    line_end = len(text) if line_end == -1 else line_end
    tokens = lean_tokens(text, line_start)
    first = next((t for t in tokens if t.kind not in _PLAIN_COMMENTS), None)
    if first is None or first.start >= line_end:
        return False
    piece = first.text(text)
    if piece == "#":
        after = next(tokens, None)
        return after is not None and after.start == first.end and after.text(text) in _HASH_COMMANDS
    if first.kind is TokenKind.DOC_COMMENT or (piece == "@" and text.startswith("[", first.end)):
        if _next_word(text, tokens) in COMMAND_KEYWORDS:
            return True
        return not _after_where(text, body_start, line_start)
    if first.kind is not TokenKind.IDENT:
        return False
    if piece == "unsafe":
        return _next_word(text, tokens) in COMMAND_KEYWORDS
    if piece in _SCOPED_STARTS:
        for t in tokens:
            if t.start >= line_end:
                return True
            if t.kind is TokenKind.IDENT and t.text(text) == "in":
                return _next_word(text, tokens) in COMMAND_KEYWORDS
        return True
    return piece in _COMMAND_STARTS


_PLAIN_COMMENTS = frozenset({TokenKind.LINE_COMMENT, TokenKind.BLOCK_COMMENT})


def _next_word(text: str, tokens: Iterator[LeanToken]) -> str:
    """The next identifier past comments and attributes ("" when other code comes first)."""
    depth = 0
    for t in tokens:
        if t.kind in COMMENT_KINDS:
            continue
        piece = t.text(text)
        if piece == "[":
            depth += 1
        elif piece == "]" and depth:
            depth -= 1
        elif depth == 0 and piece != "@":
            return piece if t.kind is TokenKind.IDENT else ""
    return ""


def _after_where(text: str, body_start: int, line_start: int) -> bool:
    body = text[body_start:line_start]
    return any(t.kind is TokenKind.IDENT and t.text(body) == "where" for t in lean_tokens(body))


def _not_found_hint(text: str, opaque: list[bool], wanted: tuple[str, ...]) -> str:
    if not wanted:
        return ""
    last = re.escape(wanted[-1])
    for m in re.finditer(rf"(?<![\w.'!?])(?:theorem|lemma)\s+(?:[\w.'!?«»]*\.)?«?{last}", text):
        if not opaque[m.start()] and m.start() > 0 and text[m.start() - 1] != "\n":
            return (
                " at the start of a line: the `theorem` keyword must begin its line (attributes "
                "and modifiers may come before it; put a doc comment or a `… in` wrapper on the "
                "line above)"
            )
    return ""


def is_public(text: str, decl_start: int) -> bool:
    """Is the declaration at ``decl_start`` public under Lean's module system? Lexical."""
    m = _DECL_RE.match(text, decl_start)
    if m is not None and "public" in re.sub(_ATTRS, " ", m.group(0)).split():
        return True
    return scopes_at(text, [decl_start])[0].public


def locate_body(text: str, theorem: str) -> BodySpan:
    """Find the proof body of ``theorem`` (fully qualified) in ``text``."""
    opaque = scan_text(text).mask(_OPAQUE)
    wanted = name_parts(theorem)
    decls = [m for m in _DECL_RE.finditer(text) if not opaque[m.start()]]
    matches = []
    for m, scopes in zip(decls, scopes_at(text, [m.start() for m in decls]), strict=True):
        declared = name_parts(_word_at(text, m.end()))
        full = declared[1:] if declared[:1] == ("_root_",) else (*scopes.namespace, *declared)
        if declared and full == wanted:
            matches.append((m, scopes.in_mutual))
    if not matches:
        raise LocateError(f"theorem {theorem} not found" + _not_found_hint(text, opaque, wanted))
    if len(matches) > 1:
        raise LocateError(f"theorem {theorem} is declared {len(matches)} times")
    m, mutual = matches[0]
    if mutual:
        # Document symbols leave out `mutual` declarations: the scope check would reject all.
        raise LocateError(f"theorem {theorem} is inside a `mutual` block (not supported)")
    if "private" in re.sub(_ATTRS, " ", m.group(0)).split():
        raise LocateError(
            f"theorem {theorem} is private: the verdict cannot name it from another module "
            "(drop `private`)"
        )
    depth = 0
    binders = 0  # `let`/`have` in the statement whose `:=` is still to come
    i = m.end()
    while i < len(text):
        ch = text[i]
        if opaque[i]:
            i += 1
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif depth == 0 and _BINDER_RE.match(text, i):
            binders += 1
        elif depth == 0 and text.startswith(":=", i):
            if not binders:
                break
            binders -= 1
            i += 1
        elif (
            depth == 0
            and ch == "\n"
            and i + 1 < len(text)
            and not text[i + 1].isspace()
            and not opaque[i + 1]
            and not text.startswith(":=", i + 1)
        ):
            raise LocateError(f"theorem {theorem} has no `:=` body (pattern matching?)")
        i += 1
    else:
        raise LocateError(f"theorem {theorem} has no `:=` body")
    start = i + 2
    end = declaration_end(text, start, opaque)
    if end <= start:
        raise LocateError(f"theorem {theorem} has an empty body")
    return BodySpan(decl_start=m.start(), start=start, end=end)


_ANY_DECL_RE = re.compile(
    rf"^(?:{_ATTRS}\s*)?"
    r"(?:(?:private|protected|public|noncomputable|nonrec|unsafe|partial)\s+)*"
    r"(?:theorem|lemma|def|abbrev|axiom|inductive|structure|class|instance|opaque)\s+",
    re.MULTILINE,
)


DeclarationIndex = dict[tuple[str, ...], tuple[int, int] | None]


def declaration_index(text: str) -> DeclarationIndex:
    """Every declaration's span by full name, doc comment included (None: declared twice)."""
    opaque = scan_text(text).mask(_OPAQUE)
    decls = [m for m in _ANY_DECL_RE.finditer(text) if not opaque[m.start()]]
    index: DeclarationIndex = {}
    for m, scopes in zip(decls, scopes_at(text, [m.start() for m in decls]), strict=True):
        declared = name_parts(_word_at(text, m.end()))
        if not declared:
            continue
        full = declared[1:] if declared[:1] == ("_root_",) else (*scopes.namespace, *declared)
        span = (declaration_head(text, m.start())[0], declaration_end(text, m.end(), opaque))
        index[full] = None if full in index else span
    return index


def declaration_source(
    text: str, name: str, index: DeclarationIndex | None = None
) -> tuple[int, int] | None:
    """``(start, end)`` of ``name``'s declaration, or its type's for a constructor or field.

    None: not declared in ``text``, or more than once."""
    index = declaration_index(text) if index is None else index
    wanted = name_parts(name)
    if wanted in index:
        return index[wanted]
    return index.get(wanted[:-1]) if len(wanted) > 1 else None
