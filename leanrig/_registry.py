"""Inspect's entry point for leanrig (needs the `leanrig[inspect]` extra): the tasks, named
``leanrig/<name>``."""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.util import registry_info

from agent_tools.runs.inspect_task import DEFAULT_TIME_LIMIT, suite_task


def _suite(
    suite: str, condition: str = "baseline", kind: str | None = None, tasks: str | None = None,
    epochs: int = 1, time_limit: float = DEFAULT_TIME_LIMIT,
) -> Task:  # fmt: skip
    """A leanrig suite under Inspect: ``-T suite=DIR`` (required), ``-T condition=lad``,
    ``-T kind=proof``, ``-T tasks=ID,ID``, ``-T epochs=K`` (pass@1..K), ``-T time_limit=S``
    (each sample's, default `leanrig run`'s 1800 s); docs/inspect.md."""
    return suite_task(suite, condition=condition, kind=kind, tasks=tasks, epochs=epochs,
                      time_limit=time_limit)  # fmt: skip


# Inspect prefixes a task with the name of the installed package it comes from. From leanrig's
# own source tree it finds the build's `leanrig.egg-info` first (no install record there) and
# leaves the prefix off: then the task is registered under its full name as well.
suite = task(name="suite")(_suite)
if registry_info(suite).name != "leanrig/suite":
    suite = task(name="leanrig/suite")(_suite)


__all__ = ["suite"]
