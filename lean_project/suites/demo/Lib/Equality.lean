prelude
import Demo.Basic

/-!
# Equality lemmas (consultation library of the demo suite)

Proved with the recursor of `Eq`; the binder names follow the demo tasks, so a lemma's proof
term is also a proof of a task with the same statement.
-/

universe u v

namespace Lib.Equality

/-- Symmetry of equality: from `a = b` get `b = a`, by rewriting `Eq.refl a` along `h`. -/
theorem symm {α : Sort u} (a b : α) (h : @Eq α a b) : @Eq α b a :=
  @Eq.rec α a (fun x _ => @Eq α x a) (@Eq.refl α a) b h

/-- Transitivity of equality: from `a = b` and `b = c` get `a = c`. -/
theorem trans {α : Sort u} {a b c : α} (h₁ : @Eq α a b) (h₂ : @Eq α b c) : @Eq α a c :=
  @Eq.rec α b (fun x _ => @Eq α a x) h₁ c h₂

/-- Congruence: a function maps equal arguments to equal values. -/
theorem congr_arg {α : Sort u} {β : Sort v} (φ : α → β) {a₁ a₂ : α} (h : @Eq α a₁ a₂) :
    @Eq β (φ a₁) (φ a₂) :=
  @Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h

end Lib.Equality
