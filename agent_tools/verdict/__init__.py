"""verdict: the independent, tamper-proof final check of a submission in fresh sandboxed
Lean processes. Uses tasks; knows nothing of sessions or servers."""

from __future__ import annotations

from lsp_bridge import exports as _exports

from .equivalence import DirectionResult as DirectionResult
from .equivalence import Equivalence as Equivalence
from .equivalence import EquivalenceGrader as EquivalenceGrader
from .forbidden import FORBIDDEN as FORBIDDEN
from .forbidden import effects_when_elaborated as effects_when_elaborated
from .forbidden import forbidden_constructs as forbidden_constructs
from .lean_output import Statement as Statement
from .lean_output import escape_name as escape_name
from .lean_output import parse_axioms as parse_axioms
from .lean_output import parse_check as parse_check
from .lean_output import parse_json_messages as parse_json_messages
from .statement_grade import StatementGrader as StatementGrader
from .statement_grade import StatementVerdict as StatementVerdict
from .statement_grade import grading_file as grading_file
from .verifier import PLACEHOLDER_PROVES as PLACEHOLDER_PROVES
from .verifier import References as References
from .verifier import Verdict as Verdict
from .verifier import Verifier as Verifier
from .verifier import axioms_outside as axioms_outside

__all__, _getattr = _exports(__name__)
