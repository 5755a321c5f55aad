-- The reference statement of task `false_elim` (hidden from agents): Anything follows from False: for every proposition p, False implies p.
theorem reference (p : Prop) (h : False) : p :=
  sorryAx _ Bool.false
