-- The reference statement of task `succ_ne_zero` (hidden from agents): The successor of a natural number is never zero.
theorem reference (n : N) : Not (Eq (N.s n) N.z) :=
  sorryAx _ Bool.false
