"""Argument types the CLI's parsers share."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def positive(kind: type[int] | type[float]) -> Callable[[str], float]:

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse
