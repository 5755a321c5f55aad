prelude
import Demo.Basic

namespace Demo.AndLeft

/-- From `𝔽 ∧ 𝓗` (written `And 𝔽 𝓗`), get 𝔽. Non-BMP names on purpose. -/
theorem main (𝔽 𝓗 : Prop) (h : And 𝔽 𝓗) : 𝔽 :=
  sorryAx (𝔽) Bool.false

end Demo.AndLeft
