-- The reference statement of task `add_comm` (hidden from agents): Addition of natural numbers is commutative: for all m and n, m + n = n + m.
theorem reference (m n : N) : Eq (N.add m n) (N.add n m) :=
  sorryAx _ Bool.false
