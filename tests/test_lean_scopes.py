"""The scope tracker (lsp_bridge.lean_scopes) through its readers: full names of a file's axioms
and of a task's theorem, checked against Lean itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_tools.tasks import LocateError, axioms_declared, locate_body
from agent_tools.tasks.locate import is_public
from lsp_bridge import PRELUDE_HEADER, declarations, find_lean, scope_commands

HEAD = PRELUDE_HEADER + "inductive T : Prop where\n  | intro : T\n"


def lean_errors(tmp_path: Path, text: str) -> str:
    """Lean's own output for ``text`` with a ``#check`` of each name appended."""
    path = tmp_path / "Scopes.lean"
    path.write_text(text, encoding="utf-8")
    out = subprocess.run(
        [str(find_lean().lean), str(path)], capture_output=True, text=True, timeout=60
    )
    return out.stdout + out.stderr if out.returncode else ""


@pytest.mark.parametrize(
    ("text", "axioms", "theorem"),
    [
        # Lean's commands need no column 0: an indented `end A` closes `A`
        ("namespace A\naxiom a : T\n  end A\naxiom b : T\n", ["A.a", "b"], "u"),
        ("namespace A namespace B axiom a : T end B end A\n", ["A.B.a"], "u"),
        ("namespace A.B\nend B\naxiom a : T\n", ["A.a"], "A.u"),
        ("namespace A\nsection S.T\naxiom a : T\nend S.T\nend A\n", ["A.a"], "u"),
        ("namespace A\nnoncomputable section\nend\nend A\naxiom a : T\n", ["a"], "u"),
        ("namespace A\nsection axiom a : T\nend\nend A\n", ["A.a"], "u"),
        # a name on the next line, indented past the command, is the scope's (checkColGt)
        ("namespace A\nsection\n  S.T\nend S.T\naxiom a : T\nend A\n", ["A.a"], "u"),
        (
            "namespace A\nnoncomputable section\n  U.V\nend\n  U.V\naxiom a : T\nend A\n",
            ["A.a"],
            "u",
        ),
        ("namespace A\nsection\nend axiom a : T\nend A\n", ["A.a"], "u"),
        (
            "namespace «my ns»\naxiom a : T\naxiom _root_.b : T\nend «my ns»\n",
            ["«my ns».a", "b"],
            "u",
        ),
        ("/- namespace X -/\n-- namespace Y\nnamespace A\nend A\n", [], "u"),
        (
            "namespace A\nmutual\ntheorem m : T := T.intro\n  end\naxiom a : T\nend A\n",
            ["A.a"],
            "u",
        ),
    ],
)
def test_scopes_read_as_lean_reads_them(
    tmp_path: Path, text: str, axioms: list[str], theorem: str
) -> None:
    text = HEAD + text + "theorem u : T := T.intro\n"
    if theorem != "u":
        text += "end A\n"
    assert axioms_declared(text) == axioms
    assert locate_body(text, theorem).body(text).strip() == "T.intro"
    checks = "".join(f"#check @{name}\n" for name in [*axioms, theorem])
    assert lean_errors(tmp_path, text + checks) == ""


def test_a_theorem_in_a_mutual_block_is_refused_and_one_after_it_is_not() -> None:
    text = HEAD + "mutual\ntheorem a : T := T.intro\n  end\ntheorem u : T := T.intro\n"
    with pytest.raises(LocateError, match="mutual"):
        locate_body(text, "a")
    assert locate_body(text, "u").body(text).strip() == "T.intro"


def test_public_sections_are_scopes_too() -> None:
    text = "@[expose] public section\ntheorem a : T := T.intro\nend\ntheorem b : T := T.intro\n"
    assert is_public(text, text.index("theorem a"))
    assert not is_public(text, text.index("theorem b"))


def test_a_scope_command_in_a_skipped_span_is_left_out() -> None:
    text = "namespace A\n  end A namespace B\nend B"
    skip = (text.index("  end"), text.index("\nend B"))
    assert [(c.keyword, c.name) for c in scope_commands(text, skip)] == [
        ("namespace", ("A",)),
        ("end", ("B",)),
    ]


# Random well-nested scopes, with axioms between: Lean's names are the tracker's.
_NAMES = st.sampled_from(["A", "B", "C.D", "«x y»", "E.«z»"])


@st.composite
def nested_scopes(draw: st.DrawFn, depth: int = 3) -> str:
    out: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["axiom", "namespace", "section", "anonymous section"]))
        indent = draw(st.sampled_from(["", "  "]))
        if kind == "axiom" or depth == 0:
            name = draw(st.sampled_from(["a@", "_root_.c@", "«d e@»", "A.b@"]))
            out.append(f"axiom {name} : T\n")  # @: a number of its own
            continue
        name = "" if kind == "anonymous section" else draw(_NAMES)
        keyword = "namespace" if kind == "namespace" else "section"
        inner = draw(nested_scopes(depth - 1))
        # the name on the keyword's line, or on the next one indented past the command
        opened, closed = (
            f" {name}" if draw(st.booleans()) else f"\n{margin}  {name}" for margin in ("", indent)
        )
        if not name:
            opened = closed = ""
        out.append(f"{keyword}{opened}\n{inner}{indent}end{closed}\n")
    return "".join(out)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(body=nested_scopes())
def test_the_axioms_lean_declares_are_the_ones_listed(tmp_path: Path, body: str) -> None:
    parts = body.split("@")
    text = HEAD + "".join(f"{part}{i}" for i, part in enumerate(parts[:-1])) + parts[-1]
    names = axioms_declared(text)
    assert len(names) == text.count("axiom ")
    checks = "".join(f"#check @{name}\n" for name in names)
    assert lean_errors(tmp_path, text + checks) == "", (text, names)


def test_scoping_commands_quoted_in_a_macro_are_syntax_not_commands() -> None:
    text = (
        'namespace A\nmacro "x" : command => `(namespace X end X)\n'
        'macro "y" : command => `(command| section (end))\naxiom a : T\nend A\n'
    )
    assert [(c.keyword, c.name) for c in scope_commands(text)] == [
        ("namespace", ("A",)),
        ("end", ("A",)),
    ]
    assert axioms_declared(text) == ["A.a"]


def test_declarations_are_the_named_constants_with_their_full_names() -> None:
    """Not `attribute [instance] f`, `deriving instance`, nor words in comments or strings."""
    text = (
        "namespace A.B\n"
        "/-- theorem fake : True -/\n"
        "@[simp] protected noncomputable def f (n : N) : N := n\n"
        "attribute [instance] f\n"
        "deriving instance Repr for N\n"
        "class inductive C : Prop where\n  | mk : C\n"
        "theorem _root_.top : True := trivial\n"
        "  theorem «with space» : True := trivial\n"
        'def s : String := "def hidden := 1"\n'
        'macro "m" : term => `(def quoted := 1)\n'
        "end A.B\n"
        "private axiom ax : False\n"
    )
    found = [(d.keyword, d.full_name, d.modifiers) for d in declarations(text)]
    assert found == [
        ("def", "A.B.f", ("protected", "noncomputable")),
        ("inductive", "A.B.C", ("class",)),
        ("theorem", "top", ()),
        ("theorem", "A.B.«with space»", ()),
        ("def", "A.B.s", ()),
        ("axiom", "ax", ("private",)),
    ]
