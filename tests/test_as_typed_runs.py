"""`leanrig run`, `report RUN_DIR…` and `compare` as a user types them, on the demo suite cut to
two tasks, with the sandbox on. The scripted agent (tests/agents/mcp_agent.py) learns its server,
task and workspace only from the command's placeholders, so a verified attempt proves them."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .conftest import stray_guard
from .test_as_typed import DEMO, SUITE, leanrig, leanrig_each, leanrig_exe, sandbox_or_skip
from .test_runner import attempt_processes

ROOT = Path(__file__).resolve().parent.parent
AGENT = ROOT / "tests" / "agents" / "mcp_agent.py"
TASKS = ("refl_z", "and_swap")
LIMIT = "60"  # bounds a hung attempt only
PRICES = """fixed = 2026-05-01
[models."scripted"]
input = {input}
cached_input = {cached}
output = {output}
"""
# mcp_agent's usage.json: 1000 input tokens (200 of them cached), 50 output, priced above.
USD_PER_SOLVE = (800 * 1.25 + 200 * 0.125 + 50 * 10.0) / 1e6


def agent(mode: str, *extra: str) -> str:
    """An agent command as docs/runs.md shows one: placeholders in its words, no shell."""
    words = [
        "env",
        "LEANRIG_MCP_CONFIG={mcp_config}",
        "LEANRIG_TASK={task}",
        "LEANRIG_WORKSPACE={workspace}",
        sys.executable,
        str(AGENT),
        mode,
        *extra,
    ]
    return shlex.join(words)


def user_dir(root: Path) -> Path:
    """A working directory with the demo suite, cut to TASKS, at its README path."""
    suite = root / SUITE
    shutil.copytree(DEMO, suite)
    head, *blocks = (suite / "suite.toml").read_text().split("[[tasks]]")
    kept = [b for b in blocks if any(f'id = "{t}"' in b for t in TASKS)]
    assert len(kept) == len(TASKS)
    (suite / "suite.toml").write_text(head + "".join("[[tasks]]" + b for b in kept))
    (root / "prices.toml").write_text(PRICES.format(input=1.25, cached=0.125, output=10.0))
    (root / "doubled.toml").write_text(PRICES.format(input=2.5, cached=0.25, output=20.0))
    return root


def summary_of(done: Any) -> dict[str, Any]:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def results(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def run_json(run_dir: Path) -> dict[str, Any]:
    info: dict[str, Any] = json.loads((run_dir / "run.json").read_text())
    return info


@dataclass(frozen=True)
class Runs:
    cwd: Path
    base: Path  # runs/run-<timestamp>: the default --out
    base_done: Any
    lad: Path  # lad-run: --condition lad, 2 attempts, 2 in parallel
    lad_summary: dict[str, Any]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """Two runs over the same suite: a baseline with default options, and a LAD run with most
    of the other options."""
    sandbox_or_skip()
    cwd = user_dir(tmp_path_factory.mktemp("user"))
    with stray_guard():
        base_done, lad_done = leanrig_each(
            (
                "run",
                "--suite",
                SUITE,
                "--agent",
                agent("solve"),
                "--time-limit",
                LIMIT,
                "--model",
                "scripted",
                "--agent-tool",
                "mcp_agent",
                "--prices",
                "prices.toml",
            ),
            (
                "run",
                "--suite",
                SUITE,
                "--agent",
                agent("alternate", "{prompt}"),
                "--condition",
                "lad",
                "--time-limit",
                LIMIT,
                "--attempts",
                "2",
                "--parallel",
                "2",
                "--out",
                "lad-run",
                "--label",
                "with library",
                "--model",
                "scripted",
                "--agent-tool",
                "mcp_agent",
                "--agent-network",
                "--quiet",
            ),
            cwd=cwd,
        )
        base = Path(summary_of(base_done)["run_dir"])
        lad_summary = summary_of(lad_done)
        for run_dir in (base, cwd / "lad-run"):
            assert attempt_processes(run_dir) == [], "the run left attempt processes alive"
    return Runs(cwd, base, base_done, cwd / "lad-run", lad_summary)


def test_run_with_default_out_verifies_every_task(runs: Runs) -> None:
    summary = summary_of(runs.base_done)
    assert runs.base.parent == (runs.cwd / "runs").resolve()
    assert runs.base.name.startswith("run-")
    assert (summary["attempts"], summary["accepted"], summary["skipped"]) == (2, 2, 0)
    assert summary["infra_retries"] == 0 and summary["elapsed_s"] > 0
    # stderr is not a terminal: no progress display
    assert "ETA" not in runs.base_done.stderr and "\r" not in runs.base_done.stderr
    lines = results(runs.base)
    assert sorted(r["task"] for r in lines) == sorted(TASKS)
    for r in lines:
        assert r["accepted"] is True and r["timed_out"] is False and r["exit_code"] == 0, r
        assert (r["condition"], r["model"], r["agent_tool"]) == (
            "baseline",
            "scripted",
            "mcp_agent",
        )
        assert (r["input_tokens"], r["cached_input_tokens"], r["output_tokens"]) == (1000, 200, 50)
        workspace = runs.base / "attempts" / r["task"] / "1" / "workspace"
        assert (workspace / "Submission.lean").is_file()
        # The relay to the runner's socket, by absolute paths; the socket is gone after the run.
        server = json.loads((workspace / "mcp.json").read_text())["mcpServers"]["leanrig"]
        assert Path(server["command"]).is_absolute() and server["args"][2].endswith("relay.py")
        assert Path(server["args"][-1]).is_absolute() and not Path(server["args"][-1]).exists()
    info = run_json(runs.base)
    assert info["condition"] == "baseline" and info["ended_at"] is not None
    assert info["tasks"] == [
        {"id": "refl_z", "field": "equality", "difficulty": 1, "kind": "proof"},
        {"id": "and_swap", "field": "logic", "difficulty": 3, "kind": "proof"},
    ]
    assert (info["time_limit_s"], info["attempts"], info["parallel"]) == (60.0, 1, 1)
    assert info["agent_command"] == agent("solve")
    assert (
        info["sandbox"]
        == "bwrap; agent network off; run state hidden, verdict inputs read-only to the agent"
    )
    assert info["prices"]["models"]["scripted"]["output"] == 10.0
    ledger = [json.loads(x) for x in (runs.base / "ledger.jsonl").read_text().splitlines()]
    # The server's closing lines for sessions left open are no tool calls of the agent's.
    calls = [e for e in ledger if e.get("closed_by") != "server"]
    assert len(calls) == sum(r["tool_calls"] for r in lines) > 0


def test_run_lad_with_attempts_parallel_label_and_network(runs: Runs) -> None:
    s = runs.lad_summary
    assert s["run_dir"] == str((runs.cwd / "lad-run").resolve())
    assert (s["attempts"], s["accepted"], s["skipped"]) == (4, 2, 0)
    outcomes = sorted((r["task"], r["attempt"], r["accepted"]) for r in results(runs.lad))
    # alternate: attempt 1 solves, attempt 2 submits a wrong proof.
    assert outcomes == sorted([(t, 1, True) for t in TASKS] + [(t, 2, False) for t in TASKS])
    assert {r["condition"] for r in results(runs.lad)} == {"lad"}
    info = run_json(runs.lad)
    assert (info["condition"], info["label"], info["attempts"], info["parallel"]) == (
        "lad",
        "with library",
        2,
        2,
    )
    assert (
        info["sandbox"]
        == "bwrap; agent network on; run state hidden, verdict inputs read-only to the agent"
    )
    assert info["prices"] is None


def test_run_resume_skips_finished_attempts_and_a_finished_dir_is_refused(runs: Runs) -> None:
    again = (
        "run",
        "--suite",
        SUITE,
        "--agent",
        agent("alternate", "{prompt}"),
        "--condition",
        "lad",
        "--time-limit",
        LIMIT,
        "--attempts",
        "2",
        "--parallel",
        "2",
        "--out",
        "lad-run",
        "--label",
        "with library",
        "--model",
        "scripted",
        "--agent-tool",
        "mcp_agent",
        "--quiet",
    )
    before = (runs.lad / "results.jsonl").read_text()
    done = leanrig(*again, cwd=runs.cwd)
    assert done.returncode == 2, done.stdout
    assert "already holds a run" in done.stderr and "--resume" in done.stderr
    summary = summary_of(leanrig(*again, "--resume", cwd=runs.cwd))
    assert (summary["attempts"], summary["skipped"]) == (0, 4)
    assert (runs.lad / "results.jsonl").read_text() == before
    assert run_json(runs.lad)["label"] == "with library"


def test_run_resume_keeps_the_recorded_run_settings(runs: Runs, tmp_path: Path) -> None:
    copy = runs.cwd / "lad-copy"
    shutil.copytree(runs.lad, copy)
    lines = (copy / "results.jsonl").read_text().splitlines(keepends=True)
    (copy / "results.jsonl").write_text("".join(lines[:3]))  # interrupted before the 4th
    lad_agent = agent("alternate", "{prompt}")
    try:
        # Options left out are the recorded ones.
        done = leanrig(
            "run",
            "--suite",
            SUITE,
            "--agent",
            lad_agent,
            "--out",
            "lad-copy",
            "--resume",
            "--quiet",
            cwd=runs.cwd,
        )
        summary = summary_of(done)
        assert (summary["attempts"], summary["skipped"]) == (1, 3)
        info = run_json(copy)
        assert (info["condition"], info["label"], info["model"], info["attempts"]) == (
            "lad",
            "with library",
            "scripted",
            2,
        ), done.stderr
        assert info["time_limit_s"] == 60.0 and info["agent_command"] == lad_agent
        assert {r["condition"] for r in results(copy)} == {"lad"}
        assert {r["model"] for r in results(copy)} == {"scripted"}
        before = (copy / "run.json").read_text()
        refused = leanrig_each(
            (
                "run",
                "--suite",
                SUITE,
                "--agent",
                lad_agent,
                "--out",
                "lad-copy",
                "--resume",
                "--condition",
                "baseline",
                "--model",
                "other",
                "--quiet",
            ),
            (
                "run",
                "--suite",
                SUITE,
                "--agent",
                agent("solve"),
                "--out",
                "lad-copy",
                "--resume",
                "--quiet",
            ),
            cwd=runs.cwd,
        )
        for done, needles in zip(refused, (("--condition", "--model"), ("--agent",)), strict=True):
            assert done.returncode == 2, done.stdout
            assert all(n in done.stderr for n in needles) and "recorded" in done.stderr
            assert "Traceback" not in done.stderr
        assert (copy / "run.json").read_text() == before
    finally:
        shutil.rmtree(copy)


def test_run_bad_arguments_and_suite_exit_2(runs: Runs) -> None:
    cases = {
        "no-such-agent-program": ("--suite", SUITE, "--agent", "no-such-agent-program"),
        "nowhere": ("--suite", "nowhere", "--agent", agent("solve")),
        "missing.toml": ("--suite", SUITE, "--agent", agent("solve"), "--prices", "missing.toml"),
    }
    commands = [("run", *args, "--out", f"refused-{i}") for i, args in enumerate(cases.values())]
    for needle, done in zip(cases, leanrig_each(*commands, cwd=runs.cwd), strict=True):
        assert done.returncode == 2, (done.args, done.stdout, done.stderr)
        assert needle in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert not list(runs.cwd.glob("refused-*")), list(runs.cwd.glob("refused-*/**"))


def test_a_run_whose_agent_never_starts_says_so(runs: Runs) -> None:
    """An agent failing every attempt before its first tool call (a relative path; it runs in
    each attempt's workspace) is named on stderr, with the hint to give absolute paths."""
    (runs.cwd / "plan.json").write_text("{}")
    command = f"{shlex.quote(str(leanrig_exe()))} agent scripted --plan plan.json"
    done = leanrig("run", "--suite", SUITE, "--agent", command, "--out", "never-ran", cwd=runs.cwd)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["accepted"] == 0
    assert "every attempt's agent exited with an error" in done.stderr, done.stderr
    assert "give it absolute paths" in done.stderr
    # Agents timed out before a tool call did start: no such message.
    slow = leanrig(
        "run",
        "--suite",
        SUITE,
        "--tasks",
        "refl_z,and_swap",
        "--agent",
        "sleep 30",
        "--time-limit",
        "1",
        "--out",
        "timed-out",
        cwd=runs.cwd,
    )
    assert slow.returncode == 0, slow.stderr
    assert "every attempt's agent" not in slow.stderr, slow.stderr


def test_report_on_a_run_dir_with_default_out_and_plots(runs: Runs) -> None:
    relative = str(runs.base.relative_to(runs.cwd.resolve()))
    done = leanrig("report", relative, cwd=runs.cwd)
    assert done.returncode == 0, done.stderr
    assert "| 100.0 | 100.0% | 2 | 2 |" in done.stdout  # score, completion, tasks, accepted
    out = runs.base / "report"
    report = json.loads((out / "report.json").read_text())
    assert (report["kind"], report["score"], report["accepted"]) == ("run", 100.0, 2)
    assert report["field_denominators"] == {"equality": 1, "logic": 3}
    # Priced from the run's recorded --prices.
    assert report["mean_usd"] == pytest.approx(USD_PER_SOLVE)
    assert report["usd_per_point"] == pytest.approx(USD_PER_SOLVE / 100)
    assert (out / "report.md").read_text() in done.stdout
    assert {p.name for p in out.glob("*.png")}, "plots are on by default"


def test_report_on_a_run_s_ledger_leaves_the_run_s_report_alone(runs: Runs) -> None:
    """`leanrig report RUN/ledger.jsonl` writes `RUN/ledger-report/`, not over `RUN/report/`."""
    relative = str(runs.base.relative_to(runs.cwd.resolve()))
    assert leanrig("report", relative, "--no-plots", cwd=runs.cwd).returncode == 0
    run_report = (runs.base / "report" / "report.json").read_bytes()
    done = leanrig("report", f"{relative}/ledger.jsonl", "--no-plots", cwd=runs.cwd)
    assert done.returncode == 0, done.stderr
    assert "belongs to the run" in done.stderr and f"leanrig report {runs.base}" in done.stderr
    assert (runs.base / "ledger-report" / "report.json").is_file()
    assert (runs.base / "report" / "report.json").read_bytes() == run_report


def test_report_into_a_pipe_whose_reader_left_ends_quietly(runs: Runs) -> None:
    relative = str(runs.base.relative_to(runs.cwd.resolve()))
    command = f"set -o pipefail; '{leanrig_exe()}' report {relative} --no-plots | true"
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=runs.cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 141, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_report_on_two_run_dirs_is_a_leaderboard(runs: Runs) -> None:
    relative = str(runs.base.relative_to(runs.cwd.resolve()))
    done = leanrig(
        "report", relative, "lad-run", "--no-plots", "--prices", "doubled.toml", cwd=runs.cwd
    )
    assert done.returncode == 0, done.stderr
    assert "leaderboard" in done.stdout
    out = runs.cwd / "report"
    board = json.loads((out / "report.json").read_text())
    assert board["kind"] == "leaderboard"
    ranked = [(r["name"], r["score"]) for r in board["runs"]]
    assert ranked[0][1] == 100.0 and ranked[1] == ("with library", 50.0), ranked
    lad = board["runs"][1]
    assert lad["pass_at_k"] == {"1": 50.0, "2": 100.0}
    # --prices overrides the recorded schedule; the LAD run's cost is N/A (some attempts
    # report no tokens), never 0.
    assert board["runs"][0]["usd_per_point"] == pytest.approx(2 * USD_PER_SOLVE / 100)
    assert (lad["usd_per_point"], lad["mean_usd"]) == (None, None)
    assert not list(out.rglob("*.png"))


def test_report_and_compare_refuse_unreadable_input(runs: Runs) -> None:
    commands = [
        ("report", "nowhere"),
        ("report", "lad-run", "--prices", "missing.toml"),
        ("compare", "lad-run", "nowhere"),
    ]
    for done in leanrig_each(*commands, cwd=runs.cwd):
        assert done.returncode == 2, (done.args, done.stdout)
        assert "nowhere" in done.stderr or "missing.toml" in done.stderr
        assert "Traceback" not in done.stderr
        if done.args[-1] == "nowhere":
            assert "run directory" in done.stderr, done.stderr
            assert ("ledger" in done.stderr) == ("report" in done.args), done.stderr


def test_compare_baseline_and_lad(runs: Runs) -> None:
    relative = str(runs.base.relative_to(runs.cwd.resolve()))
    done = leanrig("compare", relative, "lad-run", cwd=runs.cwd)
    assert done.returncode == 0, done.stderr
    assert "| score | 100.0 | 50.0 | -50 | -50.0% |" in done.stdout  # Δ points beside the %
    out = runs.cwd / "compare"
    result = json.loads((out / "compare.json").read_text())
    comparison = result["comparison"]
    assert comparison["score"] == {"base": 100.0, "new": 50.0, "change_percent": -50.0}
    assert comparison["fields"]["logic"]["diff_points"] == -50.0
    # The comparison's own plots, not the reports' again.
    drawn = sorted(p.name for p in out.glob("*.png"))
    assert drawn == ["comparison.png", "pass_at_k.png", "task_outcomes.png"], "on by default"
    assert "## Tasks verified by one condition only" in done.stdout

    usd = comparison["usd_per_point"]  # the LAD run's cost is N/A, and so is the change
    assert usd == {"base": pytest.approx(USD_PER_SOLVE / 100), "new": None, "change_percent": None}

    done = leanrig(
        "compare",
        relative,
        "lad-run",
        "--out",
        "cmp",
        "--no-plots",
        "--prices",
        "doubled.toml",
        cwd=runs.cwd,
    )
    assert done.returncode == 0, done.stderr
    priced = json.loads((runs.cwd / "cmp" / "compare.json").read_text())["comparison"]
    assert priced["usd_per_point"]["base"] == pytest.approx(2 * USD_PER_SOLVE / 100)
    assert priced["score"] == comparison["score"]
    assert not list((runs.cwd / "cmp").glob("*.png"))


def test_run_a_subset_of_the_tasks(runs: Runs) -> None:
    first = sorted(TASKS)[0]
    done, unknown = leanrig_each(
        (
            "run",
            "--suite",
            SUITE,
            "--agent",
            agent("solve"),
            "--time-limit",
            LIMIT,
            "--tasks",
            first,
            "--out",
            "subset",
        ),
        (
            "run",
            "--suite",
            SUITE,
            "--agent",
            agent("solve"),
            "--tasks",
            f"{first},nope",
            "--out",
            "subset-refused",
        ),
        cwd=runs.cwd,
    )
    summary = summary_of(done)
    assert (summary["attempts"], summary["accepted"]) == (1, 1)
    assert [r["task"] for r in results(runs.cwd / "subset")] == [first]
    assert [t["id"] for t in run_json(runs.cwd / "subset")["tasks"]] == [first]
    assert unknown.returncode == 2 and "unknown task 'nope'" in unknown.stderr, unknown.stderr
    assert not (runs.cwd / "subset-refused").exists()
    board = leanrig(
        "report", str(runs.base), "subset", "--no-plots", "--out", "board-subset", cwd=runs.cwd
    )
    assert board.returncode == 0 and "different task" in board.stdout + board.stderr, board
