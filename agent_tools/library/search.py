"""Queries over a built library index (read-only SQLite): BM25-ranked search, source by name.

SQLite runs in a worker thread, never on the event loop; query text is never FTS5 syntax."""

from __future__ import annotations

import re
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path

import anyio

from .parse import Declaration, LibraryError

# bm25 weights in the FTS table's column order: name, statement, docstring.
WEIGHTS = (10.0, 2.0, 4.0)
MAX_LIMIT = 50
QUERY_SECONDS = 10.0
_WORD = re.compile(r"[^\s\"'(){}\[\]:,;*^+\-]+")
# Glue words match most docstrings; `and`, `or`, `not`, `iff` stay: they name connectives.
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "is",
        "by",
        "for",
        "from",
        "with",
        "on",
        "at",
        "as",
        "its",
        "it",
        "be",
        "that",
        "this",
        "which",
    }
)


@dataclass(frozen=True, slots=True)
class Hit:
    name: str
    kind: str
    statement: str
    file: str
    line: int
    docstring: str | None


def fts_query(query: str) -> str | None:
    """The FTS5 MATCH expression (an OR of quoted words and prefixes), or None if no words."""
    terms: list[str] = []
    for word in _WORD.findall(query):
        if word.lower() in STOPWORDS:
            continue
        phrase = '"' + word.replace('"', '""') + '"'
        terms.append(phrase)
        if len(word) >= 3:
            terms.append(phrase + "*")
    return " OR ".join(terms) if terms else None


class LibraryIndex:
    """A built index: ``search`` and ``read``. Thread-safe; close when done."""

    def __init__(self, path: Path, *, digest: str, built: bool, build_ms: float) -> None:
        self.path = path
        self.digest = digest
        self.built = built  # False: taken from the cache
        self.build_ms = build_ms  # this process's time to build or open it
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
        self.count: int = self._db.execute("SELECT count(*) FROM decls").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def search_sync(self, query: str, limit: int) -> list[Hit]:
        match = fts_query(query)
        if match is None:
            return []
        rank = f"bm25(decls_fts, {', '.join(str(w) for w in WEIGHTS)})"
        sql = (
            "SELECT d.name, d.kind, d.statement, d.file, d.line, d.docstring FROM decls_fts "
            f"JOIN decls d ON d.id = decls_fts.rowid WHERE decls_fts MATCH ? "
            f"ORDER BY {rank}, d.id LIMIT ?"
        )
        with self._lock:
            rows = self._db.execute(sql, (match, max(1, min(limit, MAX_LIMIT)))).fetchall()
        return [Hit(*row) for row in rows]

    def read_sync(self, name: str) -> Declaration:
        """The one declaration with full name or name suffix ``name``, else ``LibraryError``."""
        cols = "name, kind, statement, file, line, docstring, source"
        with self._lock:
            rows = self._db.execute(
                f"SELECT {cols} FROM decls WHERE name = ? ORDER BY id", (name,)
            ).fetchall()
            if not rows:
                rows = self._db.execute(
                    f"SELECT {cols} FROM decls WHERE substr(name, -?) = ? ORDER BY id",
                    (len(name) + 1, "." + name),
                ).fetchall()
        if not rows:
            raise LibraryError(
                f"no library declaration named {name!r}",
                hint="use a name returned by search_library",
            )
        names = sorted({r[0] for r in rows})
        if len(names) > 1:
            raise LibraryError(
                f"{name!r} names {len(names)} library declarations: {', '.join(names[:10])}",
                hint="give the full name",
            )
        return Declaration(*rows[0])

    async def search(self, query: str, limit: int) -> list[Hit]:
        with anyio.fail_after(QUERY_SECONDS):
            return await anyio.to_thread.run_sync(
                self.search_sync, query, limit, abandon_on_cancel=True
            )

    async def read(self, name: str) -> Declaration:
        with anyio.fail_after(QUERY_SECONDS):
            return await anyio.to_thread.run_sync(self.read_sync, name, abandon_on_cancel=True)
