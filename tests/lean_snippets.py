"""Prelude-mode Lean texts shared by the tests (they elaborate on the bootstrap Lean)."""

from __future__ import annotations

from lsp_bridge import PRELUDE_HEADER

PRELUDE = PRELUDE_HEADER

ARITH = """noncomputable def add (m n : N) : N := @N.rec (fun _ => N) m (fun _ r => N.s r) n
noncomputable def mul (m n : N) : N := @N.rec (fun _ => N) N.z (fun _ r => add r m) n
noncomputable def two : N := N.s (N.s N.z)
noncomputable def pow (m n : N) : N := @N.rec (fun _ => N) (N.s N.z) (fun _ r => mul r m) n
noncomputable def ten : N := add (mul two two) (add (mul two two) two)
"""

GOOD = "theorem foo : @Eq N N.z N.z := @Eq.refl N N.z\n"
BAD = "theorem foo : @Eq N N.z N.z := @Eq.refl N N.s\n"


def slow_theorem(exponent: str = "(add ten ten)") -> str:
    """A theorem whose (failing) check unfolds 2^exponent unary numerals: seconds to minutes."""
    n = f"(pow two {exponent})"
    return (
        "set_option maxHeartbeats 0 in\n"
        "set_option maxRecDepth 100000000 in\n"
        f"theorem big : @Eq N {n} (N.s {n}) := @Eq.refl N {n}\n"
    )


def decls(count: int) -> str:
    """``count`` independent small definitions (to grow a file's prefix)."""
    return "".join(f"def d{i} : N := N.s N.z\n" for i in range(count))
