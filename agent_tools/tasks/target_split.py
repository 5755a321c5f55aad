"""Split a task file before its target command, so the prefix compiles once as a module. Pure.

Scoping commands are re-established after the import; module-local ones cannot be and are
listed. Whether a split is *used* is the caller's: Lean must confirm the statement is unchanged."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from lsp_bridge import (
    COMMENT_KINDS,
    LITERAL_KINDS,
    SCOPE_KEYWORDS,
    OpenScopes,
    TokenKind,
    lean_tokens,
    name_parts,
    scan_text,
    scope_commands,
)
from repl_pool import Header

_CONTEXT = {
    "namespace",
    "section",
    "end",
    "open",
    "universe",
    "universes",
    "variable",
    "set_option",
}
_MODIFIERS = {"noncomputable", "private", "protected", "public"}
_TRIVIA = {TokenKind.LINE_COMMENT, TokenKind.BLOCK_COMMENT}
MODULE_PREFIX = "LeanrigPrefix_"


@dataclass(frozen=True, slots=True)
class Command:
    start: int  # code point offsets, comments before it excluded
    end: int
    words: tuple[str, ...]  # identifier tokens, keywords included

    @property
    def keyword(self) -> str:
        """The keyword after modifiers (``noncomputable section`` → ``section``)."""
        for word in self.words:
            if word not in _MODIFIERS:
                return word
        return ""


@dataclass(frozen=True, slots=True)
class PrefixSplit:
    cut: int  # offset where the target command starts (column 0)
    commands: int  # commands in the prefix, after the header
    module_text: str  # the file up to ``cut``
    context: str  # re-established scoping commands, each ending with a line break
    digest: str  # of the module text (names the module)
    # First lines of module-local commands: a body may depend on them, the statement check
    # cannot see that, so a prefix with any is not used.
    module_local: tuple[str, ...] = ()
    unscoped: tuple[str, ...] = ()  # scoping commands not in column 0: cannot be replayed

    @property
    def module(self) -> str:
        return MODULE_PREFIX + self.digest

    def head(self, text: str, header: Header) -> str:
        """The session document up to the target command; ends with a line break."""
        return text[: header.end] + f"\nimport {self.module}\n" + self.context

    def document(self, text: str, header: Header) -> str:
        return self.head(text, header) + text[self.cut :]


def commands(text: str, start: int, stop: int) -> list[Command]:
    """The column-0 commands in ``text[start:stop]``, doc comments and ``@[…]`` included."""
    out: list[Command] = []
    begin = -1
    end = start
    words: list[str] = []
    only_preamble = False  # the command so far is a doc comment and/or attributes
    depth = 0
    for token in lean_tokens(text, start):
        if token.start >= stop:
            break
        if token.kind in _TRIVIA:
            continue
        column0 = token.start == 0 or text[token.start - 1] == "\n"
        if column0 and not (begin >= 0 and only_preamble and depth == 0):
            if begin >= 0:
                out.append(Command(begin, end, tuple(words)))
            begin, words, only_preamble, depth = token.start, [], True, 0
        if begin < 0:
            continue
        snippet = token.text(text)
        preamble = token.kind is TokenKind.DOC_COMMENT or (snippet == "@" and depth == 0)
        if preamble and only_preamble:
            pass
        elif snippet == "[" and only_preamble:
            depth += 1
        elif snippet == "]" and only_preamble and depth > 0:
            depth -= 1
        elif depth == 0:
            only_preamble = False
        if token.kind is TokenKind.IDENT and depth == 0:
            words.append(snippet)
        end = token.end
    if begin >= 0:
        out.append(Command(begin, end, tuple(words)))
    return out


def _wrapper_in(text: str, cmd: Command) -> int | None:
    """Offset of the ``in`` ending a ``… in`` wrapper ``cmd``; None: ``cmd`` is no wrapper."""
    if "in" not in cmd.words:
        return None
    last_in: int | None = None
    depth = 0
    for token in lean_tokens(text, cmd.start):
        if token.start >= cmd.end:
            break
        if token.kind in _TRIVIA:
            continue
        snippet = token.text(text)
        if token.kind is TokenKind.IDENT and snippet == "in" and depth == 0:
            last_in = token.start
        elif last_in is not None and token.kind is not TokenKind.DOC_COMMENT:
            if snippet == "@" and depth == 0:
                continue
            if snippet == "[":
                depth += 1
            elif snippet == "]" and depth > 0:
                depth -= 1
            elif depth == 0:
                last_in = None
    return last_in


def _wraps(text: str, cmd: Command) -> bool:
    return _wrapper_in(text, cmd) is not None


def _target_command(text: str, cmds: list[Command], decl_start: int) -> int | None:
    """Index in ``cmds`` of the target's command, or of the first ``… in`` wrapping it."""
    i = next(
        (k for k, c in enumerate(cmds) if c.start <= decl_start < max(c.end, c.start + 1)), None
    )
    if i is None:
        return None
    while i > 0 and _wraps(text, cmds[i - 1]):
        i -= 1
    return i


def scope_wrappers(text: str, header_end: int, decl_start: int) -> tuple[int, ...]:
    """Offsets of the ``in`` of the ``… in`` commands wrapping the target, for ``unwrap``."""
    cmds = commands(text, header_end, len(text))
    first = _target_command(text, cmds, decl_start)
    if first is None:
        return ()
    return tuple(
        offset
        for c in cmds[first:]
        if c.start < decl_start and (offset := _wrapper_in(text, c)) is not None
    )


