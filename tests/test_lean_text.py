"""lsp_bridge.lean_text: Lean 4's lexical trivia (comments, literals, «» names), as examples,
properties over generated programs and arbitrary Unicode, and regressions of the old scanners."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agent_tools.tasks import (
    axioms_declared,
    code_end,
    comment_mask,
    locate_body,
    precheck_body,
    scan_trivia,
    sorry_outside,
)
from lsp_bridge import (
    COMMENT_KINDS,
    LITERAL_KINDS,
    LeanToken,
    TokenKind,
    has_tactic_block,
    lean_tokens,
    name_parts,
    scan_text,
)
from repl_pool import parse_header

K = TokenKind
WHITESPACE = " \t\r\n"


def kinds_and_texts(text: str) -> list[tuple[TokenKind, str]]:
    return [(t.kind, t.text(text)) for t in lean_tokens(text)]


def opaque_tokens(text: str) -> list[LeanToken]:
    """What scan_text must find: lean_tokens' comments, literals and «»-escaped names."""
    return [
        t
        for t in lean_tokens(text)
        if t.kind in COMMENT_KINDS | LITERAL_KINDS or (t.kind is K.IDENT and "«" in t.text(text))
    ]


# -- examples: one construct at a time ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # primes belong to identifiers; a ' where a token starts is a char literal
        ("h' x'' 'a'", [(K.IDENT, "h'"), (K.IDENT, "x''"), (K.CHAR, "'a'")]),
        (
            r"f '\'' '\\' '\x41' '\u03B1'",
            [
                (K.IDENT, "f"),
                (K.CHAR, r"'\''"),
                (K.CHAR, r"'\\'"),
                (K.CHAR, r"'\x41'"),
                (K.CHAR, r"'\u03B1'"),
            ],
        ),
        ("""'"' '-' '/'""", [(K.CHAR, """'"'"""), (K.CHAR, "'-'"), (K.CHAR, "'/'")]),
        ("1'c' «x»'d'", [(K.NUMBER, "1"), (K.CHAR, "'c'"), (K.IDENT, "«x»"), (K.CHAR, "'d'")]),
        ("h!' x₁' α'", [(K.IDENT, "h!'"), (K.IDENT, "x₁'"), (K.IDENT, "α'")]),
        # strings and escapes
        (r'"a\"b" c', [(K.STRING, r'"a\"b"'), (K.IDENT, "c")]),
        (
            '"-- not a comment /- nor this" x',
            [(K.STRING, '"-- not a comment /- nor this"'), (K.IDENT, "x")],
        ),
        ('"two\nlines"', [(K.STRING, '"two\nlines"')]),
        # raw strings: no escapes, closed by " and the opening number of #
        (r'r"C:\" x', [(K.RAW_STRING, r'r"C:\"'), (K.IDENT, "x")]),
        ('r#"say "hi" -- ok"# x', [(K.RAW_STRING, 'r#"say "hi" -- ok"#'), (K.IDENT, "x")]),
        ('r##"a"#b"## x', [(K.RAW_STRING, 'r##"a"#b"##'), (K.IDENT, "x")]),
        ('br"x" r #', [(K.IDENT, "br"), (K.STRING, '"x"'), (K.IDENT, "r"), (K.SYMBOL, "#")]),
        # comments
        ("a -- c\nb", [(K.IDENT, "a"), (K.LINE_COMMENT, "-- c"), (K.IDENT, "b")]),
        ("/- a /- b -/ c -/ d", [(K.BLOCK_COMMENT, "/- a /- b -/ c -/"), (K.IDENT, "d")]),
        ("/-- doc -/ /-! mod -/", [(K.DOC_COMMENT, "/-- doc -/"), (K.MODULE_DOC, "/-! mod -/")]),
        ('/- "-/ x', [(K.BLOCK_COMMENT, '/- "-/'), (K.IDENT, "x")]),  # no strings in comments
        ("/- -- -/ x", [(K.BLOCK_COMMENT, "/- -- -/"), (K.IDENT, "x")]),
        # Lean skips the character after a plain `/-` unread: `/-/` opens no nested comment
        ("/-/-/ x", [(K.BLOCK_COMMENT, "/-/-/"), (K.IDENT, "x")]),
        ("/---/ x", [(K.DOC_COMMENT, "/---/"), (K.IDENT, "x")]),
        # «» names: their content is not code
        ('«a -- b» «"» x', [(K.IDENT, "«a -- b»"), (K.IDENT, '«"»'), (K.IDENT, "x")]),
        ("A.«b c».d' e", [(K.IDENT, "A.«b c».d'"), (K.IDENT, "e")]),
        # numbers
        (
            "0x1F 1_000 2.5e-3 7",
            [(K.NUMBER, "0x1F"), (K.NUMBER, "1_000"), (K.NUMBER, "2.5e-3"), (K.NUMBER, "7")],
        ),
    ],
)
def test_constructs_lex_as_lean_reads_them(
    text: str, expected: list[tuple[TokenKind, str]]
) -> None:
    assert kinds_and_texts(text) == expected
    assert scan_text(text).spans == tuple(opaque_tokens(text))


