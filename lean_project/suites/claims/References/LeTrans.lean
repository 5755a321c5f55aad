-- The reference statement of task `le_trans` (hidden from agents): if a is at most b and b is at most c, then a is at most c.
theorem reference {a b c : N} (hab : N.le a b) (hbc : N.le b c) : N.le a c :=
  sorryAx _ Bool.false
