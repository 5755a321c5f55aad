-- The reference statement of task `or_comm` (hidden from agents): For all propositions p and q, p or q implies q or p.
theorem reference (p q : Prop) : Or p q → Or q p :=
  sorryAx _ Bool.false
