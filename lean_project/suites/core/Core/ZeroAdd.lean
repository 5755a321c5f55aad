namespace Core.ZeroAdd

/-- 0 + n = n. -/
theorem main (n : Nat) : 0 + n = n :=
  sorry

end Core.ZeroAdd
