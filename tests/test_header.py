"""Header parsing and pool keys (pure)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from repl_pool import parse_header


def test_prelude_and_imports_are_parsed_with_the_header_end() -> None:
    text = "prelude\nimport Demo.Basic\nimport Demo.Logic\n\ntheorem t : True := trivial\n"
    header = parse_header(text)
    assert header.prelude
    assert header.imports == ("import Demo.Basic", "import Demo.Logic")
    assert text[header.end :].lstrip().startswith("theorem")


def test_whitespace_comments_order_and_duplicates_do_not_change_the_key() -> None:
    a = parse_header("import Mathlib\nimport Foo.Bar\n")
    b = parse_header(
        "-- a comment\n/- block /- nested -/ -/ import Foo.Bar\n"
        "\n  import   Mathlib\nimport Foo.Bar\n"
    )
    assert a.key == b.key


def test_different_imports_never_share_a_key() -> None:
    assert parse_header("import A").key != parse_header("import B").key
    assert parse_header("prelude\nimport A").key != parse_header("import A").key
    assert parse_header("import A").key != parse_header("import A\nimport B").key
    assert parse_header("import all A").key != parse_header("import A").key


def test_docstrings_and_module_docs_end_the_header() -> None:
    header = parse_header("import A\n/-- doc -/\ntheorem t : True := trivial\n")
    assert header.imports == ("import A",)
    header = parse_header("import A\n/-! module doc -/\nimport B\n")
    assert header.imports == ("import A",)


def test_comments_with_quotes_and_escaped_names_are_read_as_lean_reads_them() -> None:
    text = (
        '/- a "quote -/ -- and -/ here\n/- nested /- "-/ -/ import «My Lib».«A B»\n'
        "import C'.D -- c\n/-- doc -/\nimport E\n"
    )
    header = parse_header(text)
    assert header.imports == ("import «My Lib».«A B»", "import C'.D")
    assert text[header.end :].startswith(" -- c")


def test_an_unterminated_comment_or_escape_ends_the_header() -> None:
    assert parse_header("import A\n/- open\nimport B\n").imports == ("import A",)
    assert parse_header("import A\nimport «B\n").imports == ("import A",)


def test_module_system_modifiers_are_part_of_the_key() -> None:
    header = parse_header("module\npublic import A.B\nmeta import C\nimport all D\n")
    assert header.module
    assert header.imports == ("public import A.B", "meta import C", "import all D")


names = st.lists(st.sampled_from(["A", "B.C", "Mathlib", "Demo.Basic"]), min_size=0, max_size=5)


@given(names, st.randoms())
def test_key_depends_only_on_the_import_set(mods: list[str], rnd: object) -> None:
    shuffled = list(mods)
    import random

    assert isinstance(rnd, random.Random)
    rnd.shuffle(shuffled)
    a = "".join(f"import {m}\n" for m in mods)
    b = "-- c\n" + "".join(f"import  {m} -- x\n" for m in shuffled)
    assert parse_header(a).key == parse_header(b).key


# Pieces of real file openings, so generated texts and edits cross every header lexer boundary.
PIECES = [
    "prelude",
    "module",
    "import",
    " ",
    "\n",
    "A",
    "B.C",
    "«x y»",
    "-- c\n",
    "/-",
    "-/",
    "/-- doc -/",
    "/-! m -/",
    "public",
    "all",
    "theorem t : True := trivial",
    "x",
    "im",
    "port",
]


@settings(max_examples=500)
@given(
    st.lists(st.sampled_from(PIECES), max_size=14).map("".join),
    st.data(),
)
def test_an_edit_from_where_the_header_parse_stopped_reading_keeps_the_header(
    text: str, data: st.DataObject
) -> None:
    """An edit starting at or after ``Header.read_to`` leaves the header and its key unchanged."""
    header = parse_header(text)
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    inserted = data.draw(st.lists(st.sampled_from(PIECES), max_size=4).map("".join))
    edited = text[:start] + inserted + text[end:]
    if start >= header.read_to:
        after = parse_header(edited)
        assert edited[: after.end] == text[: header.end]
        assert after.key == header.key


def test_the_header_parse_depends_on_the_character_after_the_word_that_ended_it() -> None:
    text = "prelude\nim\ntheorem t : True := trivial\n"
    at = text.index("im") + 2
    edited = text[:at] + "port A" + text[at:]
    assert parse_header(edited).imports == ("import A",)
    assert parse_header(text).read_to > at
    # The text's end ends the header too: anything appended may continue it.
    assert parse_header("prelude\nimport A").read_to > len("prelude\nimport A")


def test_text_joined_to_the_last_word_read_is_part_of_what_the_header_depends_on() -> None:
    """Text appended to the last word read can change it (a keyword into a dotted name, a
    raw-string opener into a raw string), so ``read_to`` lies past it."""
    for text, after, inserted in [
        ("import meta.\n", "meta.", "X"),
        ("import import.\ndef x := 1\n", "import.", "Foo"),
        ("prelude\nimport module.", "module.", "Foo"),
        ("import r##\n", "r##", '"'),
    ]:
        header = parse_header(text)
        at = text.index(after) + len(after)
        edited = text[:at] + inserted + text[at:]
        assert parse_header(edited).imports != header.imports, text
        assert header.read_to > at, text
