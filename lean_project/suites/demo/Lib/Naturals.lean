prelude
import Demo.Basic

/-! Natural numbers and lists (consultation library of the demo suite). -/

namespace Lib.Naturals

/-- One, the successor of zero. -/
def one : N := N.s N.z

/-- Adding zero on the right: `n + 0 = n` holds by definition (`N.add` recurses on its
second argument), so `Eq.refl` proves it. -/
theorem add_zero (n : N) : @Eq N (N.add n N.z) n :=
  @Eq.refl N n

/-- A one-element list has length one, by definition. -/
theorem length_singleton (a : N) :
    @Eq N (List.length (@List.cons N a (@List.nil N))) (N.s N.z) :=
  @Eq.refl N (N.s N.z)

end Lib.Naturals
