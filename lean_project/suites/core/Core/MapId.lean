namespace Core.MapId

/-- Mapping the identity. -/
theorem main (xs : List Nat) : xs.map (fun x => x) = xs :=
  sorry

end Core.MapId
