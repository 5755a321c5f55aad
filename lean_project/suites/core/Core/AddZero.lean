namespace Core.AddZero

/-- n + 0 = n. -/
theorem main (n : Nat) : n + 0 = n :=
  sorry

end Core.AddZero
