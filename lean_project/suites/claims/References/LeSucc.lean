-- The reference statement of task `le_succ` (hidden from agents): Every natural number n is less than or equal to its successor.
theorem reference (n : N) : N.le n (N.s n) :=
  sorryAx _ Bool.false
