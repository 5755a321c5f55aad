"""`inspect eval leanrig/suite` over three demo tasks, with `mockllm` scripted to fail one: 2 of 3
accepted, leanrig's metrics reported, the tool calls in the log."""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from agent_tools.runs import weighted_score

from .test_as_typed import DEMO

pytestmark = pytest.mark.inspect
ROOT = Path(__file__).resolve().parent.parent
PROOFS: dict[str, str] = json.loads((ROOT / "tests" / "demo_reference_proofs.json").read_text())
TASKS = {"refl_z": 1, "and_swap": 3, "eq_symm": 5}  # id: difficulty (suite.toml)
FAILS = "eq_symm"  # the scripted model sets a wrong body there


def mock_agent(edit: Callable[[str], tuple[str, dict[str, Any]]], task_of: str) -> Any:
    """A stateless mockllm: open the task the prompt names (``task_of``'s group), make
    ``edit``'s tool call with the session, submit."""
    from inspect_ai.model import ChatMessageTool, ModelOutput, ModelUsage, get_model

    def answer(messages: list[Any], tools: list[Any], *_: Any) -> ModelOutput:
        prompt = next(m.text for m in messages if m.role == "user")
        found = re.search(task_of, prompt)
        assert found is not None, prompt[:300]
        task = found.group(1)
        step = sum(m.role == "assistant" for m in messages)
        named = {t.name.rsplit("__", 1)[-1]: t.name for t in tools}
        if step == 0:
            out = ModelOutput.for_tool_call("mockllm", named["open_task"], {"task_id": task})
        elif step == 1:
            opened = next(m for m in messages if isinstance(m, ChatMessageTool))
            session = json.loads(opened.text)["session_id"]
            tool, args = edit(task)
            out = ModelOutput.for_tool_call("mockllm", named[tool], {"session_id": session, **args})
        else:
            out = ModelOutput.for_tool_call("mockllm", "submit", {"answer": "done"})
        # Given, else mockllm counts tokens with tiktoken, which downloads its encoding.
        out.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
        return out

    return get_model("mockllm/model", custom_outputs=answer)


def scripted_model() -> Any:
    """The demo's reference body for each task (a wrong one for FAILS)."""
    return mock_agent(
        lambda task: ("set_proof", {"body": "h" if task == FAILS else PROOFS[task]}),
        r"task `(\w+)` of suite",
    )


def eval_suite(suite: Path, tasks: Iterable[str], model: Any, logs: Path) -> Any:
    """`inspect eval leanrig/suite` over ``tasks`` with ``model``: its one log, which succeeded."""
    pytest.importorskip(
        "inspect_ai",
        reason="the `inspect` extra is not installed "
        "(pip install -e '.[inspect]'; `make setup` installs it)",
    )
    from inspect_ai import eval as inspect_eval

    done: Any = inspect_eval(
        "leanrig/suite",
        task_args={"suite": str(suite), "tasks": ",".join(tasks), "time_limit": 120},
        model=model,
        log_dir=str(logs),
        display="none",
        max_samples=2,
    )
    (log,) = done
    assert log.status == "success", log.error
    return log


# Neither is leanrig's: inspect_ai passes tenacity a deprecated parameter, and its MCP client
# leaves the SDK's answer streams to the garbage collector.
@pytest.mark.filterwarnings("ignore:The 'initial' parameter is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*MemoryObjectReceiveStream:pytest.PytestUnraisableExceptionWarning"
)
def test_the_suite_under_inspect_scores_two_of_three_with_the_tool_calls(tmp_path: Path) -> None:
    log = eval_suite(DEMO, TASKS, scripted_model(), tmp_path / "logs")
    assert log.eval.task == "leanrig/suite" and log.eval.config.time_limit == 120
    verdicts = {s.id: s.scores["leanrig_verdict"].value for s in log.samples}
    assert verdicts == {t: ("I" if t == FAILS else "C") for t in TASKS}
    metrics = {name: m.value for name, m in log.results.scores[0].metrics.items()}
    assert metrics["accuracy"] == pytest.approx(2 / 3)
    assert metrics["completion"] == pytest.approx(100 * 2 / 3)
    expected = weighted_score(list(TASKS.values()), [0.0 if t == FAILS else 1.0 for t in TASKS])
    assert metrics["difficulty_score"] == pytest.approx(expected)
    for sample in log.samples:
        calls = [
            c.function for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []
        ]
        assert [c.rsplit("__", 1)[-1] for c in calls][:2] == ["open_task", "set_proof"]
        results = [m for m in sample.messages if m.role == "tool"]
        assert "session_id" in results[0].text
        assert [e.function for e in sample.events if e.event == "tool"][:2] == calls[:2]
        score = sample.scores["leanrig_verdict"]
        assert score.answer == ("h" if sample.id == FAILS else PROOFS[str(sample.id)])
        assert score.metadata["tool_calls"] == 2 and score.metadata["lean_s"] > 0
        assert sample.input == prompt_of(str(sample.id))
    gc.collect()  # collect those streams under this test's filter


def prompt_of(task: str) -> str:
    from agent_tools.runs.attempt_dir import prompt_text
    from agent_tools.tasks import load_suite

    suite = load_suite(DEMO)
    return prompt_text(suite, suite.task(task), suite.task(task).path)


def test_an_unknown_id_or_condition_is_refused_before_anything_runs() -> None:
    pytest.importorskip("inspect_ai", reason="the `inspect` extra is not installed")
    from agent_tools.runs.inspect_task import SuiteTaskError, suite_task

    with pytest.raises(SuiteTaskError, match="no task nope"):
        suite_task(str(DEMO), tasks="refl_z,nope")
    with pytest.raises(SuiteTaskError, match="baseline or lad"):
        suite_task(str(DEMO), condition="human")
    task = suite_task(str(DEMO), condition="lad", tasks="refl_z", epochs=3)
    (sample,) = list[Any](task.dataset)
    assert "search_library" in str(sample.input) and sample.metadata["condition"] == "lad"
