prelude
/-! The claims suite's library: a stand-in for `Init` (the bootstrap Lean has no library) with
the logic, equality, naturals and lists the claims talk about. Everything is stated
explicitly: without `Init` there are no tactics, coercions or numerals. -/

universe u v

-- The compiler's placeholders, needed to declare inductive types without `Init`.
unsafe axiom lcErased : Type
unsafe axiom lcAny : Type

inductive Bool where
  | false : Bool
  | true : Bool

/-- The axiom behind `sorry`: a proof that uses it is incomplete. -/
axiom sorryAx (α : Sort u) (synthetic : Bool) : α

inductive True : Prop where
  | intro : True

inductive False : Prop

/-- `Not a`: `a` leads to a contradiction. -/
def Not (a : Prop) : Prop := a → False

inductive Eq {α : Sort u} (a : α) : α → Prop where
  | refl : Eq a a

structure And (a b : Prop) : Prop where
  intro ::
  left : a
  right : b

inductive Or (a b : Prop) : Prop where
  | inl : a → Or a b
  | inr : b → Or a b

/-- `Iff a b`: `a` and `b` imply each other. -/
structure Iff (a b : Prop) : Prop where
  intro ::
  mp : a → b
  mpr : b → a

/-- The natural numbers: zero and successors. -/
inductive N where
  | z : N
  | s : N → N

namespace N

/-- Addition, by recursion on the second argument. -/
noncomputable def add (m n : N) : N := @N.rec (fun _ => N) m (fun _ r => N.s r) n

/-- Twice a number. -/
noncomputable def double (n : N) : N := add n n

/-- `le m n`: `m` is at most `n`. -/
inductive le (n : N) : N → Prop where
  | refl : le n n
  | step {m : N} : le n m → le n (s m)

end N

inductive List (α : Type u) where
  | nil : List α
  | cons : α → List α → List α

namespace List

/-- The number of elements of a list. -/
noncomputable def length {α : Type u} (l : List α) : N :=
  @List.rec α (fun _ => N) N.z (fun _ _ r => N.s r) l

/-- `l₁` followed by `l₂`. -/
noncomputable def append {α : Type u} (l₁ l₂ : List α) : List α :=
  @List.rec α (fun _ => List α) l₂ (fun a _ r => cons a r) l₁

end List
