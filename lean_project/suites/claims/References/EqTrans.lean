-- The reference statement of task `eq_trans` (hidden from agents): Equality is transitive: for elements a, b, c of any type, if a = b and b = c then a = c.
theorem reference {α : Sort u} {a b c : α} (hab : Eq a b) (hbc : Eq b c) : Eq a c :=
  sorryAx _ Bool.false
