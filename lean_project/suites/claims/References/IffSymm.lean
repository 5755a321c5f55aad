-- The reference statement of task `iff_symm` (hidden from agents): If p is equivalent to q, then q is equivalent to p.
theorem reference {p q : Prop} (h : Iff p q) : Iff q p :=
  sorryAx _ Bool.false
