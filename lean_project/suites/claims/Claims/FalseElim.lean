prelude
import Claims.Basic

namespace Claims.FalseElim

/-- State the claim of task `false_elim` here (its statement replaces `True`). -/
theorem main : True :=
  sorryAx _ Bool.false

end Claims.FalseElim