def all_wrappers(text: str, start: int = 0) -> tuple[int, ...]:
    """Offsets of the ``in`` of every ``… in`` command in ``text[start:]``, for ``unwrap``."""
    cmds = commands(text, start, len(text))
    return tuple(offset for c in cmds[:-1] if (offset := _wrapper_in(text, c)) is not None)


def unwrap(text: str, wrappers: tuple[int, ...]) -> str:
    """``text`` with each ``in`` at ``wrappers`` blanked; positions are unchanged."""
    for offset in wrappers:
        text = text[:offset] + "  " + text[offset + 2 :]
    return text


def split_prefix(text: str, header: Header, decl_start: int) -> PrefixSplit | None:
    """Split ``text`` before the target's command and its wrappers; None: nothing to split off."""
    cmds = commands(text, header.end, len(text))
    index = _target_command(text, cmds, decl_start)
    target = cmds[index] if index is not None else None
    if target is None or target.start <= header.end:
        return None
    prefix = [c for c in cmds if c.end <= target.start]
    module_text = text[: target.start]
    # `end`s closing a `mutual` block are not replayed.
    own = {_scope_at(text, c) for c in prefix if c.keyword in SCOPE_KEYWORDS}
    closes_mutual: set[int] = set()
    unscoped: list[str] = []
    scopes = OpenScopes()
    for scope in scope_commands(module_text, (0, header.end)):
        if scope.start not in own:
            unscoped.append(_line_at(text, scope.start))
        if scope.keyword == "end" and scopes.in_mutual:
            closes_mutual.add(scope.start)
        scopes.apply(scope)
    context: list[str] = []
    for cmd in prefix:
        keyword = cmd.keyword
        if keyword == "mutual" or (keyword == "end" and _scope_at(text, cmd) in closes_mutual):
            continue
        if keyword not in _CONTEXT or cmd.words[0] in ("private", "protected"):
            continue
        if "in" in cmd.words and keyword in ("open", "set_option", "variable"):
            continue  # scoped to one command
        context.append(text[cmd.start : cmd.end] + "\n")
    digest = hashlib.sha256(module_text.encode()).hexdigest()[:16]
    return PrefixSplit(
        unscoped=tuple(unscoped),
        cut=target.start,
        commands=len(prefix),
        module_text=module_text,
        context="".join(context),
        digest=digest,
        module_local=tuple(
            text[c.start : c.end].split("\n", 1)[0][:80] for c in prefix if _module_local(text, c)
        ),
    )


def _line_at(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : end if end != -1 else len(text)][:80]


def _scope_at(text: str, cmd: Command) -> int:
    for token in lean_tokens(text, cmd.start):
        if token.kind is TokenKind.IDENT and token.text(text) == cmd.keyword:
            return token.start
        if token.start >= cmd.end:
            break
    return -1


_LOCAL_WORDS = {"private", "local"}  # keywords: never an identifier in a term
_LOCAL_COMMANDS = {"seal", "unseal"}
_ERASED_ATTRIBUTE = re.compile(r"\[[^\]]*(?<![\w'.])-\s*[\w«]")  # `attribute [-simp] f`


def _module_local(text: str, cmd: Command) -> bool:
    """Does ``cmd`` declare or set something that stays in its module?"""
    if cmd.keyword in _LOCAL_COMMANDS or not _LOCAL_WORDS.isdisjoint(cmd.words):
        return True
    command = text[cmd.start : cmd.end]
    if "@[" not in command and cmd.keyword != "attribute":
        return False
    # ``Command.words`` leaves out what is inside ``@[…]``.
    code = scan_text(command).blank(command, COMMENT_KINDS | LITERAL_KINDS)
    return bool(_LOCAL_WORDS & set(re.findall(r"[\w']+", code))) or (
        cmd.keyword == "attribute" and _ERASED_ATTRIBUTE.search(code) is not None
    )


def exit_after(text: str, start: int) -> int | None:
    """Offset of the first ``#exit`` in ``text[start:]`` in any column (None: none)."""
    hash_at = -1
    for token in lean_tokens(text, start):
        if token.kind in COMMENT_KINDS:
            continue
        ident = token.kind is TokenKind.IDENT
        if ident and hash_at >= 0 and token.start == hash_at + 1 and token.text(text) == "exit":
            return hash_at
        hash_at = token.start if token.kind is TokenKind.SYMBOL and text[token.start] == "#" else -1
    return None


def insert_before_exit(document: str, text: str, exit_at: int, insert: str) -> tuple[str, int]:
    """``document`` (of task file ``text``) with ``insert`` before ``text``'s ``#exit`` at
    ``exit_at``, and the offset where it went in."""
    at = len(document) - (len(text) - exit_at)
    return document[:at] + insert + document[at:], at


def check_command(theorem: str) -> str:
    """Commands printing the target's statement under ``pp.all``, from any namespace."""
    name = ".".join(f"«{part}»" for part in name_parts(theorem))
    return f"\nset_option pp.all true in\nset_option pp.rawOnError true in\n#check @_root_.{name}\n"
