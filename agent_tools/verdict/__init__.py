"""verdict: the independent, tamper-proof final check of a submission in fresh sandboxed
Lean processes. Uses tasks; knows nothing of sessions or servers."""

from .verifier import (
    FORBIDDEN,
    PLACEHOLDER_PROVES,
    Statement,
    Verdict,
    Verifier,
    axioms_outside,
    effects_when_elaborated,
    escape_name,
    forbidden_constructs,
    parse_axioms,
    parse_check,
)

__all__ = [
    "FORBIDDEN",
    "PLACEHOLDER_PROVES",
    "Statement",
    "Verdict",
    "Verifier",
    "axioms_outside",
    "effects_when_elaborated",
    "escape_name",
    "forbidden_constructs",
    "parse_axioms",
    "parse_check",
]
