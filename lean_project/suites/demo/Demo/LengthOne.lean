prelude
import Demo.Basic

namespace Demo.LengthOne

/-- A one-element list has length one. -/
theorem main (a : N) : @Eq N (List.length (@List.cons N a (@List.nil N))) (N.s N.z) :=
  sorryAx (@Eq N (List.length (@List.cons N a (@List.nil N))) (N.s N.z)) Bool.false

end Demo.LengthOne
