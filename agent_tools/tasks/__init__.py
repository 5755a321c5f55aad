"""tasks: suites of theorem-completion tasks, where a task's proof body is, and which edits
stay inside it. Pure text and file logic; no Lean process is started here except the
suite library build (through repl_pool's one-shot runner)."""

from .locate import BodySpan, LocateError, comment_mask, declaration_end, locate_body, scan_trivia
from .scope import (
    MAX_BODY_BYTES,
    Symbol,
    check_scope,
    code_end,
    flatten_symbols,
    precheck_body,
    suffix_structure,
)
from .suite import DEFAULT_AXIOMS, Limits, Suite, SuiteError, Task, library_dir, load_suite

__all__ = [
    "DEFAULT_AXIOMS",
    "MAX_BODY_BYTES",
    "BodySpan",
    "Limits",
    "LocateError",
    "Suite",
    "SuiteError",
    "Symbol",
    "Task",
    "check_scope",
    "code_end",
    "comment_mask",
    "declaration_end",
    "flatten_symbols",
    "library_dir",
    "load_suite",
    "locate_body",
    "precheck_body",
    "scan_trivia",
    "suffix_structure",
]
