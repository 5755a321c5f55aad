"""verdict: the independent, tamper-proof final check of a submission in fresh sandboxed
Lean processes. Uses tasks; knows nothing of sessions or servers."""

from .forbidden import FORBIDDEN, effects_when_elaborated, forbidden_constructs
from .lean_output import Statement, escape_name, parse_axioms, parse_check
from .verifier import PLACEHOLDER_PROVES, Verdict, Verifier, axioms_outside

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
