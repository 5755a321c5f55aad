"""The agents leanrig ships (`leanrig agent scripted|search`): the search agent's term reading and
library candidates, the agents under `leanrig run` and on their own, and `make demo-run` and
docs/agents.md's commands as typed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

from agent_tools.agents.candidate_terms import App, Sym, declaration_parts, parse_term, unify
from agent_tools.agents.search_agent import (
    Lemma,
    derive,
    lemma_candidates,
    parse_lemma,
    prove,
    read_problem,
)
from agent_tools.runs import RunOptions, run_benchmark
from agent_tools.tasks import Task, load_suite

from .suites import SWEPT, cut_suite
from .test_runner import SUITE, attempt_processes, raw_lines

ROOT = Path(__file__).resolve().parent.parent
PROOFS = orjson.loads((ROOT / "tests" / "demo_reference_proofs.json").read_bytes())
LEANRIG = ROOT / ".venv" / "bin" / "leanrig"


def opened(task: Task) -> dict[str, object]:
    """What open_task returns, as far as the search agent reads it (no goals)."""
    off = task.text.index(task.body)
    line = task.text[:off].count("\n") + 1
    column = off - (task.text[:off].rfind("\n") + 1) + 1
    start = {"line": line, "column": column}
    return {"text": task.text, "body_range": {"start": start}, "goals": []}


def library_lemmas() -> list[Lemma]:
    lemmas: list[Lemma] = []
    for path in sorted((SUITE / "Lib").glob("*.lean")):
        text = path.read_text()
        namespace = re.search(r"namespace (\S+)", text)
        assert namespace is not None
        for match in re.finditer(r"(?:/--.*?-/\s*)?theorem .*?(?=\n\n|\nend )", text, re.DOTALL):
            name, _, _ = declaration_parts(match.group(0))
            lemma = parse_lemma(f"{namespace.group(1)}.{name}", None, match.group(0))
            assert lemma is not None, match.group(0)
            lemmas.append(lemma)
    return lemmas


def test_terms_parse_and_unify() -> None:
    assert parse_term("Eq a b") == App("@Eq", (Sym("_"), Sym("a"), Sym("b")))
    assert parse_term("@Eq α a b") == App("@Eq", (Sym("α"), Sym("a"), Sym("b")))
    # A projection of a parenthesized term is one atom.
    assert parse_term("Eq (Vec.add x Vec.zero).dx x.dx") == App(
        "@Eq", (Sym("_"), Sym("(Vec.add x Vec.zero).dx"), Sym("x.dx"))
    )
    assert parse_term("Eq (lift.{u} x).down x").args[1] == Sym("(lift x).down")  # type: ignore[union-attr]
    assert parse_term("a = b ∧ ¬c") == App(
        "And", (App("@Eq", (Sym("_"), Sym("a"), Sym("b"))), App("Not", (Sym("c"),)))
    )
    pattern, term = parse_term("@Eq β (f x) (f y)"), parse_term("@Eq N (N.s a) (N.s b)")
    got = unify(pattern, term, frozenset({"β", "f", "x", "y"}), {})
    assert got == {"β": Sym("N"), "f": Sym("N.s"), "x": Sym("a"), "y": Sym("b")}


@pytest.mark.skipif(not (SUITE / "Lib").is_dir(), reason="the demo suite has no LAD library")
def test_search_candidates_baseline_and_library() -> None:
    """No baseline candidate is an eliminator; the library's lemmas give each task's reference
    proof."""
    suite = load_suite(SUITE)
    lemmas = library_lemmas()
    for tid in ("or_swap", "eq_symm", "eq_trans", "congr_arg", "false_elim"):
        problem = read_problem(opened(suite.tasks[tid]))
        derive(problem)
        baseline = list(prove(problem, problem.target, 2))
        assert not any(".rec" in c for c in baseline), baseline
        lad = [c for lemma in lemmas for c in lemma_candidates(lemma, problem, problem.target)]
        assert " ".join(PROOFS[tid].split()) in [" ".join(c.split()) for c in lad], (tid, lad)


pytestmark = pytest.mark.anyio


async def test_scripted_agent_replays_a_plan_under_run(tmp_path: Path) -> None:
    plan = {
        "calls": [
            {"tool": "open_task", "args": {"task_id": "{task}"}, "expect": "ok"},
            {"tool": "set_proof", "args": {"session_id": "{session}", "body": "\n  nope"}},
            {"tool": "open_task", "args": {"task_id": "no_such_task"}, "expect": "error"},
            {
                "tool": "set_proof",
                "expect": "ok",
                "args": {"session_id": "{session}", "body": "\n  " + PROOFS["true_intro"]},
            },
            {"tool": "check_proof", "args": {"session_id": "{session}"}, "expect": "ok"},
        ],
        "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.001},
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    agent = f"{LEANRIG} agent scripted --plan {tmp_path / 'plan.json'} --mcp-config {{mcp_config}}"
    run_dir = tmp_path / "run"
    await run_benchmark(
        RunOptions(
            suite=SUITE, agent=agent, out=run_dir, tasks=("true_intro",), quiet=True, time_limit=60
        )
    )
    [r] = raw_lines(run_dir)
    assert r.accepted and r.exit_code == 0 and r.tool_calls == 5, r
    assert (r.input_tokens, r.output_tokens, r.cost_usd) == (10, 2, 0.001)
    ws = run_dir / "attempts" / "true_intro" / "1" / "workspace"
    lines = [json.loads(x) for x in (ws / "transcript.jsonl").read_text().splitlines()]
    assert [(x["tool"], x["error"]) for x in lines] == [
        ("open_task", False),
        ("set_proof", False),
        ("open_task", True),
        ("set_proof", False),
        ("check_proof", False),
    ]
    assert lines[-1]["result"]["accepted"] is True
    assert attempt_processes(run_dir) == []


def demo_subset(root: Path, tasks: tuple[str, ...]) -> Path:
    suite = root / "suite"
    shutil.copytree(SUITE, suite)
    head, *blocks = (suite / "suite.toml").read_text().split("[[tasks]]")
    kept = [b for b in blocks if any(f'id = "{t}"\n' in b for t in tasks)]
    (suite / "suite.toml").write_text(head + "".join("[[tasks]]" + b for b in kept))
    return suite


def test_make_demo_run_compares_baseline_and_lad(tmp_path: Path) -> None:
    suite = demo_subset(tmp_path, ("true_intro", "eq_symm"))
    out = tmp_path / "demo-run"
    done = subprocess.run(
        ["make", "-s", "demo-run", f"DEMO_SUITE={suite}", f"DEMO_RUN={out}", "DEMO_LIMIT=60"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "leaderboard" in done.stdout and "| score |" in done.stdout
    base = {r.task: r for r in raw_lines(out / "baseline")}
    lad = {r.task: r for r in raw_lines(out / "lad")}
    assert base["true_intro"].accepted and lad["true_intro"].accepted
    assert all(r.cost_usd == 0.0 and r.input_tokens == 0 for r in [*base.values(), *lad.values()])
    assert not base["eq_symm"].accepted  # it needs an eliminator: no candidate has one
    assert list((out / "compare").glob("*.png")) and list((out / "report").glob("*.png"))
    for run in ("baseline", "lad"):
        assert attempt_processes(out / run) == []
        # Only the LAD prompt names the library's tools.
        prompt = (out / run / "attempts" / "eq_symm" / "1" / "workspace" / "PROMPT.md").read_text()
        assert ("search_library" in prompt) is (run == "lad"), prompt
    log = (out / "lad" / "attempts" / "eq_symm" / "1" / "agent.log").read_text()
    assert "Lib.Equality.symm" in log and lad["eq_symm"].accepted, (lad["eq_symm"], log)
    comparison = json.loads((out / "compare" / "compare.json").read_text())["comparison"]
    assert comparison["score"]["new"] > comparison["score"]["base"]


@pytest.mark.timeout(400)  # two benchmark runs and a comparison, on a loaded machine
def test_the_agents_page_commands_run_as_typed(tmp_path: Path) -> None:
    """docs/agents.md's block, read from the page, run by bash from a user's directory: LAD
    accepts more than the baseline, and `compare` prints its table."""
    page = (ROOT / "docs" / "agents.md").read_text()
    block = next(b for b in re.findall(r"```sh\n(.*?)```", page, re.S) if "agent search" in b)
    shutil.copytree(
        ROOT / "lean_project" / "suites" / "demo", tmp_path / "lean_project" / "suites" / "demo"
    )
    cut_suite(tmp_path / "lean_project" / "suites" / "demo", SWEPT)
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    done = subprocess.run(
        ["bash", "-e", "-c", block],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    tasks = load_suite(tmp_path / "lean_project" / "suites" / "demo").tasks
    base = {r.task: r for r in raw_lines(tmp_path / "runs" / "base")}
    lad = {r.task: r for r in raw_lines(tmp_path / "runs" / "lad")}
    assert set(base) == set(lad) == set(tasks)
    assert 0 < sum(r.accepted for r in base.values()) < sum(r.accepted for r in lad.values())
    assert "| score |" in done.stdout
    for run in ("base", "lad"):
        assert attempt_processes(tmp_path / "runs" / run) == []


def user_with_mcp_config(root: Path) -> dict[str, str]:
    """The demo suite and an ``mcp.json`` serving it under ``root``; an environment without
    LEANRIG_* variables."""
    from .test_as_typed import DEMO, SUITE, leanrig_exe, sandbox_or_skip

    sandbox_or_skip()
    shutil.copytree(DEMO, root / SUITE)
    server = {"command": str(leanrig_exe()), "args": ["serve", "--suite", SUITE], "cwd": str(root)}
    (root / "mcp.json").write_text(json.dumps({"mcpServers": {"leanrig": server}}))
    return {k: v for k, v in os.environ.items() if not k.startswith("LEANRIG_")}


def test_agent_search_on_its_own_as_typed(tmp_path: Path) -> None:
    """`leanrig agent search` with an MCP config: exit 0 proved, 1 gave up, 2 without a config
    or with a server that cannot start."""
    from .test_as_typed import leanrig

    env = user_with_mcp_config(tmp_path)

    def search(*args: str) -> subprocess.CompletedProcess[str]:
        return leanrig("agent", "search", *args, cwd=tmp_path, env=env)

    proved = search(
        "--mcp-config",
        "mcp.json",
        "--task",
        "true_intro",
        "--max-candidates",
        "32",
        "--limit",
        "4",
        "--check",
    )
    assert proved.returncode == 0, proved.stderr[-2000:]
    summary = json.loads(proved.stdout.strip().splitlines()[-1])
    assert summary["proof"] and {"check_proof": True} in summary["log"], summary
    assert json.loads((tmp_path / "usage.json").read_text())["cost_usd"] == 0.0
    # eq_symm needs an eliminator, which no baseline candidate has: it gives up.
    gave_up = search("--mcp-config", "mcp.json", "--task", "eq_symm")
    assert gave_up.returncode == 1, gave_up.stderr[-2000:]
    assert json.loads(gave_up.stdout.strip().splitlines()[-1])["proof"] is None
    no_config = search("--task", "true_intro")
    assert no_config.returncode == 2
    assert "--mcp-config" in no_config.stderr
    (tmp_path / "bad.json").write_text(
        (tmp_path / "mcp.json").read_text().replace('"lean_project/', '"no/such/')
    )
    bad = search("--mcp-config", "bad.json", "--task", "true_intro")
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert "leanrig: the MCP server did not start" in bad.stderr and "Traceback" not in bad.stderr


def test_agent_scripted_on_its_own_as_typed(tmp_path: Path) -> None:
    """`leanrig agent scripted`: exit 0 when every expectation held, 1 when one did not, 2 for a
    plan it cannot read or an unknown `expect`."""
    from .test_as_typed import SUITE, leanrig

    env = user_with_mcp_config(tmp_path)
    right = "\n  " + PROOFS["true_intro"]
    plans = {
        "held.json": [
            {"tool": "open_task", "args": {"task_id": "{task}"}, "expect": "ok"},
            {
                "tool": "set_proof",
                "args": {"session_id": "{session}", "body": right},
                "expect": "ok",
            },
        ],
        "broken.json": [{"tool": "open_task", "args": {"task_id": "{task}"}, "expect": "error"}],
    }
    for name, plan in plans.items():
        (tmp_path / name).write_text(json.dumps(plan))
    (tmp_path / "unreadable.json").write_text("{not json")

    def scripted(plan: str) -> subprocess.CompletedProcess[str]:
        return leanrig(
            "agent",
            "scripted",
            "--plan",
            plan,
            "--mcp-config",
            "mcp.json",
            "--task",
            "true_intro",
            cwd=tmp_path,
            env=env,
        )

    held = scripted("held.json")
    assert held.returncode == 0, held.stderr[-2000:]
    transcript = [json.loads(x) for x in (tmp_path / "transcript.jsonl").read_text().splitlines()]
    # {task} became --task's true_intro.
    assert transcript[0]["result"]["text"] == load_suite(tmp_path / SUITE).task("true_intro").text
    assert transcript[-1]["result"]["complete"] is True
    assert scripted("broken.json").returncode == 1
    unreadable = scripted("unreadable.json")
    assert unreadable.returncode == 2
    assert "unreadable.json" in unreadable.stderr
    (tmp_path / "maybe.json").write_text(json.dumps([{**plans["held.json"][0], "expect": "maybe"}]))
    maybe = scripted("maybe.json")
    assert maybe.returncode == 2 and "`expect` is one of ok, error, any" in maybe.stderr
