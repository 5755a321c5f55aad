-- The reference statement of task `add_zero` (hidden from agents): Adding zero to a natural number on the right gives the same number.
theorem reference (n : N) : Eq (N.add n N.z) n :=
  sorryAx _ Bool.false
