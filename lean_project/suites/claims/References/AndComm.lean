-- The reference statement of task `and_comm` (hidden from agents): For all propositions p and q: if p and q hold, then q and p hold.
theorem reference (p q : Prop) (h : And p q) : And q p :=
  sorryAx _ Bool.false
