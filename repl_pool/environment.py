"""A Lean environment; two with the same ``id`` start interchangeable processes."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lsp_bridge import LeanInstall, ServerCommand


@dataclass(frozen=True, slots=True)
class LeanEnvironment:
    install: LeanInstall
    project: Path
    env: Mapping[str, str] | None = None  # complete environment for Lean (None: inherit)
    wrapper: tuple[str, ...] = ()  # prefix for every Lean command (sandbox, rlimits)
    use_lake: bool | None = None  # None: lake serve when the project has a lakefile
    extra: tuple[str, ...] = field(default=())  # anything else that must split the pool

    @property
    def id(self) -> str:
        digest = hashlib.sha256(
            repr(
                (sorted((self.env or {}).items()), self.wrapper, self.use_lake, self.extra)
            ).encode()
        ).hexdigest()[:10]
        return f"{self.install.lean}@{self.install.version}:{self.project}#{digest}"

    def server_command(self) -> ServerCommand:
        return self.install.server_command(
            self.project, env=self.env, use_lake=self.use_lake, wrapper=self.wrapper
        )
