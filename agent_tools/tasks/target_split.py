"""The prefix of a task file as a module: split a task file at its target theorem. Pure.

Everything before the command that declares the target (the *prefix*) can be compiled once to
an ``.olean``; a session's Lean document is then the task's header plus ``import <prefix>``,
the scoping context re-established, and the file from the target command on. Lean's per-edit
cost follows the number of commands in the document, not the size of the environment
(lean-facts.md, "The prefix as a module"), so a step no longer grows with the prefix.

File-scoped context does not cross an import. Re-established here, in file order: ``namespace``,
``section`` (also ``noncomputable section``), ``end``, ``open``, ``universe``, ``variable``,
``set_option``. Not re-established: ``open … in`` and other ``… in`` commands (they scope a
single command only; a statement that needs them elaborates differently, and the caller's Lean
check falls back to the whole file). Module-local commands cannot be re-established and are
listed (``PrefixSplit.module_local``): ``private`` declarations (their names are module-local),
``local`` notation, instances and attributes, erased attributes (``attribute [-simp] f``),
``seal``/``unseal``. A *body* may depend on them (a private helper, an ``irreducible`` that
holds only in the file) where the target's statement does not, so the caller's check of the
statement cannot see it: a prefix with any of them is not used. The ``… in`` commands wrapping
the target itself are part of the target's command: the cut comes before them
(``scope_wrappers``).

Whether the split is *used* is not decided here: the caller must let Lean confirm that the
target's statement elaborates to the same type and universe parameters both ways.

Commands start in column 0 (the suite contract, as in locate.py); the lexing (comments,
strings, ``«»`` names) is lsp_bridge's ``lean_text``.
"""

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

_CONTEXT = {"namespace", "section", "end", "open", "universe", "universes", "variable",
            "set_option"}  # fmt: skip
_MODIFIERS = {"noncomputable", "private", "protected", "public"}
_TRIVIA = {TokenKind.LINE_COMMENT, TokenKind.BLOCK_COMMENT}
MODULE_PREFIX = "LeanrigPrefix_"


@dataclass(frozen=True, slots=True)
class Command:
    start: int  # code point offsets of the command's text (comments before it excluded)
    end: int
    words: tuple[str, ...]  # its identifier tokens, in order (keywords lex as identifiers)

    @property
    def keyword(self) -> str:
        """The command's keyword after modifiers (``noncomputable section`` → ``section``)."""
        for word in self.words:
            if word not in _MODIFIERS:
                return word
        return ""


@dataclass(frozen=True, slots=True)
class PrefixSplit:
    """A task file split at its target command."""

    cut: int  # offset where the target command starts (column 0)
    commands: int  # commands in the prefix (after the header)
    module_text: str  # the prefix module: the file up to ``cut``
    context: str  # re-established scoping commands, each ending with a line break
    digest: str  # of the module text (names the module)
    # The prefix's module-local commands (`private` declarations, `local` attributes,
    # notations and instances, `seal`/`unseal`), each as its first line: they do not cross an
    # import, so a *body* may elaborate differently with the prefix imported (a private helper
    # unknown, an `attribute [local irreducible]` gone), which the caller's check of the
    # target's statement with the placeholder body cannot see.
    module_local: tuple[str, ...] = ()
    # Scoping commands the context cannot re-establish, each as its line: one that is not its
    # own column-0 command (an indented `end A`, `namespace A namespace B` on one line) is
    # part of another command's text here, while Lean reads it (lsp_bridge's `scope_commands`).
    unscoped: tuple[str, ...] = ()

    @property
    def module(self) -> str:
        return MODULE_PREFIX + self.digest

    def head(self, text: str, header: Header) -> str:
        """The session document up to the target command: header, the prefix import, the
        context. Ends with a line break, so the target command stays in column 0."""
        return text[: header.end] + f"\nimport {self.module}\n" + self.context

    def document(self, text: str, header: Header) -> str:
        """The session document for ``text`` (the task file with any body)."""
        return self.head(text, header) + text[self.cut :]


def commands(text: str, start: int, stop: int) -> list[Command]:
    """The top-level commands in ``text[start:stop]``: each starts at a token in column 0 (a doc
    comment or ``@[…]`` attributes belong to the command that follows them)."""
    out: list[Command] = []
    begin = -1
    end = start
    words: list[str] = []
    only_preamble = False  # the command so far is a doc comment and/or attributes
    depth = 0  # brackets of `@[...]`
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
            continue  # text before the first command (cannot happen after a header)
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
    """Offset of the ``in`` that ends ``cmd`` when it is ``set_option … in``, ``open … in``,
    ``variable … in``… (it scopes the command after it); a doc comment or ``@[…]`` after the
    ``in`` on its line belongs to that next command. None: ``cmd`` is no wrapper."""
    if "in" not in cmd.words:
        return None
    last_in: int | None = None
    depth = 0  # inside `@[…]` after the `in`
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
                last_in = None  # code after the `in`: it is not the command's end
    return last_in


def _wraps(text: str, cmd: Command) -> bool:
    return _wrapper_in(text, cmd) is not None