@pytest.mark.parametrize(
    ("text", "kind", "length"),
    [
        ("x /- open /- nested -/", K.BLOCK_COMMENT, 20),
        ("x /-- doc", K.DOC_COMMENT, 7),
        ('x "abc', K.STRING, 4),
        ('x "abc\\', K.STRING, 5),
        ('x r#"abc"', K.RAW_STRING, 7),
        ("x «abc", K.IDENT, 4),
        ("x /-", K.BLOCK_COMMENT, 2),
    ],
)
def test_unterminated_constructs_run_to_the_end_and_are_reported(
    text: str, kind: TokenKind, length: int
) -> None:
    last = list(lean_tokens(text))[-1]
    assert (last.kind, last.end, last.terminated) == (kind, len(text), False)
    assert last.end - last.start == length
    assert scan_text(text).unterminated(COMMENT_KINDS | LITERAL_KINDS | {K.IDENT}) == (last,)


def test_a_char_literal_without_its_end_stops_where_it_stopped() -> None:
    tokens = list(lean_tokens("'ab' x"))
    assert (tokens[0].kind, tokens[0].text("'ab' x"), tokens[0].terminated) == (K.CHAR, "'a", False)
    assert [t.kind for t in tokens[1:]] == [K.IDENT, K.IDENT]
    assert next(lean_tokens("'")).terminated is False


def test_name_parts() -> None:
    assert name_parts("Foo.«a.b c».bar'") == ("Foo", "a.b c", "bar'")
    assert name_parts("_root_.x") == ("_root_", "x")
    assert name_parts("") == ()


def test_blank_keeps_code_lines_and_length() -> None:
    text = 'def x := "a\n--b" -- c\n/- d\n e -/ y'
    scan = scan_text(text)
    assert scan.blank(text) == "def x :=   \n" + " " * 9 + "\n" + " " * 4 + "\n" + " " * 6 + "y"
    assert scan.blank(text, {K.LINE_COMMENT}) == 'def x := "a\n--b"     \n/- d\n e -/ y'


# -- a benchmark-style file --------------------------------------------------------------------

BENCHMARK_FILE = """\
import Mathlib.Tactic
import «My Lib».Basic -- the project's library

/-!
# Module docs with `code`, a "quote" and a nested /- comment -/ inside
-/

set_option maxHeartbeats 400000

open Real Nat

namespace «Weird Name».Sub

/-- The docstring mentions `theorem fake : False := sorry` and says -- nothing. -/
theorem mathd_algebra_10 (x : ℝ) (h₀ : x ≠ 0) (h' : 2 * x = 4) :
    x = 2 := by
  -- a comment with a "quote
  have h₁ : (2 : ℝ) ≠ 0 := by norm_num
  have s : String := "-/ is not a comment end, nor is -- a comment"
  have c : Char := '"'
  /- block "with a quote
     over lines -/
  linarith [h', h₁]

theorem «x -- y» (𝔽 : Type) (α' : 𝔽) : α' = α' := rfl

end «Weird Name».Sub

theorem _root_.top_level : True := trivial
"""


