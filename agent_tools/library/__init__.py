"""library: the LAD condition's library, parsed by Lean, indexed in SQLite FTS5, and queried.

Names load on first use (PEP 562): a part used alone must not import the rest."""

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
