-- The reference statement of task `and_imp` (hidden from agents): For propositions p, q and r: if p and q together imply r, then p implies that q implies r.
theorem reference (p q r : Prop) (h : And p q → r) : p → q → r :=
  sorryAx _ Bool.false
