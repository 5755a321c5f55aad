prelude
/-! A tiny stand-in for `Init` (the bootstrap Lean has no library): just enough logic,
equality, naturals and lists for the demo tasks. Everything is stated explicitly, because
without `Init` there is no elaborator support for implicit coercions or tactics. -/

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

inductive Eq {α : Sort u} (a : α) : α → Prop where
  | refl : Eq a a

inductive And (a b : Prop) : Prop where
  | intro : a → b → And a b

inductive Or (a b : Prop) : Prop where
  | inl : a → Or a b
  | inr : b → Or a b

inductive N where
  | z : N
  | s : N → N

inductive List (α : Type u) where
  | nil : List α
  | cons : α → List α → List α

noncomputable def N.add (m n : N) : N := @N.rec (fun _ => N) m (fun _ r => N.s r) n

noncomputable def List.length {α : Type u} (l : List α) : N :=
  @List.rec α (fun _ => N) N.z (fun _ _ r => N.s r) l