def test_the_benchmark_file_lexes_and_locates() -> None:
    text = BENCHMARK_FILE
    header = parse_header(text)
    assert header.imports == ("import Mathlib.Tactic", "import «My Lib».Basic")
    scan = scan_text(text)
    assert not scan.unterminated(COMMENT_KINDS | LITERAL_KINDS | {K.IDENT})
    kinds = [s.kind for s in scan.spans]
    assert kinds.count(K.DOC_COMMENT) == 1
    assert kinds.count(K.MODULE_DOC) == 1
    assert kinds.count(K.STRING) == 1
    assert kinds.count(K.CHAR) == 1
    span = locate_body(text, "«Weird Name».Sub.mathd_algebra_10")
    body = span.body(text)
    assert body.startswith(" by\n  -- a comment")
    assert body.endswith("linarith [h', h₁]")
    assert precheck_body(body) is None
    assert code_end(text, span.start, span.end) == span.end
    weird = locate_body(text, "«Weird Name».Sub.«x -- y»")
    assert weird.body(text) == " rfl"
    assert locate_body(text, "top_level").body(text) == " trivial"
    # the theorem named in the docstring is not a declaration
    with pytest.raises(ValueError, match="not found"):
        locate_body(text, "«Weird Name».Sub.fake")


# -- generated programs: tokens with known boundaries -----------------------------------------

ID_FIRST = "abxyzABZ_αβγℕℝ𝔽𝓗éŁ"
ID_REST = ID_FIRST + "0129'!?₁ₐ"
SYMBOLS = "()[]{}⟨⟩:=,+*<>|@$%^&;∀∃→↦⊢∧∨¬`"
# Text inside comments/strings that confuses naive scanners; - or / next to a comment delimiter
# are placed by the generators.
TRICKY = ['"', "'", "«", "»", 'r#"', "\\", " -- ", " - ", " / ", "\n", "x", "ℕ", "😀", "é"]


@dataclass(frozen=True)
class Piece:
    kind: TokenKind
    text: str


def _plain_part() -> st.SearchStrategy[str]:
    return st.builds(
        lambda first, rest: first + rest,
        st.sampled_from(ID_FIRST),
        st.text(alphabet=ID_REST, max_size=4),
    ).filter(lambda s: s != "r")  # `r` before a string would be a raw string prefix


def _escaped_part() -> st.SearchStrategy[str]:
    inner = st.lists(st.sampled_from([*TRICKY, "-", "/", "--", "/-", "-/", " "]), max_size=5)
    return inner.map(lambda xs: "«" + "".join(xs).replace("»", "") + "»")


idents = st.lists(st.one_of(_plain_part(), _escaped_part()), min_size=1, max_size=3).map(
    lambda parts: Piece(K.IDENT, ".".join(parts))
)
numbers = st.one_of(
    st.integers(0, 10**9).map(str), st.integers(0, 2**32).map(lambda i: f"0x{i:X}")
).map(lambda s: Piece(K.NUMBER, s))
symbols = st.sampled_from(SYMBOLS).map(lambda s: Piece(K.SYMBOL, s))

_string_atom = st.one_of(
    st.sampled_from([a for a in TRICKY if '"' not in a and "\\" not in a] + ["-/", "/-", "--"]),
    st.sampled_from(['\\"', "\\\\", "\\n", "\\t", "\\x41", "\\u03B1", "\\\n   "]),
)
strings = st.lists(_string_atom, max_size=6).map(
    lambda xs: Piece(K.STRING, '"' + "".join(xs) + '"')
)
chars = st.one_of(
    st.sampled_from(['"', "a", "-", "/", "«", "😀", "\n", " ", "r", "ℕ"]),
    st.sampled_from(["\\'", "\\\\", "\\n", "\\x41", "\\u03B1", '\\"']),
).map(lambda c: Piece(K.CHAR, f"'{c}'"))


@st.composite
def raw_strings(draw: st.DrawFn) -> Piece:
    hashes = "#" * draw(st.integers(0, 3))
    content = "".join(draw(st.lists(st.sampled_from([*TRICKY, "#", '"#', "--", "/-"]), max_size=6)))
    close = '"' + hashes
    assume((content + close).find(close) == len(content))
    return Piece(K.RAW_STRING, f'r{hashes}"{content}{close}')


