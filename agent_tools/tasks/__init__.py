"""tasks: suites of Lean tasks, where a body is, which edits stay inside it, prefix splitting.

Pure text and file logic: no Lean process except the suite library build."""

from __future__ import annotations

from lsp_bridge import exports as _exports

from .body_bounds import END_BLANKS as END_BLANKS
from .body_bounds import body_bounds as body_bounds
from .body_bounds import editor_trimmed as editor_trimmed
from .body_scope import MAX_BODY_BYTES as MAX_BODY_BYTES
from .body_scope import Symbol as Symbol
from .body_scope import axioms_declared as axioms_declared
from .body_scope import check_scope as check_scope
from .body_scope import code_end as code_end
from .body_scope import code_span as code_span
from .body_scope import flatten_symbols as flatten_symbols
from .body_scope import precheck_body as precheck_body
from .body_scope import sorry_outside as sorry_outside
from .body_scope import suffix_structure as suffix_structure
from .locate import BodySpan as BodySpan
from .locate import DeclarationIndex as DeclarationIndex
from .locate import LocateError as LocateError
from .locate import comment_mask as comment_mask
from .locate import declaration_end as declaration_end
from .locate import declaration_head as declaration_head
from .locate import declaration_index as declaration_index
from .locate import declaration_source as declaration_source
from .locate import locate_body as locate_body
from .locate import scan_trivia as scan_trivia
from .suite import DEFAULT_AXIOMS as DEFAULT_AXIOMS
from .suite import LadSpec as LadSpec
from .suite import Limits as Limits
from .suite import LintSpec as LintSpec
from .suite import Suite as Suite
from .suite import SuiteError as SuiteError
from .suite import SuiteSpec as SuiteSpec
from .suite import Task as Task
from .suite import library_dir as library_dir
from .suite import library_sources as library_sources
from .suite import load_suite as load_suite
from .target_split import Command as Command
from .target_split import PrefixSplit as PrefixSplit
from .target_split import all_wrappers as all_wrappers
from .target_split import check_command as check_command
from .target_split import commands as commands
from .target_split import exit_after as exit_after
from .target_split import insert_before_exit as insert_before_exit
from .target_split import scope_wrappers as scope_wrappers
from .target_split import split_prefix as split_prefix
from .target_split import unwrap as unwrap
from .task_kinds import TASK_KINDS as TASK_KINDS
from .task_kinds import TaskKind as TaskKind
from .task_kinds import reference_statement as reference_statement
from .task_kinds import statement_bounds as statement_bounds
from .task_kinds import writes_proof as writes_proof
from .task_kinds import writes_statement as writes_statement

__all__, _getattr = _exports(__name__)
