"""library: the LAD condition's consultation library — its declarations from Lean's own parse
of the suite's ``[lad]`` files, indexed once per content hash in SQLite FTS5 (BM25), and the
queries behind ``search_library`` and ``read_library``. Uses tasks; used by sessions.

Names load on first use (PEP 562): a part used alone (a model, an error) must not import the
rest (Lean's LSP types, the MCP SDK: ~1 s here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .index import INDEX_SCHEMA, index_dir, library_digest, open_library, prepare_library
    from .parse import Declaration, LibraryError, parse_library
    from .search import MAX_LIMIT, Hit, LibraryIndex, fts_query

# name -> (submodule, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "Declaration": ("parse", "Declaration"),
    "Hit": ("search", "Hit"),
    "INDEX_SCHEMA": ("index", "INDEX_SCHEMA"),
    "LibraryError": ("parse", "LibraryError"),
    "LibraryIndex": ("search", "LibraryIndex"),
    "MAX_LIMIT": ("search", "MAX_LIMIT"),
    "fts_query": ("search", "fts_query"),
    "index_dir": ("index", "index_dir"),
    "library_digest": ("index", "library_digest"),
    "open_library": ("index", "open_library"),
    "parse_library": ("parse", "parse_library"),
    "prepare_library": ("index", "prepare_library"),
}


__getattr__ = _lazy_attributes(__name__, globals(), _LAZY)


__all__ = [
    "INDEX_SCHEMA",
    "MAX_LIMIT",
    "Declaration",
    "Hit",
    "LibraryError",
    "LibraryIndex",
    "fts_query",
    "index_dir",
    "library_digest",
    "open_library",
    "parse_library",
    "prepare_library",
]
