namespace Core.AndComm

/-- Swap a conjunction. -/
theorem main (p q : Prop) (h : p ∧ q) : q ∧ p :=
  sorry

end Core.AndComm
