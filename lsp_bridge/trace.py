"""Trace points of a proof step: the moments a profiler may stamp, raised as the audit event
``leanrig.trace`` (`sys.audit`; arguments: the point's name, and for Lean's answers the
request's method). A profiler adds a hook with `sys.addaudithook` and filters on the event's
name; with no hook an audit event costs tens of nanoseconds.

The standard library's hook, not one of ours: no registry, no global to set, nothing to
monkeypatch (bench/step_stamps.py stamps a step's spans through it). The points, in a step's
order: ``line read``, ``tool starts``, ``write to Lean``, ``Lean answers`` (method), ``Lean's
answers in``, ``slot answered``, ``step done on its slot``, ``slot released``,
``scope checked``, ``result built``, ``tool ends``, ``reply write``.
"""

from typing import Final

TRACE_EVENT: Final = "leanrig.trace"

__all__ = ["TRACE_EVENT"]
