"""leanrig's own version, as the installed distribution says (light: no server imports)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("leanrig")
    except PackageNotFoundError:  # running from a source tree without installing
        return "0+unknown"