line_comments = st.lists(st.sampled_from([a for a in TRICKY if a != "\n"] + ["-/", "/-"])).map(
    lambda xs: Piece(K.LINE_COMMENT, "--" + "".join(xs))
)


def _comment_body(depth: int) -> st.SearchStrategy[str]:
    atom = st.sampled_from([*TRICKY, "--", " '", '"-'])
    if depth > 0:
        atom = st.one_of(atom, _comment_body(depth - 1).map(lambda b: f"/- {b} -/"))
    return st.lists(atom, max_size=4).map(" ".join)


block_comments = st.builds(
    lambda opener, body: Piece(
        {"/- ": K.BLOCK_COMMENT, "/-- ": K.DOC_COMMENT, "/-! ": K.MODULE_DOC}[opener],
        f"{opener}{body} -/",
    ),
    st.sampled_from(["/- ", "/-- ", "/-! "]),
    _comment_body(3),
)

pieces = st.one_of(
    idents, numbers, symbols, strings, chars, raw_strings(), line_comments, block_comments
)


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, list[tuple[TokenKind, int, int]]]:
    """A text and the (kind, start, end) of each of its tokens."""
    parts = draw(st.lists(pieces, max_size=12))
    text = draw(st.sampled_from(["", " ", "\n"]))
    expected = []
    previous: Piece | None = None
    for piece in parts:
        if previous is not None:
            if previous.kind is K.LINE_COMMENT:
                text += "\n"
            elif K.SYMBOL in (previous.kind, piece.kind):
                text += draw(st.sampled_from(["", " ", "\n  "]))
            else:
                text += draw(st.sampled_from([" ", "\n", "  \n\n ", "\r\n"]))
        expected.append((piece.kind, len(text), len(text) + len(piece.text)))
        text += piece.text
        previous = piece
    return text, expected


@settings(max_examples=400)
@given(programs())
def test_generated_programs_lex_back_to_their_tokens(
    program: tuple[str, list[tuple[TokenKind, int, int]]],
) -> None:
    text, expected = program
    tokens = list(lean_tokens(text))
    assert [(t.kind, t.start, t.end) for t in tokens] == expected
    assert all(t.terminated for t in tokens)
    assert scan_text(text).spans == tuple(opaque_tokens(text))


@settings(max_examples=300)
@given(programs(), st.data())
def test_a_construct_cut_short_is_unterminated_to_the_end(
    program: tuple[str, list[tuple[TokenKind, int, int]]], data: st.DataObject
) -> None:
    text, expected = program
    cuttable = [
        (kind, start, end)
        for kind, start, end in expected
        if kind in (K.BLOCK_COMMENT, K.DOC_COMMENT, K.MODULE_DOC, K.STRING, K.RAW_STRING)
        or (kind is K.IDENT and text[start] == "«")
    ]
    assume(cuttable)
    kind, start, end = data.draw(st.sampled_from(cuttable))
    body_start = {
        K.BLOCK_COMMENT: 3,
        K.DOC_COMMENT: 3,
        K.MODULE_DOC: 3,
        K.STRING: 1,
        K.IDENT: 1,
        K.RAW_STRING: text.find('"', start) + 1 - start,
    }[kind]
    cut = data.draw(st.integers(start + body_start, end - 1))
    if kind is K.IDENT:  # cut inside the first «» part
        cut = min(cut, text.index("»", start))
    short = text[:cut]
    tokens = list(lean_tokens(short))
    before = [(k, s, e) for k, s, e in expected if e <= start]
    assert [(t.kind, t.start, t.end) for t in tokens[:-1]] == before
    assert (tokens[-1].kind, tokens[-1].start, tokens[-1].end) == (kind, start, cut)
    assert tokens[-1].terminated is False
    assert scan_text(short).spans == tuple(opaque_tokens(short))


@given(programs())
def test_masking_trivia_keeps_length_lines_and_code(
    program: tuple[str, list[tuple[TokenKind, int, int]]],
) -> None:
    text, expected = program
    blanked = scan_text(text).blank(text)
    assert len(blanked) == len(text)
    assert [i for i, c in enumerate(blanked) if c == "\n"] == [
        i for i, c in enumerate(text) if c == "\n"
    ]
    trivia = [(s, e) for k, s, e in expected if k in COMMENT_KINDS | LITERAL_KINDS]
    inside = {i for s, e in trivia for i in range(s, e)}
    for i, (a, b) in enumerate(zip(text, blanked, strict=True)):
        if i in inside:
            assert b == ("\n" if a == "\n" else " ")
        else:
            assert a == b
    assert comment_mask(text) == [i in inside for i in range(len(text))]


