"""leanrig's extensions for Inspect (`inspect eval leanrig/suite`): the package Inspect's entry
point names (pyproject's ``[project.entry-points.inspect_ai]``), so its tasks are registered as
``leanrig/NAME``. The code itself is in agent_tools (runs/inspect_task.py)."""
