"""Building the LAD library's index: a SQLite + FTS5 file cached per library content hash.

A new index replaces the cache entry by atomic rename, so concurrent builders both succeed."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path

import anyio

from lsp_bridge import LeanInstall, cache_root
from repl_pool import LeanEnvironment, SandboxPolicy, base_env, sandbox_wrapper

from ..tasks import Suite
from .parse import PARSE_SECONDS, Declaration, LibraryError, parse_library
from .search import LibraryIndex

INDEX_SCHEMA = 4  # bump when the index's content changes
_PROJECT_FILES = ("lean-toolchain", "lake-manifest.json")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE decls (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, statement TEXT NOT NULL,
    file TEXT NOT NULL, line INTEGER NOT NULL, docstring TEXT, source TEXT NOT NULL
);
CREATE INDEX decls_name ON decls(name);
CREATE VIRTUAL TABLE decls_fts USING fts5(
    name, statement, docstring, content='decls', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""


def index_dir() -> Path:
    """Where the indexes are cached; a baseline agent must not read it (it holds libraries)."""
    return cache_root() / "library"


def library_digest(suite: Suite, environment: LeanEnvironment) -> str:
    """The digest of all the index depends on: schema, Lean, [lad] files and their imports."""
    if not suite.lad_files:
        raise LibraryError(
            f"suite {suite.name} declares no [lad] library",
            hint='add `[lad] library = ["Lib/….lean"]` to suite.toml, or serve without '
            "--condition lad",
        )
    install = environment.install
    digest = hashlib.sha256(f"v{INDEX_SCHEMA}\0{install.version}@{install.githash}".encode())
    for path in suite.lad_files:
        digest.update(b"\0lad\0" + path.relative_to(suite.root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    for module in suite.spec.library:
        src = suite.root / (module.replace(".", "/") + ".lean")
        if src.is_file():
            digest.update(b"\0lib\0" + module.encode() + b"\0" + src.read_bytes())
    for name in _PROJECT_FILES:
        extra = suite.root / name
        if extra.is_file():
            digest.update(b"\0" + name.encode() + b"\0" + extra.read_bytes())
    return digest.hexdigest()


def write_index(path: Path, declarations: list[Declaration], meta: dict[str, str]) -> None:
    """Write a complete index at ``path`` (beside it, then renamed over it)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.executescript(_SCHEMA)
            db.execute("BEGIN")
            db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
            db.executemany(
                "INSERT INTO decls (name, kind, statement, file, line, docstring, source) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (d.name, d.kind, d.statement, d.file, d.line, d.docstring, d.source)
                    for d in declarations
                ],
            )
            db.execute("INSERT INTO decls_fts(decls_fts) VALUES ('rebuild')")
            db.execute("COMMIT")
        finally:
            db.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


async def open_library(
    suite: Suite,
    environment: LeanEnvironment,
    *,
    cache: Path | None = None,
    timeout: float = PARSE_SECONDS,
) -> LibraryIndex:
    """The suite's LAD library index, from the cache or built now; else ``LibraryError``."""
    started = time.perf_counter()
    digest = await anyio.to_thread.run_sync(library_digest, suite, environment)
    directory = cache or index_dir()
    path = directory / f"{suite.name}-{digest[:16]}.sqlite"
    built = False
    if not await anyio.Path(path).is_file():
        declarations = await parse_library(
            environment, suite.root, suite.lad_files, timeout=timeout
        )
        meta = {
            "schema": str(INDEX_SCHEMA),
            "digest": digest,
            "suite": suite.name,
            "lean": environment.install.version,
            "declarations": str(len(declarations)),
            "files": "\n".join(p.relative_to(suite.root).as_posix() for p in suite.lad_files),
        }
        await anyio.Path(directory).mkdir(parents=True, exist_ok=True)
        await anyio.to_thread.run_sync(write_index, path, declarations, meta)
        built = True
    index = await anyio.to_thread.run_sync(
        lambda: LibraryIndex(
            path, digest=digest, built=built, build_ms=(time.perf_counter() - started) * 1000
        )
    )
    return index


async def prepare_library(
    suite: Suite, install: LeanInstall, lean_path: Path | None, *, sandbox: bool = True
) -> LibraryIndex:
    """The index for a caller without a serving environment; Lean runs sandboxed, read-only."""
    wrapper = tuple(sandbox_wrapper(SandboxPolicy())) if sandbox else ()
    env = base_env([lean_path] if lean_path is not None else [])
    return await open_library(suite, LeanEnvironment(install, suite.root, env=env, wrapper=wrapper))
