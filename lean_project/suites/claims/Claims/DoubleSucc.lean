prelude
import Claims.Basic

namespace Claims.DoubleSucc

/-- State the claim of task `double_trans` here (its statement replaces `True`). -/
theorem main : True :=
  sorryAx _ Bool.false

end Claims.DoubleSucc
