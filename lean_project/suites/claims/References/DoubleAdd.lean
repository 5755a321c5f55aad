-- The reference statement of task `double_add` (hidden from agents): Doubling a natural number n gives n + n.
theorem reference (n : N) : Eq (N.double n) (N.add n n) :=
  sorryAx _ Bool.false
