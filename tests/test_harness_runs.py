"""`leanrig run --harness claude-code|codex` (the real, pinned harnesses) against `leanrig model
serve`'s replay model, as a user types it with the sandbox on; then `report` and `compare`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent_tools.runs.harness import KEY_PLACEHOLDER, HarnessName, installed_harness

from .conftest import stray_guard
from .test_as_typed import DEMO, SUITE, leanrig, leanrig_each, leanrig_exe, sandbox_or_skip

ROOT = Path(__file__).resolve().parent.parent
PROOFS: dict[str, str] = json.loads((ROOT / "tests" / "demo_reference_proofs.json").read_text())
# One task of each field and a unicode name.
TASKS = ("and_swap", "eq_symm", "add_zero", "length_one", "and_left_unicode")
HARNESSES = ("claude-code", "codex")
CONDITIONS = ("baseline", "lad")
LIMIT = "120"  # bounds a hung attempt only


def harnesses_or_skip() -> None:
    missing = [p for p in ("node", "npm") if shutil.which(p) is None]
    if missing:
        pytest.skip(
            f"{' and '.join(missing)} not on PATH: the agent harnesses (Claude Code, "
            "Codex) install from the npm registry (`make harnesses`)"
        )
    names: tuple[HarnessName, ...] = ("claude-code", "codex")
    for name in names:
        if installed_harness(name) is None:
            pytest.fail(f"{name} is not installed: run `make harnesses` (`make test` does)")


def plan(condition: str) -> dict[str, Any]:
    """Per task: open it, a wrong body (baseline) or a library search (LAD), the right body,
    the verdict, a final word."""

    def steps(task: str) -> list[dict[str, Any]]:
        first: dict[str, Any] = (
            {"tool": "set_proof", "args": {"session_id": "{session}", "body": "h"}}
            if condition == "baseline"
            else {"tool": "search_library", "args": {"query": "symmetry", "limit": 3}}
        )
        return [
            {"tool": "open_task", "args": {"task_id": "{task}"}},
            first,
            {"tool": "set_proof", "args": {"session_id": "{session}", "body": PROOFS[task]}},
            {"tool": "check_proof", "args": {"session_id": "{session}"}},
            {"say": "done"},
        ]

    return {"tasks": {t: steps(t) for t in TASKS}}


SLEEPING_PLAN = {
    "calls": [
        {"tool": "open_task", "args": {"task_id": "{task}"}},
        {"sleep": 600},
        {"say": "never"},
    ]
}


@dataclass
class ModelServer:
    url: str
    log: Path
    process: subprocess.Popen[str]

    def stop(self) -> None:
        """SIGTERM, then exit 0 expected."""
        self.process.terminate()
        self.process.communicate(timeout=30)
        assert self.process.returncode == 0, self.process.returncode


def model_serve(cwd: Path, plan_file: str, log: str) -> ModelServer:
    """`leanrig model serve --plan FILE --log FILE` as typed; its URL read off stderr."""
    process = subprocess.Popen(
        [str(leanrig_exe()), "model", "serve", "--plan", plan_file, "--log", log],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # it exits after this line on a bad plan
    found = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
    if found is None:
        process.kill()
        process.communicate()
        raise AssertionError(f"leanrig model serve said: {line!r} {process.stderr.read()!r}")
    return ModelServer(found.group(1), cwd / log, process)


@dataclass(frozen=True)
class Runs:
    cwd: Path
    models: dict[str, ModelServer]  # by condition
    done: dict[tuple[str, str], dict[str, Any]]  # (harness, condition) -> summary


def out(harness: str, condition: str) -> str:
    return f"runs/{harness}-{condition}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    sandbox_or_skip()
    harnesses_or_skip()
    cwd = tmp_path_factory.mktemp("user")
    shutil.copytree(DEMO, cwd / SUITE)
    models: dict[str, ModelServer] = {}
    try:
        for condition in CONDITIONS:
            (cwd / f"{condition}.json").write_text(json.dumps(plan(condition)))
            models[condition] = model_serve(cwd, f"{condition}.json", f"{condition}-served.jsonl")
        with stray_guard():
            commands = [
                (
                    "run",
                    "--suite",
                    SUITE,
                    "--harness",
                    harness,
                    "--model",
                    "replay",
                    "--tasks",
                    ",".join(TASKS),
                    "--model-endpoint",
                    models[condition].url,
                    "--condition",
                    condition,
                    "--out",
                    out(harness, condition),
                    "--time-limit",
                    LIMIT,
                    "--quiet",
                    *(("--reasoning", "low") if condition == "lad" else ()),
                )
                for harness in HARNESSES
                for condition in CONDITIONS
            ]
            finished = leanrig_each(*commands, cwd=cwd)
        done = {}
        for command, result in zip(commands, finished, strict=True):
            assert result.returncode == 0, (command, result.stdout[-2000:], result.stderr[-3000:])
            key = (
                command[command.index("--harness") + 1],
                command[command.index("--condition") + 1],
            )
            done[key] = json.loads(result.stdout.strip().splitlines()[-1])
        yield Runs(cwd, models, done)
    finally:
        for server in models.values():
            server.stop()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("harness", HARNESSES)
def test_the_demo_tasks_are_proved_through_the_harness_and_the_ledger_shows_the_calls(
    runs: Runs, harness: str, condition: str
) -> None:
    summary = runs.done[(harness, condition)]
    assert summary["attempts"] == len(TASKS) and summary["accepted"] == len(TASKS), summary
    run_dir = runs.cwd / out(harness, condition)
    first = "set_proof" if condition == "baseline" else "search_library"
    for task in TASKS:
        # Each attempt's own ledger: a library call belongs to no session, so to no task.
        ledger = lines(run_dir / "attempts" / task / "1" / "ledger.jsonl")
        tools = [entry["tool"] for entry in ledger if entry.get("tool")]
        assert tools[:4] == ["open_task", first, "set_proof", "check_proof"], (task, tools)
    assert len(lines(run_dir / "ledger.jsonl")) >= 4 * len(TASKS)


@pytest.mark.parametrize("condition", CONDITIONS)
@pytest.mark.parametrize("harness", HARNESSES)
def test_the_gateway_counts_what_the_model_served_and_what_the_harness_reported(
    runs: Runs, harness: str, condition: str
) -> None:
    api = "anthropic-messages" if harness == "claude-code" else "openai-responses"
    served: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for call in lines(runs.models[condition].log):
        if call["api"] == api:
            for key in ("input_tokens", "cached_input_tokens", "output_tokens"):
                served[call["task"]][key] += call[key]
            served[call["task"]]["calls"] += 1
    run_dir = runs.cwd / out(harness, condition)
    for r in lines(run_dir / "results.jsonl"):
        attempt = run_dir / "attempts" / r["task"] / "1"
        calls = lines(attempt / "model_calls.jsonl")
        # A call the harness gave up on is a line too; the model served the answered ones.
        answered = [c for c in calls if c["complete"]]
        model_calls = [c for c in calls if c["kind"] == "model"]
        assert r["usage_source"] == "gateway" and r["model_calls"] == len(model_calls)
        assert r["other_calls"] == len(calls) - len(model_calls)
        assert len(answered) == served[r["task"]]["calls"], calls
        for key in ("input_tokens", "cached_input_tokens", "output_tokens"):
            assert r[key] == served[r["task"]][key], (r["task"], key)
            assert r["harness_usage"][key] == r[key], (r["task"], key)
        assert r["usage_mismatch"] == []
        assert r["model_s"] > 0 and r["lean_s"] > 0 and r["model_s"] < r["invocation_s"]
        # --reasoning low (the LAD runs) reached the model in the harness's own terms.
        efforts = {c["reasoning_effort"] for c in answered}
        assert (efforts == {"low"}) == (condition == "lad"), efforts
        # The harness got the gateway's placeholder, never a key.
        assert KEY_PLACEHOLDER in (attempt / "harness.json").read_text()


@pytest.mark.parametrize("harness", HARNESSES)
def test_run_json_records_the_harness_its_version_and_what_it_was_given(
    runs: Runs, harness: str
) -> None:
    info = json.loads((runs.cwd / out(harness, "baseline") / "run.json").read_text())
    h = info["harness"]
    assert h["name"] == harness and h["model"] == "replay"
    assert re.search(r"\d+\.\d+\.\d+", h["version"]), h["version"]
    assert "{prompt}" in h["command"] and h["files"]
    assert (
        info["agent_network"] == "model" and info["model_endpoint"] == runs.models["baseline"].url
    )
    assert info["agent_command"] == f"--harness {harness}"
    lad = json.loads((runs.cwd / out(harness, "lad") / "run.json").read_text())["harness"]
    assert h["reasoning"] is None and lad["reasoning"] == "low"
    assert "low" in json.dumps(lad["command"]) + json.dumps(lad["files"])
    assert "its model only" in info["sandbox"]


def test_report_and_compare_show_model_time_and_lean_time_per_task(runs: Runs) -> None:
    dirs = [out(h, c) for h in HARNESSES for c in CONDITIONS]
    board = leanrig("report", *dirs, "--no-plots", cwd=runs.cwd)
    assert board.returncode == 0, board.stderr[-2000:]
    one = leanrig("report", out("codex", "baseline"), "--no-plots", cwd=runs.cwd)
    assert one.returncode == 0, one.stderr[-2000:]
    md = (runs.cwd / out("codex", "baseline") / "report" / "report.md").read_text()
    assert "| model s | Lean s | rest s |" in md and "harness codex" in md
    row = next(x for x in md.splitlines() if x.startswith("| and_swap |"))
    model_s, lean_s = (float(c) for c in row.split("|")[7:9])
    assert model_s > 0 and lean_s > 0
    compared = leanrig(
        "compare",
        out("claude-code", "baseline"),
        out("claude-code", "lad"),
        "--no-plots",
        cwd=runs.cwd,
    )
    assert compared.returncode == 0, compared.stderr[-2000:]


def attempt_alive(run_dir: Path) -> list[psutil.Process]:
    """Processes still alive that carry one of the run's attempt tokens."""
    tokens = set()
    for config in run_dir.glob("attempts/*/*/workspace/mcp.json"):
        tokens |= {
            s["env"]["LEANRIG_ATTEMPT_TOKEN"]
            for s in json.loads(config.read_text())["mcpServers"].values()
        }
    alive = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("LEANRIG_ATTEMPT_TOKEN") in tokens:
                alive.append(p)
        except psutil.Error:
            continue
    return alive


