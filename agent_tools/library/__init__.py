"""library: the LAD condition's consultation library — its declarations from Lean's own parse
of the suite's ``[lad]`` files, indexed once per content hash in SQLite FTS5 (BM25), and the
queries behind ``search_library`` and ``read_library``. Uses tasks; used by sessions."""

from .index import INDEX_SCHEMA, library_digest, open_library, prepare_library
from .parse import Declaration, LibraryError, parse_library
from .search import MAX_LIMIT, Hit, LibraryIndex, fts_query

__all__ = [
    "INDEX_SCHEMA",
    "MAX_LIMIT",
    "Declaration",
    "Hit",
    "LibraryError",
    "LibraryIndex",
    "fts_query",
    "library_digest",
    "open_library",
    "parse_library",
    "prepare_library",
]
