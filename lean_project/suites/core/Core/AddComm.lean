namespace Core.AddComm

/-- Addition commutes. -/
theorem main (m n : Nat) : m + n = n + m :=
  sorry

end Core.AddComm