@pytest.mark.parametrize("harness", HARNESSES)
def test_at_the_time_limit_the_harness_s_process_tree_is_gone(tmp_path: Path, harness: str) -> None:
    sandbox_or_skip()
    harnesses_or_skip()
    shutil.copytree(DEMO, tmp_path / SUITE)
    (tmp_path / "sleep.json").write_text(json.dumps(SLEEPING_PLAN))
    model = model_serve(tmp_path, "sleep.json", "served.jsonl")
    try:
        with stray_guard():
            args = [
                "run",
                "--suite",
                SUITE,
                "--harness",
                harness,
                "--model",
                "replay",
                "--model-endpoint",
                model.url,
                "--tasks",
                "and_swap",
                "--time-limit",
                "10",
                "--out",
                "slept",
                "--quiet",
            ]
            done = leanrig(*args, cwd=tmp_path)
            assert done.returncode == 0, done.stderr[-3000:]
            (result,) = lines(tmp_path / "slept" / "results.jsonl")
            assert result["timed_out"] and not result["accepted"]
            assert result["tool_calls"] >= 1
            assert attempt_alive(tmp_path / "slept") == []
            home = str(tmp_path / "slept" / "attempts")
            left = [
                p
                for p in psutil.process_iter(["cmdline"])
                if any(home in part for part in (p.info["cmdline"] or []))
            ]
            assert left == []
    finally:
        model.stop()


