prelude
import Demo.Basic

namespace Demo.AndSwap

/-- A conjunction can be swapped. -/
theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false

end Demo.AndSwap
