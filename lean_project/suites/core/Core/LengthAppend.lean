namespace Core.LengthAppend

/-- Length of an append. -/
theorem main (xs ys : List Nat) : (xs ++ ys).length = xs.length + ys.length :=
  sorry

end Core.LengthAppend
