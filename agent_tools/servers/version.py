"""leanrig's own version, as the installed distribution says (light: no server imports)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("leanrig")
    except PackageNotFoundError:
        return "0+unknown"
