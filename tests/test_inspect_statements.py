"""Statement tasks under `inspect eval leanrig/suite`, with `mockllm` giving the claims suite's
replay candidates: `leanrig run`'s prompt, the statement tools, graded by equivalence (1 of 2)."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from .test_inspect_task import eval_suite, mock_agent
from .test_statement_runs import CLAIMS

pytestmark = pytest.mark.inspect
PLAN = json.loads((CLAIMS / "replay-plan.json").read_text())
TASKS = {"add_comm": "C", "add_zero": "I"}  # the plan's candidates: equivalent, not


def candidate(task: str) -> str:
    (step,) = [s for s in PLAN["tasks"][task] if s.get("tool") == "set_statement"]
    return str(step["args"]["statement"])


def scripted_model() -> Any:
    """The plan's candidate statement for each task."""
    return mock_agent(
        lambda task: ("set_statement", {"statement": candidate(task)}), r"task `(\w+)` \(suite"
    )


@pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*MemoryObjectReceiveStream:pytest.PytestUnraisableExceptionWarning"
)
def test_statement_tasks_under_inspect_are_graded_by_equivalence(tmp_path: Path) -> None:
    from agent_tools.runs.attempt_dir import prompt_text
    from agent_tools.tasks import load_suite

    log = eval_suite(CLAIMS, TASKS, scripted_model(), tmp_path / "logs")
    scores = {s.id: s.scores["leanrig_verdict"] for s in log.samples}
    assert {t: s.value for t, s in scores.items()} == TASKS
    assert log.results.scores[0].metrics["accuracy"].value == pytest.approx(1 / 2)
    suite = load_suite(CLAIMS)
    for sample in log.samples:
        task = str(sample.id)
        assert sample.metadata["kind"] == "statement"
        assert sample.input == prompt_text(suite, suite.task(task), suite.task(task).path)
        calls = [
            c.function.rsplit("__", 1)[-1]
            for m in sample.messages
            if m.role == "assistant"
            for c in m.tool_calls or []
        ]
        assert calls[:2] == ["open_task", "set_statement"]
        score = scores[task]
        assert score.answer == candidate(task)
        assert score.metadata["statement"] == candidate(task)
        assert score.metadata["tool_calls"] == 2
    gc.collect()  # collect the MCP client's streams under this test's filter
