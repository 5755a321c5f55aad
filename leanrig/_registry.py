"""Inspect's entry point for leanrig (needs the `leanrig[inspect]` extra)."""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.util import registry_info

from agent_tools.runs.inspect_task import DEFAULT_TIME_LIMIT, suite_task


def _suite(
    suite: str,
    condition: str = "baseline",
    kind: str | None = None,
    tasks: str | None = None,
    epochs: int = 1,
    time_limit: float = DEFAULT_TIME_LIMIT,
) -> Task:
    """A leanrig suite under Inspect; docs/inspect.md.

    ``-T suite=DIR`` (required), ``-T condition=lad``, ``-T kind=proof``, ``-T tasks=ID,ID``,
    ``-T epochs=K`` (pass@1..K), ``-T time_limit=S`` (seconds per sample)."""
    return suite_task(
        suite, condition=condition, kind=kind, tasks=tasks, epochs=epochs, time_limit=time_limit
    )


# From a source tree Inspect may leave the package prefix off: register the full name too.
suite = task(name="suite")(_suite)
if registry_info(suite).name != "leanrig/suite":
    suite = task(name="leanrig/suite")(_suite)


__all__ = ["suite"]
