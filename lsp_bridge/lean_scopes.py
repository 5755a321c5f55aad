"""Lean's scopes, read lexically: which ``namespace``/``section``/``mutual`` is open where. Pure.

The one scope tracker, so full names never disagree. As in Lean, a scope is one entry per name
component (``namespace A.B`` opens two) and a scope's name is never a keyword."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .lean_text import COMMENT_KINDS, LeanToken, TokenKind, lean_tokens, name_parts

# After `section` or `end`, such a word is the next command, not the scope's name.
COMMAND_KEYWORDS = frozenset(
    {
        "axiom",
        "theorem",
        "lemma",
        "def",
        "abbrev",
        "instance",
        "structure",
        "inductive",
        "class",
        "opaque",
        "example",
        "namespace",
        "section",
        "end",
        "open",
        "variable",
        "universe",
        "set_option",
        "noncomputable",
        "private",
        "protected",
        "public",
        "unsafe",
        "partial",
        "nonrec",
        "mutual",
        "attribute",
        "export",
        "local",
        "scoped",
        "omit",
        "include",
        "macro",
        "syntax",
        "notation",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "elab",
        "deriving",
        "initialize",
        "builtin_initialize",
        "meta",
        "macro_rules",
        "elab_rules",
        "declare_syntax_cat",
        "add_decl_doc",
        "register_option",
        "irreducible_def",
        "notation3",
        "alias",
    }
)
SCOPE_KEYWORDS = frozenset({"namespace", "section", "mutual", "end"})


@dataclass(frozen=True, slots=True)
class ScopeCommand:
    """One ``namespace``/``section``/``mutual``/``end`` command."""

    start: int  # offset of its keyword
    keyword: str
    name: tuple[str, ...] = ()  # as written (``name_parts``), () if none
    public: bool = False  # `public section`


def scope_commands(text: str, skip: tuple[int, int] = (0, 0)) -> Iterator[ScopeCommand]:
    """The scoping commands of ``text`` in order, except those in ``skip`` (``[start, end)``)."""
    tokens = _outside_quotations(text)
    line_words: list[str] = []
    previous = 0
    pending: tuple[int, str, bool] | None = None  # a keyword whose name may come next
    for token in tokens:
        word = token.text(text) if token.kind is TokenKind.IDENT else ""
        if text.find("\n", previous, token.start) != -1:
            line_words = []
        previous = token.start
        if pending is not None:
            at, keyword, public = pending
            pending = None
            if word and word not in COMMAND_KEYWORDS and _names_scope(text, at, token.start):
                yield ScopeCommand(at, keyword, name_parts(word), public)
                line_words.append(word)
                continue
            yield ScopeCommand(at, keyword, (), public)
        if word in SCOPE_KEYWORDS and not skip[0] <= token.start < skip[1]:
            public = word == "section" and "public" in line_words
            if word == "mutual":
                yield ScopeCommand(token.start, word)
            else:
                pending = (token.start, word, public)
        line_words.append(word)
    if pending is not None:
        at, keyword, public = pending
        yield ScopeCommand(at, keyword, (), public)


def _outside_quotations(text: str) -> Iterator[LeanToken]:
    """The code tokens of ``text`` outside syntax quotations (`` `(…) ``): no commands there."""
    depth = 0  # parentheses open inside a quotation
    backtick = -1
    for token in lean_tokens(text):
        if token.kind in COMMENT_KINDS:
            continue
        piece = text[token.start : token.end] if token.kind is TokenKind.SYMBOL else ""
        if depth:
            depth += (piece == "(") - (piece == ")")
        elif piece == "(" and token.start == backtick:
            depth = 1
        else:
            backtick = token.end if piece == "`" else -1
            yield token


def _column(text: str, offset: int) -> int:
    return offset - (text.rfind("\n", 0, offset) + 1)


def _names_scope(text: str, keyword: int, name: int) -> bool:
    """Does the identifier at ``name`` name the scope at ``keyword`` (Lean's ``checkColGt``)?"""
    line_start = text.rfind("\n", 0, keyword) + 1
    if text.find("\n", keyword, name) == -1:
        return True
    command_column = len(text[line_start:keyword]) - len(text[line_start:keyword].lstrip(" \t"))
    return _column(text, name) > command_column


@dataclass(slots=True)
class OpenScopes:
    """The scopes open at a point of a file: apply each ``ScopeCommand`` before it, in order."""

    # (keyword, name part or "", public section?) per open component.
    entries: list[tuple[str, str, bool]] = field(default_factory=list)

    def apply(self, command: ScopeCommand) -> None:
        parts = command.name or ("",)
        if command.keyword == "end":
            del self.entries[max(0, len(self.entries) - len(parts)) :]
        else:
            self.entries += [(command.keyword, part, command.public) for part in parts]

    @property
    def namespace(self) -> tuple[str, ...]:
        """The current namespace's components (``namespace A.B`` → ``("A", "B")``)."""
        return tuple(part for keyword, part, _ in self.entries if keyword == "namespace")

    @property
    def in_mutual(self) -> bool:
        return bool(self.entries) and self.entries[-1][0] == "mutual"

    @property
    def public(self) -> bool:
        return any(public for _, _, public in self.entries)


def scopes_at(text: str, offsets: list[int], skip: tuple[int, int] = (0, 0)) -> list[OpenScopes]:
    """The scopes open at each of ``offsets`` (ascending), one scan of ``text``."""
    out: list[OpenScopes] = []
    scopes = OpenScopes()
    commands = scope_commands(text, skip)
    command = next(commands, None)
    for offset in offsets:
        while command is not None and command.start < offset:
            scopes.apply(command)
            command = next(commands, None)
        out.append(OpenScopes(list(scopes.entries)))
    return out


DECLARATION_KEYWORDS = frozenset(
    {
        "theorem",
        "lemma",
        "def",
        "abbrev",
        "instance",
        "structure",
        "inductive",
        "class",
        "opaque",
        "axiom",
    }
)


@dataclass(frozen=True, slots=True)
class Declaration:
    """One declaration of a file; ``name`` is full (namespaces prefixed, ``_root_.`` dropped)."""

    keyword: str
    name: tuple[str, ...]
    keyword_start: int
    name_start: int
    modifiers: tuple[str, ...] = ()

    @property
    def full_name(self) -> str:
        """The name as Lean prints it, escaping parts that need it (``A.«my thm»``)."""
        return ".".join(p if _PLAIN_NAME_PART.fullmatch(p) else f"«{p}»" for p in self.name)


_PLAIN_NAME_PART = re.compile(r"[^\W\d][\w'!?]*")
_DECL_MODIFIERS = frozenset(
    {"noncomputable", "private", "protected", "public", "unsafe", "partial", "nonrec"}
)


def declarations(text: str) -> list[Declaration]:
    """The named declarations (``DECLARATION_KEYWORDS``) of ``text`` where a command can start."""
    found: list[tuple[str, tuple[str, ...], int, int, tuple[str, ...]]] = []
    tokens = list(_outside_quotations(text))
    depth = 0
    for i, token in enumerate(tokens):
        piece = token.text(text)
        if token.kind is TokenKind.SYMBOL:
            depth += (piece in "([{⟨⦃") - (piece in ")]}⟩⦄")
            depth = max(depth, 0)
            continue
        if token.kind is not TokenKind.IDENT or piece not in DECLARATION_KEYWORDS or depth:
            continue
        if i + 1 >= len(tokens) or tokens[i + 1].kind is not TokenKind.IDENT:
            continue
        following = tokens[i + 1].text(text)
        if following in DECLARATION_KEYWORDS:  # `class inductive`: the second declares
            continue
        modifiers: list[str] = []
        j = i - 1
        while j >= 0 and tokens[j].kind is TokenKind.IDENT:
            word = tokens[j].text(text)
            if word not in _DECL_MODIFIERS and word != "class":
                break
            modifiers.append(word)
            j -= 1
        if j >= 0 and tokens[j].text(text) == "deriving":
            continue
        found.append(
            (
                piece,
                name_parts(following),
                token.start,
                tokens[i + 1].start,
                tuple(reversed(modifiers)),
            )
        )
    scopes = scopes_at(text, [at for _, _, at, _, _ in found])
    out = []
    for (keyword, parts, at, name_at, mods), open_scopes in zip(found, scopes, strict=True):
        full = parts[1:] if parts[:1] == ("_root_",) else (*open_scopes.namespace, *parts)
        out.append(Declaration(keyword, full, at, name_at, mods))
    return out
