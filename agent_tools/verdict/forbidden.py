"""The forbidden-construct policy: what a proof body may not contain, read as Lean reads it.

Pure text: must not run Lean or read files, and must stay cheap (sessions run it on every step)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from lsp_bridge import COMMENT_KINDS, TokenKind, lean_tokens, name_parts, scan_text

FORBIDDEN = {
    "run_tac": "`run_tac` runs arbitrary code during elaboration",
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
# A session refuses these before its Lean sees them: through Lean's messages an agent could
# read what its sandbox hides.
ELABORATION_EFFECTS = frozenset(
    {"run_tac", "by_elab", "run_elab", "run_meta", "run_cmd", "#eval", "include_str"}
)


def forbidden_constructs(body: str) -> list[str]:
    """Reasons for forbidden constructs and attributes in the body's code. Either view rejects:
    the comment-masked text, or Lean's tokens with ``«»`` names resolved."""
    plain = body.replace("«", "").replace("»", "")
    candidates = _present(plain, FORBIDDEN)
    attributed = "[" in body and ("@" in body or "attribute" in plain)
    if not candidates and not attributed:
        return []
    words = _code_words(body)
    names, inside = _attributes(words)
    found = _forbidden_in_code(body, candidates, words, inside) if candidates else []
    return found + [
        f"forbidden construct in the proof: attribute `{name}` (a proof's helpers may carry "
        f"only {', '.join(sorted(BODY_ATTRIBUTES))}: other attributes can run code when the "
        "proof is imported or change how later commands elaborate)"
        for name in dict.fromkeys(names)
        if name not in BODY_ATTRIBUTES and name not in ATTRIBUTE_ONLY
    ]


# Allowed on a proof's own helpers: they run no code and leave the trusted query's answers as
# they are (`@[init]` would run at import, in the query; `@[macro]` would change its commands).
BODY_ATTRIBUTES = frozenset(
    {
        "simp",
        "reducible",
        "irreducible",
        "semireducible",
        "inline",
        "noinline",
        "always_inline",
        "specialize",
        "nospecialize",
        "match_pattern",
        "ext",
        "norm_cast",
        "grind",
    }
)


def effects_when_elaborated(body: str) -> list[str]:
    """``forbidden_constructs``' reasons for the ``ELABORATION_EFFECTS`` only."""
    candidates = _present(body.replace("«", "").replace("»", ""), sorted(ELABORATION_EFFECTS))
    return _forbidden_in_code(body, candidates) if candidates else []


def _present(plain: str, constructs: Iterable[str]) -> list[str]:
    """The constructs whose every word occurs in ``plain``: the only ones worth lexing for."""
    return [c for c in constructs if all(word in plain for word in c.split(" "))]


def _forbidden_in_code(
    body: str,
    constructs: Iterable[str],
    words: list[str] | None = None,
    in_attributes: set[str] | None = None,
) -> list[str]:
    if words is None:
        words = _code_words(body)
    if in_attributes is None:
        in_attributes = _attributes(words)[1]
    # Comments only: a string literal may be interpolated (`s!"{include_str …}"`).
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


# They act only inside attribute brackets; elsewhere the word is an ordinary identifier.
ATTRIBUTE_ONLY = frozenset({"extern", "implemented_by"})


def _attributes(words: list[str]) -> tuple[list[str], set[str]]:
    """Inside attribute brackets: each attribute's name (``@[local simp, init f]`` → ``simp``,
    ``init``), and every word."""
    names: list[str] = []
    inside: set[str] = set()
    depth = 0
    expect = False
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
    """Code tokens as Lean reads them: names unescaped, ``#`` glued to its identifier."""
    words: list[str] = []
    glue = -1
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
    prefix = last.endswith(".")  # any option under `debug.`
    for i in range(len(words) - len(parts) + 1):
        *head, tail = words[i : i + len(parts)]
        if head != parts[:-1]:
            continue
        if tail == last or (prefix and tail.startswith(last)):
            return True
    return False
