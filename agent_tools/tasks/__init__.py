"""tasks: suites of theorem-completion tasks, where a task's proof body is, which edits
stay inside it, and where a task file splits into its prefix module. Pure text and file logic;
no Lean process is started here except the suite library build."""

from .locate import BodySpan, LocateError, comment_mask, declaration_end, locate_body, scan_trivia
from .prefix import (
    Command,
    PrefixSplit,
    all_wrappers,
    check_command,
    commands,
    scope_wrappers,
    split_prefix,
    unwrap,
)
from .scope import (
    MAX_BODY_BYTES,
    Symbol,
    axioms_declared,
    check_scope,
    code_end,
    code_span,
    flatten_symbols,
    precheck_body,
    sorry_outside,
    suffix_structure,
)
from .suite import (
    DEFAULT_AXIOMS,
    LadSpec,
    Limits,
    Suite,
    SuiteError,
    Task,
    library_dir,
    library_sources,
    load_suite,
)

__all__ = [
    "DEFAULT_AXIOMS",
    "MAX_BODY_BYTES",
    "BodySpan",
    "Command",
    "LadSpec",
    "Limits",
    "LocateError",
    "PrefixSplit",
    "Suite",
    "SuiteError",
    "Symbol",
    "Task",
    "all_wrappers",
    "axioms_declared",
    "check_command",
    "check_scope",
    "code_end",
    "code_span",
    "commands",
    "comment_mask",
    "declaration_end",
    "flatten_symbols",
    "library_dir",
    "library_sources",
    "load_suite",
    "locate_body",
    "precheck_body",
    "scan_trivia",
    "scope_wrappers",
    "sorry_outside",
    "split_prefix",
    "suffix_structure",
    "unwrap",
]
