"""The equivalence grader's term reader and its portfolios of candidate proofs: term mode for
the bootstrap, the reference BEq+'s tactic steps for a full toolchain (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_tools.verdict.equiv_tactics import (
    GUARD_STEPS,
    SOLVERS_APPLY,
    TACTIC_PORTFOLIO_VERSION,
    beq_plus_plan,
    exact_suggestion,
    prove_all,
)
from agent_tools.verdict.equiv_terms import (
    GUARDS,
    PORTFOLIO_VERSION,
    STRICT_GUARDS,
    App,
    Lam,
    Meta,
    Pi,
    Proj,
    Sort,
    Term,
    TermError,
    Var,
    alpha_eq,
    direction_plan,
    parse_term,
    show,
    telescope,
    tokens,
    unify,
)


def proofs(source: str, target: str) -> list[tuple[str, str]]:
    return [(c.strategy, c.proof) for c in direction_plan(source, target).proofs]


def test_tokens_drop_universe_levels_and_keep_escaped_names() -> None:
    assert tokens("@Eq.{u_1 + 1} α a «my b».c x.{u}.1") == [
        "@",
        "Eq",
        "α",
        "a",
        "«my b».c",
        "x",
        ".1",
    ]
    assert tokens("fun x ↦ x -> y") == ["fun", "x", "=>", "x", "→", "y"]


def test_binders_of_every_kind_are_read() -> None:
    term = parse_term("∀ {α : Type u_1} [inst : Preorder α] ⦃a : α⦄ [Inhabited α] (b c : α), P b")
    kinds = []
    while isinstance(term, Pi):
        kinds.append((term.name, term.kind))
        term = term.body
    assert kinds == [("α", "{"), ("inst", "["), ("a", "⦃"), (None, "["), ("b", "("), ("c", "(")]
    assert term == App(Var("P"), (Var("b"),))


def test_arrows_infix_and_trailing_binders() -> None:
    assert parse_term("p ∧ q → q ∧ p ↔ ¬p = q") == App(
        Var("Iff"),
        (
            Pi(
                None,
                "(",
                App(Var("And"), (Var("p"), Var("q"))),
                App(Var("And"), (Var("q"), Var("p"))),
            ),
            App(Var("Not"), (App(Var("Eq"), (Var("p"), Var("q"))),)),
        ),
    )
    exists = parse_term("Exists fun (x : Nat) => Eq (f x) 2")
    assert isinstance(exists, App) and isinstance(exists.args[0], Lam)
    body = App(Var("P"), (Var("x"),))
    assert parse_term("∃ x, P x") == App(Var("Exists"), (Lam("x", "(", None, body),))
    assert parse_term("h.2.1") == Proj(Proj(Var("h"), "2"), "1")
    assert parse_term("Sort (max u v) → Type u_1 → Prop") == Pi(
        None, "(", Sort("Sort"), Pi(None, "(", Sort("Type"), Sort("Prop"))
    )


@pytest.mark.parametrize("text", ["let x := 1; x", "⟨a, b⟩", "(a", "∀ x y", "a ×ˢ b"])
def test_what_is_not_read_is_a_term_error(text: str) -> None:
    with pytest.raises(TermError):
        parse_term(text)


def test_show_writes_what_parse_reads() -> None:
    for text in [
        "∀ {α : Type _} (a : α), Eq a a → P (fun (x : α) => x)",
        "@HAdd.hAdd Nat Nat Nat (@instHAdd Nat inst) a b",
        "(Nat → Nat) → Nat",
        "h.1",
    ]:
        assert alpha_eq(parse_term(show(parse_term(text))), parse_term(text)), text


names = st.sampled_from(["a", "b", "Nat", "P", "f"])


def terms() -> st.SearchStrategy[Term]:
    leaves: st.SearchStrategy[Term] = names.map(Var)
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.builds(
                lambda f, xs: App(Var(f), tuple(xs)), names, st.lists(inner, min_size=1, max_size=3)
            ),
            st.builds(
                lambda n, d, b: Pi(n, "(", d, b), st.sampled_from(["x", "y", None]), inner, inner
            ),
            st.builds(lambda d, b: Lam("x", "(", d, b), inner, inner),
        ),
        max_leaves=8,
    )


@settings(max_examples=200, deadline=None)
@given(terms())
def test_show_then_parse_is_the_same_term_up_to_bound_names(term: Term) -> None:
    assert alpha_eq(parse_term(show(term)), term)


def test_alpha_equivalence_is_up_to_bound_names_only() -> None:
    assert alpha_eq(parse_term("∀ (x : Nat), P x"), parse_term("∀ (y : Nat), P y"))
    assert not alpha_eq(parse_term("∀ (x : Nat), P x"), parse_term("∀ (y : Nat), P z"))
    swapped = parse_term("fun (y x : Nat) => R x y")
    assert not alpha_eq(parse_term("fun (x y : Nat) => R x y"), swapped)


def test_unify_assigns_metas_and_never_to_a_variable_bound_inside() -> None:
    pattern = App(Var("R"), (Meta(0), Meta(1)))
    assert unify(pattern, parse_term("R a (f b)"), {}) == {0: Var("a"), 1: parse_term("f b")}
    inside = Pi("x", "(", Var("Nat"), App(Var("P"), (Meta(0),)))
    assert unify(inside, parse_term("∀ (y : Nat), P y"), {}) is None
    assert unify(inside, parse_term("∀ (y : Nat), P c"), {}) == {0: Var("c")}


def test_slack_is_for_constant_headed_subterms_only() -> None:
    pattern = parse_term("Nat.Odd (Nat.double n)")
    unfolded = parse_term("Nat.Odd (HAdd.hAdd n n)")
    assert unify(pattern, unfolded, {}) is None
    assert unify(pattern, unfolded, {}, slack=1) == {}
    # Never at a local variable, nor (unless `whole`) at the whole term.
    assert unify(parse_term("P a"), parse_term("P b"), {}, slack=2, locals_=frozenset("ab")) is None
    assert unify(parse_term("Nat.IsZero n"), parse_term("Eq n 0"), {}, slack=1) is None
    assert unify(parse_term("Nat.IsZero n"), parse_term("Eq n 0"), {}, slack=1, whole=True) == {}


def test_telescope_names_binders_validly_and_freshly() -> None:
    tel = telescope("∀ (p q : Prop), And p q → ∀ [Preorder Nat] (base : Nat), Not p", {"base"})
    names = [b.name for b in tel.binders]
    assert names[:2] == ["p", "q"] and len(set(names)) == 6
    assert "base" not in names and all(n.isidentifier() for n in names)
    # `Not p` is read as `p → False`: its argument is a binder too.
    assert tel.conclusion == Var("False")


def test_the_same_statement_is_tried_first() -> None:
    found = proofs("∀ (n : Nat), P n", "∀ (m : Nat), P m")
    assert found[:3] == [("same", "base"), ("same", "@base"), ("same", "@fun m => @base m")]


def test_re_ordered_binders_are_matched() -> None:
    found = proofs(
        "∀ (a b c : Nat), LE.le a b → LE.le b c → LE.le a c",
        "∀ (c b a : Nat), LE.le b c → LE.le a b → LE.le a c",
    )
    assert ("apply", "@fun c b a h_1 h_2 => @base a b c h_2 h_1") in found


def test_curried_and_bundled_hypotheses_are_re_bundled() -> None:
    curried = "∀ (a b c : Nat), LE.le a b → LE.le b c → LE.le a c"
    bundled = "∀ (a b c : Nat), And (LE.le a b) (LE.le b c) → LE.le a c"
    assert ("apply", "@fun a b c h_1 => @base a b c h_1.1 h_1.2") in proofs(curried, bundled)
    assert ("apply", "@fun a b c h_1 h_2 => @base a b c ⟨h_1, h_2⟩") in proofs(bundled, curried)


def test_conjuncts_and_iff_sides_are_swapped_around_base() -> None:
    assert ("restructure", "@fun n => ⟨(@base n).2, (@base n).1⟩") in proofs(
        "∀ (n : Nat), And (P n) (Q n)", "∀ (n : Nat), And (Q n) (P n)"
    )
    assert (
        "restructure",
        "@fun n => ⟨fun y_1 => (@base n).2 y_1, fun y_2 => (@base n).1 y_2⟩",
    ) in proofs("∀ (n : Nat), Iff (P n) (Q n)", "∀ (n : Nat), Iff (Q n) (P n)")


def test_implicit_binders_are_bound_explicitly() -> None:
    found = proofs("∀ {α : Type u_1} (a : α), P a", "∀ {β : Type u_1} (x : β), P x")
    assert ("same", "@fun β x => @base β x") in found


def test_guards_are_the_target_without_base() -> None:
    plan = direction_plan("∀ (p q : Prop), And p q → p", "∀ (p q : Prop), And p q → And q p")
    guards = [(c.strategy, c.proof) for c in plan.guards]
    assert ("assumption", "@fun p q h_1 => h_1") in guards
    assert ("base-free", "@fun p q h_1 => ⟨h_1.2, h_1.1⟩") in guards
    assert all(not c.uses_base for c in plan.guards)
    assert all(c.uses_base and "base" in c.proof for c in plan.proofs)


def test_guards_set_strategies_aside_as_beq_plus_does() -> None:
    assert GUARDS["assumption"] == {"same", "apply", "restructure"}
    assert GUARDS["base-free"] == {"restructure"}
    assert all(v == {"same", "apply", "restructure"} for v in STRICT_GUARDS.values())
    assert PORTFOLIO_VERSION == "bootstrap-terms/1"


def test_an_unreadable_statement_gets_only_the_same_candidates() -> None:
    plan = direction_plan("∀ (n : Nat), P n", "let x := 1; P x")
    assert [c.proof for c in plan.proofs] == ["base", "@base"]
    assert plan.guards == () and "could not be read" in plan.notes[0]
    assert [c.proof for c in direction_plan(None, None).proofs] == ["base", "@base"]


def test_the_plan_is_bounded_and_deterministic() -> None:
    source = "∀ (a b c d : Prop), a → b → c → d → And (And a b) (And c d)"
    target = "∀ (a b c d : Prop), d → c → b → a → And (And d c) (And b a)"
    first = direction_plan(source, target, limit=20, guard_limit=5)
    assert len(first.proofs) <= 20 and len(first.guards) <= 5
    assert first == direction_plan(source, target, limit=20, guard_limit=5)


def test_prove_all_is_the_reference_s() -> None:
    tactics = ["tauto", "simp_all_arith!", "noncomm_ring", "exact?"]
    independent = " ; ".join([f"(all_goals try {t})" for t in tactics])
    combined = "all_goals (" + " ; ".join([f"(try {t})" for t in tactics]) + ")"
    reference = "all_goals intros\nfirst | (" + independent + ") | (" + combined + ")"
    assert prove_all(SOLVERS_APPLY) == reference


def test_the_beq_plus_steps_come_in_the_reference_s_order() -> None:
    plan = beq_plus_plan("∀ (a b : Nat), LE.le a b → LE.le (f a) (f b)")
    steps = [c.strategy for c in plan.candidates]
    assert steps == [
        "exact?",
        "assumption",
        "apply",
        "have-guard",
        "have",
        *(f"convert-{k}" for k in range(5)),
    ]
    assert {c.strategy for c in plan.candidates if c.guard} == GUARD_STEPS
    by_step = {c.strategy: c.proof for c in plan.candidates}
    assert by_step["apply"].startswith("by\n    intros\n    symm_saturate\n    apply base\n")
    assert "    have : LE.le (f a) (f b) := by\n      apply_rules [base]\n" in by_step["have"]
    assert "base" not in by_step["have-guard"] and "base" not in by_step["assumption"]
    assert "convert (config := .unfoldSameFun) base using 3" in by_step["convert-3"]
    assert TACTIC_PORTFOLIO_VERSION == "beq-plus-tactics/1"


def test_without_a_readable_conclusion_the_have_step_is_left_out() -> None:
    plan = beq_plus_plan("let x := 1; P x")
    assert "have" not in {c.strategy for c in plan.candidates} and plan.notes


def test_the_exact_suggestion_is_read_as_the_reference_reads_it() -> None:
    said = ["unused variable", "Try this: exact base a b h"]
    assert exact_suggestion(said) == "exact base a b h"
    assert exact_suggestion(["nothing"]) is None