PROBE = """
import os, sys, urllib.request
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except Exception as exc:
        return type(exc).__name__
model = os.environ.get("LEANRIG_MODEL_URL")
print("model", get(model + "/v1/models") if model else "no-url")
print("other", get(sys.argv[1] + "/v1/models"))
"""


@pytest.mark.parametrize(
    ("policy", "model_seen", "other_seen"),
    [(None, "200", "URLError"), ("all", "200", "200"), ("none", "no-url", "URLError")],
)
def test_inside_the_sandbox_only_the_model_is_reachable_unless_asked(
    tmp_path: Path, policy: str | None, model_seen: str, other_seen: str
) -> None:
    """A probe agent in the sandbox reaches the model through the gateway (no model under policy
    `none`), and another server on the host's loopback only under policy `all`."""
    sandbox_or_skip()
    shutil.copytree(DEMO, tmp_path / SUITE)
    (tmp_path / "plan.json").write_text(json.dumps({"calls": [{"say": "hi"}]}))
    (tmp_path / "probe.py").write_text(PROBE)
    model = model_serve(tmp_path, "plan.json", "served.jsonl")
    other = model_serve(tmp_path, "plan.json", "other.jsonl")
    try:
        agent = f"{sys.executable} {tmp_path / 'probe.py'} {other.url}"
        args = [
            "run",
            "--suite",
            SUITE,
            "--agent",
            agent,
            "--tasks",
            "refl_z",
            "--out",
            "probed",
            "--time-limit",
            "60",
            "--quiet",
        ]
        if policy != "none":
            args += ["--model-endpoint", model.url]
        if policy is not None:
            args += ["--agent-network", policy]
        with stray_guard():
            done = leanrig(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        log = (tmp_path / "probed" / "attempts" / "refl_z" / "1" / "agent.log").read_text()
        assert f"model {model_seen}" in log and f"other {other_seen}" in log, log
    finally:
        for server in (model, other):
            server.stop()
