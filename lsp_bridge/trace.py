"""Trace points of a proof step, raised as the audit event ``leanrig.trace`` (`sys.audit`).

Arguments: the point's name, and for Lean's answers the request's method. A profiler hooks
them with `sys.addaudithook` (see bench/step_stamps.py); with no hook they cost almost nothing."""

from typing import Final

TRACE_EVENT: Final = "leanrig.trace"

__all__ = ["TRACE_EVENT"]
