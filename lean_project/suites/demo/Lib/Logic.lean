prelude
import Demo.Basic

/-! Propositional logic lemmas (consultation library of the demo suite). -/

namespace Lib.Logic

/-- Commutativity of disjunction: swap the sides of `Or p q` by cases. -/
theorem or_comm (p q : Prop) (h : Or p q) : Or q p :=
  @Or.rec p q (fun _ => Or q p) (fun hp => @Or.inr q p hp) (fun hq => @Or.inl q p hq) h

/-- Commutativity of conjunction: swap the components of `And p q`. -/
theorem and_comm (p q : Prop) (h : And p q) : And q p :=
  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h

/-- Ex falso quodlibet: from a proof of `False`, anything. -/
theorem false_elim (p : Prop) (h : False) : p :=
  @False.rec (fun _ => p) h

/-- The first component of a conjunction. -/
theorem and_left (a b : Prop) (h : And a b) : a :=
  @And.rec a b (fun _ => a) (fun ha _ => ha) h

end Lib.Logic
