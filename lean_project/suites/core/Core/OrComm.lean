namespace Core.OrComm

/-- Swap a disjunction. -/
theorem main (p q : Prop) (h : p ∨ q) : q ∨ p :=
  sorry

end Core.OrComm