# -- arbitrary text: never crash, always in range ---------------------------------------------

unicode_text = st.lists(
    st.one_of(
        st.characters(),
        st.characters(categories=["Cs"]),  # lone surrogates (LSP text is UTF-16)
        st.characters(categories=["Mn", "Me"]),  # combining marks
        st.sampled_from(
            [
                "\ud83d\ude00",
                "😀",
                "e\u0301",
                "-",
                "/",
                "--",
                "/-",
                "-/",
                '"',
                "'",
                "«",
                "»",
                "r#",
                "\\",
                "\n",
                " ",
                "\t",
                "\r",
                "h'",
                "x",
                "0",
            ]
        ),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=500)
@given(unicode_text)
def test_any_text_lexes_without_crashing_and_spans_stay_in_range(text: str) -> None:
    tokens = list(lean_tokens(text))
    pos = 0
    for t in tokens:
        assert pos <= t.start < t.end <= len(text)
        assert all(c in WHITESPACE for c in text[pos : t.start])
        pos = t.end
        if not t.terminated and t.kind is not K.CHAR:
            assert t.end == len(text)
        if t.kind is K.LINE_COMMENT:
            assert "\n" not in t.text(text)
    assert all(c in WHITESPACE for c in text[pos:])
    scan = scan_text(text)
    assert scan.spans == tuple(opaque_tokens(text))
    assert len(scan.mask()) == len(text)
    assert len(scan.blank(text)) == len(text)
    trivia = scan_trivia(text)
    assert len(trivia.mask) == len(text)
    precheck_body(text)


@given(unicode_text, unicode_text)
def test_a_prefix_lexes_like_the_whole_up_to_the_cut(head: str, tail: str) -> None:
    """Tokens ending inside ``head`` and not continued in ``tail`` are the same without it."""
    whole = list(lean_tokens(head + tail))
    alone = list(lean_tokens(head))
    common = [t for t in whole if t.end < len(head)]
    assert alone[: len(common)] == common


def test_prechecks_reject_an_unterminated_escape_and_accept_lean_literals() -> None:
    assert "«" in (precheck_body("\n  exact «h") or "")
    assert "unterminated string" in (precheck_body('\n  r#"abc"') or "")
    assert precheck_body('\n  exact «h -- x» /-- doc /- n -/ -/ \'a\' r#"""#') is None


# -- regressions of repl_pool.header._Scanner / locate.scan_trivia --------------------------------


def test_regression_guillemet_names_are_not_comments_or_strings() -> None:
    body = "\n  «a--» #exit"
    mask = scan_trivia(body).mask
    assert not any(mask[body.index("#exit") :])
    assert precheck_body('\n  «"» trivial') is None


def test_regression_raw_strings_have_no_escapes() -> None:
    assert precheck_body('\n  r"C:\\" ++ x') is None
    body = '\n  r#"a "quoted" -- word"# ++ x'
    assert not scan_trivia(body).mask[body.index("++")]


def test_regression_slash_dash_slash_closes_at_the_first_dash_slash() -> None:
    assert parse_header("/-/-/ import A\nimport B\n").imports == ("import A", "import B")
    assert precheck_body("\n  /-/-/ trivial") is None


def test_regression_code_end_does_not_skip_string_literals() -> None:
    text = 'x := f "done" -- c'
    assert code_end(text, 5, len(text)) == text.index(" --")


def test_regression_a_string_line_starting_with_dashes_does_not_end_the_declaration() -> None:
    text = (
        'theorem t : True :=\n  let s := "a\n-- not a comment\n  b"\n  trivial\n\n'
        "theorem u : True := trivial\n"
    )
    assert locate_body(text, "t").body(text).endswith("trivial")


def test_regression_a_name_followed_by_a_colon_is_found() -> None:
    text = "theorem t: True :=\n  trivial\n"
    assert locate_body(text, "t").body(text) == "\n  trivial"


def test_regression_a_digit_before_a_char_literal_does_not_make_it_a_prime() -> None:
    assert precheck_body("\n  f 1'\"' x") is None


def test_regression_hex_and_unicode_char_escapes_are_literals() -> None:
    text = "f '\\x41' '\\u03B1'"
    assert comment_mask(text) == [False, False, *([True] * 6), False, *([True] * 8)]


@pytest.mark.parametrize(
    ("body", "tactic"),
    [
        ("\n  by\n    intro x\n    exact x", True),
        ("\n  ⟨by simp, h.1⟩", True),
        ("\n  fun x => (by decide : x = x)", True),
        ("\n  go n\ndecreasing_by simp_wf; omega", True),
        ("\n  ‹p ∧ q›.1", True),  # `(by assumption : p ∧ q)`
        ("\n  by", True),
        ("\n  @And.intro q p h.2 h.1", False),
        ("\n  h -- by symmetry", False),
        ("\n  /- by\n  /- nested by -/ -/ h", False),
        ('\n  f "by" \'b\' r#"by"#', False),
        ('\n  g s!"{by simp}"', True),  # interpolation: its `{…}` parts are code
        ('\n  g s!"nearby {x}"', True),  # maybe: a query more, the same goals
        ("\n  by_cases.elim h", False),  # a name that starts with `by`
        ("\n  Nat.by h", False),
        ("\n  «by» h", False),
        ("\n  nearby h", False),
        ("", False),
    ],
)
def test_a_tactic_block_is_a_by_token_in_code(body: str, tactic: bool) -> None:
    assert has_tactic_block(body) is tactic


@given(st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=60))
def test_nothing_in_a_line_comment_opens_a_tactic_block(text: str) -> None:
    assert not has_tactic_block(f"h -- {text}\n")
    assert has_tactic_block(f"h -- {text}\nby")


