namespace Core.NotNotIntro

/-- Double negation introduction. -/
theorem main (p : Prop) (hp : p) : ¬¬p :=
  sorry

end Core.NotNotIntro
