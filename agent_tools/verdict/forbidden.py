"""The forbidden-construct policy: what a proof body may not contain, read from its code as
Lean reads it (comments ignored; ``«»``-escaped names resolved; attributes on the body's own
declarations limited to ``BODY_ATTRIBUTES``). The verdict rejects such a proof; a session says
so before the verdict would, and refuses outright what acts while Lean elaborates
(``ELABORATION_EFFECTS``).

Pure text: must not run Lean or read files, and must stay cheap (a session runs it on every
complete step).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lsp_bridge import COMMENT_KINDS, TokenKind, lean_tokens, name_parts, scan_text

FORBIDDEN = {
    "run_tac": "`run_tac` runs arbitrary code during elaboration",
    # The same in term, tactic or command position (a red-team sweep found `by_elab` missing).
    "by_elab": "`by_elab` runs arbitrary code during elaboration",
    "run_elab": "`run_elab` runs arbitrary code during elaboration",
    "run_meta": "`run_meta` runs arbitrary code during elaboration",
    "run_cmd": "`run_cmd` runs arbitrary code during elaboration",
    "open private": "`open private` reaches private declarations",
    "set_option debug.": "`set_option debug.*` can switch off kernel checks",
    "implemented_by": "`implemented_by` swaps code the kernel never checks",
    "extern": "`extern` binds unchecked native code",
    "unsafe": "`unsafe` escapes the kernel",
    "#exit": "`#exit` stops processing: later checks would never run",
    "#eval": "`#eval` runs arbitrary code during elaboration",
    "native_decide": "`native_decide` trusts the compiler (Lean.ofReduceBool)",
    "include_str": "`include_str` reads a file while Lean elaborates",
}
# What acts while Lean elaborates (runs code, reads files): a session refuses these before
# its Lean sees them (``effects_when_elaborated``), where an agent would read what its sandbox
# hides through Lean's messages; the rest Lean elaborates, and the session says the verdict
# rejects them.
ELABORATION_EFFECTS = frozenset(
    {"run_tac", "by_elab", "run_elab", "run_meta", "run_cmd", "#eval", "include_str"}
)


def forbidden_constructs(body: str) -> list[str]:
    """Reasons for constructs in the body's code (comments and strings ignored).

    Two views, either one suffices to reject: the masked text (any whitespace between the words
    of a construct) and Lean's tokens with ``«»``-escaped names resolved, so that
    ``set_option «debug».skipKernelTC`` or ``«native_decide»`` cannot slip past the text.
    And an attribute on the body's own declarations (a ``where`` helper's ``@[…]``) must be
    one of ``BODY_ATTRIBUTES``.

    Only the constructs whose every word occurs in the body, guillemets dropped, are looked
    for (either view needs those characters), and attributes only where a `[` follows `@` or
    `attribute`: a session runs this on every complete step, and the two views cost
    0.25-0.5 ms for a short body."""
    plain = body.replace("«", "").replace("»", "")
    candidates = _present(plain, FORBIDDEN)
    attributed = "[" in body and ("@" in body or "attribute" in plain)
    if not candidates and not attributed:
        return []
    words = _code_words(body)  # lexed once, for both
    names, inside = _attributes(words)
    found = _forbidden_in_code(body, candidates, words, inside) if candidates else []
    return found + [
        f"forbidden construct in the proof: attribute `{name}` (a proof's helpers may carry "
        f"only {', '.join(sorted(BODY_ATTRIBUTES))}: other attributes can run code when the "
        "proof is imported or change how later commands elaborate)"
        for name in dict.fromkeys(names)
        if name not in BODY_ATTRIBUTES and name not in ATTRIBUTE_ONLY
    ]


# Attributes a proof's own declarations (its `where` helpers) may carry: hints to the
# elaborator, simp and the compiler, which run no code of the proof's and leave the trusted
# query's `#check` and `#print axioms` as they are. Any other attribute may: `@[init]` runs its
# helper whenever the compiled submission is imported — in the verdict's query, where it could
# print the query's expected answers itself and exit (found by a red-team sweep) —,
# `@[command_elab]`/`@[macro]`/`@[term_elab]` change how the query's commands elaborate.
BODY_ATTRIBUTES = frozenset({
    "simp", "reducible", "irreducible", "semireducible", "inline", "noinline", "always_inline",
    "specialize", "nospecialize", "match_pattern", "ext", "norm_cast", "grind",
})  # fmt: skip


def effects_when_elaborated(body: str) -> list[str]:
    """``forbidden_constructs``' reasons for the constructs that act while Lean elaborates
    (``ELABORATION_EFFECTS``)."""
    candidates = _present(body.replace("«", "").replace("»", ""), sorted(ELABORATION_EFFECTS))
    return _forbidden_in_code(body, candidates) if candidates else []


def _present(plain: str, constructs: Iterable[str]) -> list[str]:
    """The constructs whose every word occurs in ``plain`` (the body, guillemets dropped): the
    only ones worth lexing the body for."""
    return [c for c in constructs if all(word in plain for word in c.split(" "))]


def _forbidden_in_code(
    body: str,
    constructs: Iterable[str],
    words: list[str] | None = None,
    in_attributes: set[str] | None = None,
) -> list[str]:
    """The reasons for ``constructs`` (``words``, ``in_attributes``: the body's, when the
    caller has them already)."""
    if words is None:
        words = _code_words(body)
    if in_attributes is None:
        in_attributes = _attributes(words)[1]
    # Comments only: a string literal may be interpolated (`s!"{include_str …}"`, and
    # `throwError "… {e}"`), its `{…}` code; a construct's words in a plain string refuse a
    # proof that no proof needs.
    mask = scan_text(body).mask(COMMENT_KINDS)
    code = "".join(" " if mask[i] else ch for i, ch in enumerate(body))
    found = []
    for construct in constructs:
        if construct in ATTRIBUTE_ONLY:
            hit = construct in in_attributes
        else:
            hit = _FORBIDDEN_TEXT[construct].search(code) is not None or _has_words(
                words, construct
            )
        if hit:
            found.append(f"forbidden construct in the proof: {FORBIDDEN[construct]}")
    return found


# Constructs that are attributes: they act only inside `@[…]` (or `attribute […]`); anywhere
# else the word is an ordinary identifier (`fun extern h => …` is a proof like any other).
ATTRIBUTE_ONLY = frozenset({"extern", "implemented_by"})


def _attributes(words: list[str]) -> tuple[list[str], set[str]]:
    """Inside attribute brackets — ``@[…]`` (also written ``@ […]``) and ``attribute […]``,
    nested brackets included —: the attribute of each instance (the first word after ``[`` or
    a top-level ``,``, past ``local`` / ``scoped``: ``@[local simp, init f]`` → ``simp``,
    ``init``; a bracket or symbol there names itself, never on the list), and every word."""
    names: list[str] = []
    inside: set[str] = set()
    depth = 0
    expect = False  # the next word names an attribute
    for i, word in enumerate(words):
        if depth:
            if expect and word not in ("local", "scoped"):
                names.append(word)
                expect = False
            if word == "[":
                depth += 1
            elif word == "]":
                depth -= 1
            else:
                inside.add(word)
                expect = expect or (word == "," and depth == 1)
        elif word == "[" and i > 0 and words[i - 1] in ("@", "attribute"):
            depth, expect = 1, True
    return names, inside


def _forbidden_text(construct: str) -> re.Pattern[str]:
    pattern = r"\s+".join(re.escape(word) for word in construct.split(" "))
    tail = r"(?![\w'])" if construct[-1].isalnum() else ""
    return re.compile(r"(?<![\w.])" + pattern + tail)


_FORBIDDEN_TEXT = {construct: _forbidden_text(construct) for construct in FORBIDDEN}


def _code_words(body: str) -> list[str]:
    """The body's code tokens as Lean reads them: identifiers unescaped (``«debug».x`` →
    ``debug.x``), ``#`` glued to the identifier it prefixes (``#exit``), trivia dropped."""
    words: list[str] = []
    glue = -1  # end offset of a `#` that the next identifier belongs to
    for tok in lean_tokens(body):
        if tok.kind in COMMENT_KINDS:
            continue
        text = tok.text(body)
        if tok.kind is TokenKind.IDENT:
            name = ".".join(name_parts(text))
            if tok.start == glue and words:
                words[-1] = "#" + name
            else:
                words.append(name)
        else:
            words.append(text)
        glue = tok.end if text == "#" else -1
    return words


def _has_words(words: list[str], construct: str) -> bool:
    parts = construct.split(" ")
    last = parts[-1]
    prefix = last.endswith(".")  # `set_option debug.`: any option under debug
    for i in range(len(words) - len(parts) + 1):
        *head, tail = words[i : i + len(parts)]
        if head != parts[:-1]:
            continue
        if tail == last or (prefix and tail.startswith(last)):
            return True
    return False