@pytest.mark.parametrize(
    ("text", "uses"),
    [
        ("theorem a : p := sorry", True),
        ("theorem a : p := Demo.sorryAx p true", True),
        ("theorem a : p := by admit", True),
        ("axiom sorryAx (α : Sort u) (synthetic : Bool) : α", False),  # a prelude declaring it
        ("/-- the axiom behind `sorry` -/ axiom sorryAx : p", False),
        ("theorem a : p := h -- sorry, later", False),
        ('def s := "sorry"', False),
        ("theorem sorry_free : p := h", False),
    ],
)
def test_sorry_outside_finds_uses_not_declarations_or_trivia(text: str, uses: bool) -> None:
    assert sorry_outside(text, 0, 0) is uses


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("axiom sorryAx (α : Sort u) (synthetic : Bool) : α", ["sorryAx"]),
        ("namespace Demo\n/-- doc -/\nprivate axiom «my ax» : False\nend Demo", ["Demo.«my ax»"]),
        # full names (`Demo.sound` is not `Quot.sound`); unsafe axioms left out
        (
            "unsafe axiom lcErased : Type\nnamespace A.B\nsection S\naxiom x : T\nend S\n"
            "mutual\nend\naxiom _root_.y : T\nend A.B\naxiom z : T",
            ["A.B.x", "y", "z"],
        ),
        ("axiom Demo.swap (p q : Prop) : p → q\naxiom b : True", ["Demo.swap", "b"]),
        # `end X` closes only `X` of `namespace Evil.X`: the axiom is not the root `propext`
        ("namespace Evil.X\nend X\naxiom propext : False\nend Evil", ["Evil.propext"]),
        ("namespace A\nnamespace B.C\nend B.C\naxiom x : T\nend A\naxiom y : T", ["A.x", "y"]),
        ("namespace A\nsection S.T\nend S.T\naxiom x : T\nend A", ["A.x"]),
        ("namespace A\nsection\nend\naxiom x : T\nend A\naxiom y : T", ["A.x", "y"]),
        # the command on the keyword's line is no scope name
        ("namespace Evil\nsection axiom propext : False\nend\nend Evil", ["Evil.propext"]),
        ("namespace Evil\nsection\nend axiom bad : False\nend Evil", ["Evil.bad"]),
        ("-- axiom c : False\ntheorem axiom_free : p := h", []),
        ('def s := "axiom d : False"', []),
    ],
)
def test_axioms_declared_lists_the_names_after_axiom_in_code(text: str, names: list[str]) -> None:
    assert axioms_declared(text) == names


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ("\n  aux\nwhere aux : p := h", False),
        ("\n  go n\ntermination_by n\ndecreasing_by simp", False),
        ("\n  /- a comment\nin column 0 -/ h", False),
        ('\n  f "a string\ncontinued"', False),
        ("\n  (f\n    h\n)", False),  # a closing bracket: no command starts with one
        ("\n  fun\n| .a => h\n| .b => h", False),
        ("\n  ⟨h.2,\n    h.1\n⟩", False),
        ("\n  h\ntheorem evil : False := sorry", True),
        ("\n  h\nwhere_x", True),  # a name, not the clause
        ("\n  /- a comment -/\n#exit", True),
    ],
)
def test_precheck_refuses_column_0_lines_that_start_commands(body: str, refused: bool) -> None:
    reason = precheck_body(body)
    assert (reason is not None and "column 0" in reason) is refused, reason


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        # `×'`, `Σ'`, `''`: notations, not char literals
        ("\n  (⟨h.1, h.2⟩ : p ×' q).1", None),
        ("\n  (⟨0, rfl⟩ : Σ' n, n = 0)", None),
        ("\n  Set.image f '' s", None),
        ("\n  h\n  /-- x -/", "doc comment"),
        ("\n  h\n  /-- x -/ -- and a comment\n", "doc comment"),
        ("\n  aux\n  where\n  /-- the helper -/\n  aux : p := h", None),  # documents `aux`
        ("\n  h -- it's fine", None),
    ],
)
def test_precheck_names_what_lean_would_misread(body: str, reason: str | None) -> None:
    found = precheck_body(body)
    assert (found is None) if reason is None else (found is not None and reason in found)


