"""The tools' inputs: one closed, strict pydantic model per tool, limits as constraints.

Models only: no knowledge of which tool takes them, no service, Lean or wire."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from ..library import MAX_LIMIT as MAX_LIBRARY_RESULTS
from ..tasks import MAX_BODY_BYTES

MAX_CANDIDATES = 16
MAX_QUERY_CHARS = 1000  # search_library's query (checked by the service: no maxLength in schemas)
MAX_BODY_CHARS = MAX_BODY_BYTES  # a code point is at least one UTF-8 byte; bytes are checked too
# Checked by the service, not the schema:
MAX_TERM_CHARS = 20_000  # check_term's term
MAX_NAME_CHARS = 1_000  # get_declaration's name, get_completions' prefix


class ToolInput(BaseModel):
    """Closed and strict: unknown keys and coercions ("8" for 8) are errors on every wire."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


SessionId = Annotated[str, Field(description="the session_id returned by open_task")]
MAX_STATEMENT_CHARS = 64 * 1024  # a statement is a line or a few, not a file

Body = Annotated[
    str,
    Field(
        max_length=MAX_BODY_CHARS,
        description="the new proof body (the text after the theorem's `:=`), at most 1 MB",
    ),
]


class NoArguments(ToolInput):
    pass


class OpenTaskInput(ToolInput):
    task_id: Annotated[str, Field(description="a task id from list_tasks")]


class SessionInput(ToolInput):
    session_id: SessionId


class SetProofInput(ToolInput):
    session_id: SessionId
    body: Body


class SetStatementInput(ToolInput):
    session_id: SessionId
    statement: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_STATEMENT_CHARS,
            description="the target's new statement: its binders and type, the text between "
            "the theorem's name and its `:=`, e.g. ` (a b : Nat) : a + b = b + a`",
        ),
    ]


class ReplaceInProofInput(ToolInput):
    session_id: SessionId
    old: Annotated[
        str,
        Field(
            min_length=1,
            max_length=MAX_BODY_CHARS,
            description="text occurring exactly once in the proof body",
        ),
    ]
    new: Annotated[str, Field(max_length=MAX_BODY_CHARS, description="its replacement")]


Line = Annotated[int, Field(ge=1, description="1-based line")]
Column = Annotated[int, Field(ge=1, description="1-based Unicode code point column")]


class GetGoalsInput(ToolInput):
    session_id: SessionId
    line: Line
    column: Column


class PositionInput(ToolInput):
    session_id: SessionId
    line: Line
    column: Column


class CheckTermInput(ToolInput):
    session_id: SessionId
    term: Annotated[
        str,
        Field(
            description=f"a Lean term, as you would write it after `#check` (at most "
            f"{MAX_TERM_CHARS} characters)",
        ),
    ]
    in_context: Annotated[
        bool,
        Field(
            description="true: the target theorem's hypotheses and variables are in scope "
            "(the term is elaborated where its proof begins); false: as `#check` just before "
            "the target theorem"
        ),
    ]


class DeclarationInput(ToolInput):
    session_id: SessionId
    name: Annotated[
        str,
        Field(
            description="a constant's name, as you would write it at the target theorem "
            "(`And.intro`, `Nat.add_comm`; opened namespaces apply)",
        ),
    ]


class CompletionsInput(ToolInput):
    # Nullable arguments may be left out, though the published schema requires them.
    session_id: SessionId
    line: Annotated[int | None, Field(ge=1, description="1-based line, or null with `prefix`")] = (
        None
    )
    column: Annotated[
        int | None, Field(ge=1, description="1-based code point column, or null with `prefix`")
    ] = None
    prefix: Annotated[
        str | None,
        Field(
            description="the start of a name (`And.i`, `Nat.add_`), completed as at the target "
            "theorem; or null with `line` and `column`",
        ),
    ] = None


class TryProofsInput(ToolInput):
    session_id: SessionId
    bodies: Annotated[
        list[Annotated[str, Field(max_length=MAX_BODY_CHARS)]],
        Field(
            min_length=1,
            max_length=MAX_CANDIDATES,
            description=f"candidate proof bodies (1 to {MAX_CANDIDATES}), each at most 1 MB",
        ),
    ]


class SearchLibraryInput(ToolInput):
    query: Annotated[
        str,
        Field(
            description="words for what you need: a concept (`symmetry of equality`), part of "
            f"a name (`or_comm`), a type's constants; at most {MAX_QUERY_CHARS} characters"
        ),
    ]
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_LIBRARY_RESULTS,
            description=f"at most this many declarations (1 to {MAX_LIBRARY_RESULTS})",
        ),
    ]


class ReadLibraryInput(ToolInput):
    name: Annotated[
        str,
        Field(
            description="a declaration's name from search_library (the full name, or its "
            "last part when that is unique)"
        ),
    ]


__all__ = [
    "MAX_BODY_CHARS",
    "MAX_CANDIDATES",
    "MAX_LIBRARY_RESULTS",
    "MAX_NAME_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_TERM_CHARS",
    "Body",
    "CheckTermInput",
    "CompletionsInput",
    "DeclarationInput",
    "GetGoalsInput",
    "NoArguments",
    "OpenTaskInput",
    "PositionInput",
    "ReadLibraryInput",
    "ReplaceInProofInput",
    "SearchLibraryInput",
    "SessionId",
    "SessionInput",
    "SetProofInput",
    "ToolInput",
    "TryProofsInput",
]