def _target_command(text: str, cmds: list[Command], decl_start: int) -> int | None:
    """Index in ``cmds`` of the target's command: its declaration, or the first of the
    ``… in`` commands wrapping it (``set_option maxHeartbeats 400000 in`` on the line above)."""
    i = next(
        (k for k, c in enumerate(cmds) if c.start <= decl_start < max(c.end, c.start + 1)), None
    )
    if i is None:
        return None
    while i > 0 and _wraps(text, cmds[i - 1]):
        i -= 1
    return i


def scope_wrappers(text: str, header_end: int, decl_start: int) -> tuple[int, ...]:
    """Offsets of the ``in`` tokens of the ``… in`` commands wrapping the target declaration.

    Lean's document symbols leave out a declaration inside ``c in d`` (and the scope check
    reads them), so the text Lean's scope parse sees has these ``in`` blanked (``unwrap``): the
    wrappers become plain commands right before the declaration. ``c in d`` is ``section c d
    end``, so the target elaborates the same; the wrappers' scope then runs on past it, over
    the commands after the body."""
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
    """Offsets of the ``in`` of every ``… in`` command in ``text[start:]`` (column-0 commands,
    as ``commands``): what ``unwrap`` needs so that Lean's document symbols list every
    declaration of a file, wrapped ones too."""
    cmds = commands(text, start, len(text))
    return tuple(offset for c in cmds[:-1] if (offset := _wrapper_in(text, c)) is not None)


def unwrap(text: str, wrappers: tuple[int, ...]) -> str:
    """``text`` with the two characters at each offset in ``wrappers`` (``in``) made spaces:
    the same length and lines, so positions need no translation."""
    for offset in wrappers:
        text = text[:offset] + "  " + text[offset + 2 :]
    return text


def split_prefix(text: str, header: Header, decl_start: int) -> PrefixSplit | None:
    """Split ``text`` before the command declaring the target (which starts at or before
    ``decl_start``: a doc comment or attributes belong to it, and so do the ``… in`` commands
    wrapping it). None: nothing to split off."""
    cmds = commands(text, header.end, len(text))
    index = _target_command(text, cmds, decl_start)
    target = cmds[index] if index is not None else None
    if target is None or target.start <= header.end:
        return None
    prefix = [c for c in cmds if c.end <= target.start]
    module_text = text[: target.start]
    # One pass of lsp_bridge's scope tracker over the prefix: the `end`s that close a `mutual`
    # block (not a scope, not replayed), and the scoping commands that are not a column-0
    # command of their own (``unscoped``: the context below cannot replay them).
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
            continue  # `open Foo in <command>`: scoped to that one command
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
    """The line holding ``offset``, at most 80 characters."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : end if end != -1 else len(text)][:80]


def _scope_at(text: str, cmd: Command) -> int:
    """Offset of ``cmd``'s keyword (after modifiers and attributes)."""
    for token in lean_tokens(text, cmd.start):
        if token.kind is TokenKind.IDENT and token.text(text) == cmd.keyword:
            return token.start
        if token.start >= cmd.end:
            break
    return -1


_LOCAL_WORDS = {"private", "local"}  # keywords: never an identifier in a term
_LOCAL_COMMANDS = {"seal", "unseal"}  # `attribute [local irreducible]` / `[local semireducible]`
_ERASED_ATTRIBUTE = re.compile(r"\[[^\]]*(?<![\w'.])-\s*[\w«]")  # `attribute [-simp] f`


def _module_local(text: str, cmd: Command) -> bool:
    """Does ``cmd`` declare or set something that stays in its module (``private``, ``local``
    anywhere in it, attributes included: ``@[local simp]``, ``attribute [local …]``,
    ``local notation``; an erased attribute ``attribute [-simp] f``; ``seal``/``unseal``)?"""
    if cmd.keyword in _LOCAL_COMMANDS or not _LOCAL_WORDS.isdisjoint(cmd.words):
        return True
    command = text[cmd.start : cmd.end]
    if "@[" not in command and cmd.keyword != "attribute":
        return False
    # In attributes too (``Command.words`` leaves out what is inside ``@[…]``).
    code = scan_text(command).blank(command, COMMENT_KINDS | LITERAL_KINDS)
    return bool(_LOCAL_WORDS & set(re.findall(r"[\w']+", code))) or (
        cmd.keyword == "attribute" and _ERASED_ATTRIBUTE.search(code) is not None
    )


def exit_after(text: str, start: int) -> int | None:
    """Offset of the first ``#exit`` command in ``text[start:]`` (None: none), comments and
    literals skipped, wherever it stands on its line: Lean stops at an indented ``#exit`` or one
    after another command on the same line too, so what is meant to run must go before it."""
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
    """``document`` (a session document of the task file ``text``, whose text after the body is
    the task file's in every view) with ``insert`` right before the ``#exit`` at ``exit_at``
    of ``text`` (``exit_after``), and the offset where it went in."""
    at = len(document) - (len(text) - exit_at)
    return document[:at] + insert + document[at:], at


def check_command(theorem: str) -> str:
    """Commands that print the target's statement fully explicitly (``#check @T`` under
    ``pp.all``, the verifier's query), wherever they are appended (``_root_``: from any
    namespace)."""
    name = ".".join(f"«{part}»" for part in name_parts(theorem))
    return f"\nset_option pp.all true in\nset_option pp.rawOnError true in\n#check @_root_.{name}\n"
