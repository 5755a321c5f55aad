namespace Core.MulOne

/-- n * 1 = n. -/
theorem main (n : Nat) : n * 1 = n :=
  sorry

end Core.MulOne