@pytest.mark.parametrize(
    ("after", "in_body"),
    [
        ("  theorem next : p := h", False),
        ("  end A", False),
        ("  #exit", False),
        ("  @[simp] def f : N := N.z", False),
        ("  /-- doc -/\n  def f : N := N.z", False),
        ("  noncomputable section", False),
        ("  #[1, 2].size", True),
        ("  open Foo in h", True),
        ("  set_option pp.all true in h", True),
        ("  ending h", True),
        ("  end_of h", True),
        ("  theorem_aux h", True),
        ("  (theorem)", True),
        ("  «end» h", True),
        ("  -- theorem in a comment", True),
        ("  where\n  @[simp] aux : p := h", True),  # a `where` declaration's attributes
        # `open`/`set_option` commands (no `in`) end the body
        ("  open Inner", False),
        ("  set_option pp.all true", False),
        ("  open Inner in\n  theorem next : p := h", False),
        # … and a `where` body's attributes before a command keyword are the command's
        ("  where\n  aux : p := h\n  @[simp] theorem b : p := h", False),
        ("  #adaptation_note /-- a note -/\n  h", True),  # Mathlib's, inside proofs
        ("  #v[1, 2].size", True),
        # a wrapper of the next command, a comment first, `unsafe`, more `#`
        ("  set_option pp.all true in\n  theorem next : p := h", False),
        ("  open Inner in\n  @[simp] theorem next : p := h", False),
        ("  open Inner in\n  h", True),  # a term's `open … in`
        ("  set_option pp.all true in\n    (h)", True),
        ("  /- c -/ theorem next : p := h", False),
        ("  unsafe def f : N := N.z", False),
        ("  #eval! f", False),
        ("  #guard_msgs in\n  #check f", False),
        ("  macro_rules | `(x) => `(y)", False),
    ],
)
def test_the_body_ends_where_an_indented_command_starts(after: str, in_body: bool) -> None:
    text = "theorem t : p :=\n  h\n" + after + "\n"
    body = locate_body(text, "t").body(text)
    # The line that decides is the first (a wrapper must go with the command it wraps), or
    # after a `where` clause, the last.
    lines = after.strip().splitlines()
    decisive = lines[-1] if lines[0] == "where" else lines[0]
    assert (decisive in body) is in_body, body
