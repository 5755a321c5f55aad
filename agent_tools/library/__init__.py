"""library: the LAD condition's consultation library — its declarations from Lean's own parse
of the suite's ``[lad]`` files, indexed once per content hash in SQLite FTS5 (BM25), and the
queries behind ``search_library`` and ``read_library``. Uses tasks; used by sessions.

Names load on first use (PEP 562): a part used alone (a model, an error) must not import the
rest (Lean's LSP types, the MCP SDK: ~1 s here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsp_bridge import exports as _exports

if TYPE_CHECKING:
    from .index import INDEX_SCHEMA as INDEX_SCHEMA
    from .index import index_dir as index_dir
    from .index import library_digest as library_digest
    from .index import open_library as open_library
    from .index import prepare_library as prepare_library
    from .parse import Declaration as Declaration
    from .parse import LibraryError as LibraryError
    from .parse import declaration_kind as declaration_kind
    from .parse import declarations_in as declarations_in
    from .parse import docstring as docstring
    from .parse import parse_library as parse_library
    from .search import MAX_LIMIT as MAX_LIMIT
    from .search import Hit as Hit
    from .search import LibraryIndex as LibraryIndex
    from .search import fts_query as fts_query

__all__, _getattr = _exports(__name__)
if not TYPE_CHECKING:
    __getattr__ = _getattr
