namespace Core.ReverseReverse

/-- Reverse twice. -/
theorem main (xs : List Nat) : xs.reverse.reverse = xs :=
  sorry

end Core.ReverseReverse
