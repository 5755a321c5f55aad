"""`PoolKeys`: a file's text to its `PoolKey`, remembering what starting a process for it needs.

Bookkeeping only: it must not start processes or decide which slot serves a key."""

from __future__ import annotations

from lsp_bridge import parse_header

from .environment import LeanEnvironment
from .slot import PoolKey


class PoolKeys:
    """The keys a pool has handed out, for ``environment`` (the default) or others."""

    __slots__ = ("default", "environments", "header_texts")

    def __init__(self, environment: LeanEnvironment) -> None:
        self.default = environment
        self.environments: dict[str, LeanEnvironment] = {environment.id: environment}
        self.header_texts: dict[PoolKey, str] = {}

    def key_for(self, text: str, environment: LeanEnvironment | None = None) -> PoolKey:
        """The key of a file's text: its environment and its normalized header."""
        env = environment or self.default
        self.environments.setdefault(env.id, env)
        header = parse_header(text)
        key = PoolKey(env.id, header.key)
        self.header_texts.setdefault(key, header.text())
        return key

    def header_text(self, key: PoolKey) -> str:
        """The text a new process for ``key`` starts with: its header as first written."""
        return self.header_texts.get(key) or key.header + "\n"
