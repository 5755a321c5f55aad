-- The reference statement of task `double_succ` (hidden from agents): for every natural number n, the double of n + 1 is the double of n plus two.
theorem reference (n : N) : Eq (N.double (N.s n)) (N.s (N.s (N.double n))) :=
  sorryAx _ Bool.false
