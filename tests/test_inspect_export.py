"""`leanrig export inspect`: a run becomes an Inspect log whose samples, scores and tool calls
match results.jsonl and `leanrig report`, with the model's conversation where it was recorded."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from .test_as_typed import DEMO, leanrig

pytestmark = pytest.mark.inspect
ROOT = Path(__file__).resolve().parent.parent
TASKS = ("and_swap", "eq_symm", "refl_z")  # the search agent proves two, not eq_symm


def inspect_or_skip() -> None:
    pytest.importorskip(
        "inspect_ai",
        reason="the `inspect` extra is not installed "
        "(pip install -e '.[inspect]'; `make setup` installs it)",
    )


@dataclass(frozen=True)
class Exported:
    cwd: Path
    run: Path
    log: Any
    results: dict[str, dict[str, Any]]  # by task
    report: dict[str, Any]


def check(args: tuple[str, ...], cwd: Path) -> str:
    done = leanrig(*args, cwd=cwd)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done.stdout


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    """docs/inspect.md's block run by bash from a user's directory, then `leanrig report`."""
    inspect_or_skip()
    from inspect_ai.log import read_eval_log

    cwd = tmp_path_factory.mktemp("user")
    page = (ROOT / "docs" / "inspect.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "export inspect" in b)
    shutil.copytree(DEMO, cwd / "lean_project" / "suites" / "demo")
    (cwd / ".venv").symlink_to(ROOT / ".venv")
    done = subprocess.run(
        ["bash", "-e", "-c", block],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = json.loads(done.stdout.splitlines()[-2])  # export's line
    assert said["log"] == "runs/search.eval" and said["samples"] == len(TASKS)
    assert done.stdout.splitlines()[-1].startswith(f"{len(TASKS)} samples; score")
    check(("report", "runs/search", "--no-plots", "--out", "report"), cwd)
    run = cwd / "runs" / "search"
    lines = (run / "results.jsonl").read_text().splitlines()
    results = {line["task"]: line for line in map(json.loads, lines)}
    report = json.loads((cwd / "report" / "report.json").read_text())
    return Exported(cwd, run, read_eval_log(str(cwd / "runs" / "search.eval")), results, report)


def test_every_attempt_is_a_sample_with_its_verdict_tokens_and_time(exported: Exported) -> None:
    log = exported.log
    assert log.status == "success" and sorted(s.id for s in log.samples) == sorted(TASKS)
    for sample in log.samples:
        r = exported.results[sample.id]
        assert sample.epoch == r["attempt"] == 1
        score = sample.scores["leanrig_verdict"]
        assert score.value == ("C" if r["accepted"] else "I")
        assert all(reason in score.explanation for reason in r["reasons"])
        m = sample.metadata
        assert (m["task"], m["field"], m["difficulty"], m["condition"], m["kind"]) == (
            r["task"],
            r["field"],
            r["difficulty"],
            r["condition"],
            r["kind"],
        )
        assert m["time"]["lean_s"] == r["lean_s"] and m["time"]["model_s"] == r["model_s"]
        assert sample.total_time == r["invocation_s"]
        (usage,) = sample.model_usage.values()
        assert usage.input_tokens + (usage.input_tokens_cache_read or 0) == r["input_tokens"]
        assert usage.output_tokens == r["output_tokens"]
        assert m["tokens"]["input_tokens"] == r["input_tokens"]
    accepted = {s.id for s in log.samples if s.scores["leanrig_verdict"].value == "C"}
    assert accepted == {t for t, r in exported.results.items() if r["accepted"]}


def test_the_run_s_figures_are_leanrig_report_s(exported: Exported) -> None:
    results, report = exported.log.results, exported.report
    metrics = {name: m.value for name, m in results.scores[0].metrics.items()}
    assert metrics["score"] == report["score"] and metrics["completion"] == report["completion"]
    assert metrics["pass_at_1"] == report["pass_at_k"]["1"]
    assert {n: m.value for n, m in results.scores[1].metrics.items()} == report["fields"]
    assert results.metadata["leanrig_report"]["score_ci"] == report["score_ci"]
    assert 0 < metrics["score"] < 100


def test_each_sample_shows_its_tool_calls_with_their_results(exported: Exported) -> None:
    from agent_tools.runs.inspect_log import NO_MODEL_IO

    for sample in exported.log.samples:
        ledger = [
            json.loads(x)
            for x in (exported.run / "attempts" / sample.id / "1" / "ledger.jsonl")
            .read_text()
            .splitlines()
        ]
        tools = [e["tool"] for e in ledger if e.get("closed_by") != "server"]
        calls = [c for m in sample.messages if m.role == "assistant" for c in m.tool_calls or []]
        assert [c.function for c in calls] == tools and "open_task" in tools
        if exported.results[sample.id]["accepted"]:
            assert "set_proof" in tools
        answers = {m.tool_call_id: m for m in sample.messages if m.role == "tool"}
        for call, entry in zip(calls, ledger, strict=False):
            assert json.loads(answers[call.id].text)["outcome"] == entry["outcome"]
        events = [e for e in sample.events if e.event == "tool"]
        assert [e.function for e in events] == tools
        assert sample.metadata["notes"][0] == NO_MODEL_IO
    assert "no model I/O" in exported.log.eval.metadata["transcripts"]


def test_an_attempt_with_recorded_model_io_shows_the_model_s_conversation(
    exported: Exported, tmp_path: Path
) -> None:
    from agent_tools.runs import export_inspect
    from agent_tools.runs.inspect_log import NO_MODEL_IO

    run = tmp_path / "run"
    shutil.copytree(exported.run, run)
    attempt = run / "attempts" / "refl_z" / "1"
    prompt = (attempt / "workspace" / "PROMPT.md").read_text()
    body = "@Eq.refl N N.z"
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "set_proof", "arguments": json.dumps({"body": body})},
    }
    first = {
        "model": "m",
        "messages": [{"role": "user", "content": prompt}],
        "tools": [{"type": "function", "function": {"name": "set_proof"}}],
    }
    second = {
        **first,
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": '{"complete": true}'},
        ],
    }
    answers = [
        {
            "choices": [
                {
                    "message": {"role": "assistant", "tool_calls": [call]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        },
        {
            "choices": [
                {"message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 20, "completion_tokens": 1},
        },
    ]
    ts = exported.results["refl_z"]["started_at"]
    lines = [
        {
            "v": 1,
            "ts": ts,
            "api": "openai-chat",
            "path": "/v1/chat/completions",
            "status": 200,
            "streaming": True,
            "latency_s": 0.01,
            "complete": True,
            "request": request,
            "response": answer,
            "notes": [],
            "error": None,
        }
        for request, answer in zip((first, second), answers, strict=True)
    ]
    (attempt / "model_io.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    (written,) = export_inspect([run], tmp_path / "out")
    assert written.log == tmp_path / "out" / "run.eval" and written.with_model_io == 1
    from inspect_ai.log import read_eval_log

    samples: dict[Any, Any] = {s.id: s for s in read_eval_log(str(written.log)).samples or []}
    recorded = samples["refl_z"]
    assert [m.role for m in recorded.messages] == ["user", "assistant", "tool", "assistant"]
    assert recorded.messages[1].tool_calls[0].arguments == {"body": body}
    assert recorded.messages[-1].text == "done" and "model_io" in recorded.metadata["transcript"]
    assert sum(e.event == "model" for e in recorded.events) == 2
    (set_proof,) = [e for e in recorded.events if e.event == "tool" and e.function == "set_proof"]
    assert set_proof.arguments == {"body": body} and set_proof.result == '{"complete": true}'
    assert samples["and_swap"].metadata["notes"][0] == NO_MODEL_IO


def test_one_file_holds_one_run(exported: Exported) -> None:
    done = leanrig(
        "export", "inspect", "runs/search", "runs/search", "--out", "two.eval", cwd=exported.cwd
    )
    assert done.returncode == 2 and "one file holds one run" in done.stderr
    assert "give --out a directory" in done.stderr and not (exported.cwd / "two.eval").exists()
