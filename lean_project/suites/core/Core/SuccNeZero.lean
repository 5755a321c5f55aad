namespace Core.SuccNeZero

/-- Successor is not zero. -/
theorem main (n : Nat) : n + 1 ≠ 0 :=
  sorry

end Core.SuccNeZero
