-- The reference statement of task `length_nil` (hidden from agents): The empty list of elements of any type has length zero.
theorem reference {α : Type u} : Eq (List.length (@List.nil α)) N.z :=
  sorryAx _ Bool.false
