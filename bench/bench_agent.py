"""Per proof step (edit → fresh diagnostics) for an agent, every path against the same bootstrap
Lean and the same demo task, in one run:

- raw LSP floor (blocking hand-rolled client, full-text change + waitForDiagnostics);
- lsp_bridge (leanrig's client library);
- leanrig `set_proof` over MCP stdio (official SDK client) and over JSON-RPC stdio;
- leanclient's async client (peer venv);
- lean-lsp-mcp over MCP stdio: write the file, then `lean_diagnostic_messages` (peer venv).

The prefix sweep: 0 / 10 / 100 / 1000 preceding declarations, each with every path, plus the
raw floor on the document leanrig uses in prefix mode (the prefix compiled to an .olean and
imported), and leanrig with two sessions on one `leanrig serve` (the padded task and an
unpadded one, alternating steps: the switch must not re-elaborate the file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agent_tools.tasks import library_dir, load_suite, split_prefix
from lsp_bridge import REPORT_DELAY_MS, LeanClient, LineIndex, find_lean

from .common import print_table, summarize, write_result
from .peers import ensure_peers, lake_standin, peer_env
from .raw_lsp import time_alternating_edits
from .raw_mcp import time_set_proof, time_two_sessions

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "lean_project" / "suites" / "demo"
TASK = "and_swap"
WRONG = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h"
RIGHT = "\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


OTHER = "and_swap_0"  # the second session's task: the same theorem, nothing before it


def make_suite(root: Path, prefix: int) -> Path:
    """A copy of the demo suite whose task has ``prefix`` declarations before it, plus the
    unpadded task as ``and_swap_0`` (for the two-session measurement)."""
    suite = root / f"suite-{prefix}"
    for part in DEMO.iterdir():  # Demo/ and whatever else the manifest names (e.g. Lib/)
        if part.is_dir():
            shutil.copytree(part, suite / part.name, dirs_exist_ok=True)
    task_file = suite / "Demo" / "AndSwap.lean"
    text = task_file.read_text(encoding="utf-8")
    (suite / "Demo" / "AndSwap0.lean").write_text(text, encoding="utf-8")
    pad = "".join(f"def d{i} : N := N.s N.z\n" for i in range(prefix))
    task_file.write_text(text.replace("namespace Demo.AndSwap\n", "namespace Demo.AndSwap\n" + pad))
    manifest = (DEMO / "suite.toml").read_text(encoding="utf-8")
    head = manifest.split("[[tasks]]")[0]
    block = next(b for b in manifest.split("[[tasks]]")[1:] if f'id = "{TASK}"' in b)
    other = block.replace(f'id = "{TASK}"', f'id = "{OTHER}"').replace(
        "AndSwap.lean", "AndSwap0.lean"
    )
    (suite / "suite.toml").write_text(head + "[[tasks]]" + block + "[[tasks]]" + other)
    return suite


def prefixed_texts(suite_dir: Path, lib: Path, out: Path) -> tuple[str, str, Path] | None:
    """The raw floor's texts in prefix mode: the task's prefix compiled to ``out`` (as leanrig
    does, tasks/prefix.py), the document importing it. None: nothing precedes the theorem."""
    task = load_suite(suite_dir).task(TASK)
    split = split_prefix(task.text, task.header, task.span.decl_start)
    if split is None:
        return None
    out.mkdir(parents=True, exist_ok=True)
    src = out / f"{split.module}.lean"
    src.write_text(split.module_text, encoding="utf-8")
    subprocess.run(
        [str(find_lean().lean), "-R", str(out), "-o", str(out / f"{split.module}.olean"), str(src)],
        env={**os.environ, "LEAN_PATH": str(lib)}, check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    bad = split.document(task.with_body(WRONG), task.header)
    good = split.document(task.with_body(RIGHT), task.header)
    return bad, good, out


def texts(suite_dir: Path) -> tuple[str, str, Path]:
    suite = load_suite(suite_dir)
    lib = library_dir(suite, find_lean())
    assert lib is not None
    task = suite.task(TASK)
    return task.with_body(WRONG), task.with_body(RIGHT), lib


def raw_floor(
    project: Path,
    bad: str,
    good: str,
    lib: Path,
    steps: int,
    extra: Path | None = None,
    ask: tuple[dict[str, int], dict[str, int]] | None = None,
) -> list[float]:
    argv = [str(find_lean().lean), "--server", f"-Dserver.reportDelayMs={REPORT_DELAY_MS}"]
    env = {**os.environ, "LEAN_PATH": str(lib) + (f"{os.pathsep}{extra}" if extra else "")}
    return time_alternating_edits(argv, project, bad, good, steps, env, ask)


def step_positions(suite_dir: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Where a leanrig step asks for goals in the task (after the wrong body's last character,
    at its first): for the raw floor that gets the same answers."""
    task = load_suite(suite_dir).task(TASK)
    text = task.with_body(WRONG)
    index = LineIndex(text)
    start = task.span.start + len(WRONG) - len(WRONG.lstrip())
    return (
        index.lsp_of_offset(task.span.start + len(WRONG)).to_json(),
        index.lsp_of_offset(start).to_json(),
    )


async def bridge(project: Path, bad: str, good: str, lib: Path, steps: int) -> list[float]:
    command = find_lean().server_command(project, env={**os.environ, "LEAN_PATH": str(lib)})
    async with LeanClient.start(command) as client:
        uri = (project / "Bridge.lean").as_uri()
        await client.open(uri, bad)
        await client.wait_for(uri)
        samples = []
        for i in range(steps):
            t = time.perf_counter()
            await client.change(uri, good if i % 2 == 0 else bad)
            await client.wait_for(uri)
            samples.append((time.perf_counter() - t) * 1000)
        return samples


async def leanrig_mcp(suite: Path, run_dir: Path, steps: int) -> list[float]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent_tools.cli", "serve", "--suite", str(suite), "--run-dir", str(run_dir)],
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        opened = await client.call_tool("open_task", {"task_id": TASK})
        assert isinstance(opened.structured_content, dict)
        sid = opened.structured_content["session_id"]
        samples = []
        for i in range(steps + 2):
            body = RIGHT if i % 2 == 0 else WRONG
            t = time.perf_counter()
            result = await client.call_tool("set_proof", {"session_id": sid, "body": body})
            ms = (time.perf_counter() - t) * 1000
            assert not result.is_error
            assert isinstance(result.structured_content, dict)
            assert result.structured_content["complete"] == (i % 2 == 0)
            if i >= 2:  # first two: warm-up
                samples.append(ms)
        return samples


async def leanrig_mcp_two_sessions(
    suite: Path, run_dir: Path, steps: int
) -> tuple[list[float], list[float], str]:
    """One `leanrig serve` (as users run it), two sessions: the padded task and the unpadded
    one, taking turns step by step. Returns (padded steps, unpadded steps, padded mode)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent_tools.cli", "serve", "--suite", str(suite), "--run-dir", str(run_dir)],
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        sids = {}
        mode = ""
        for task in (TASK, OTHER):
            opened = await client.call_tool("open_task", {"task_id": task})
            assert isinstance(opened.structured_content, dict)
            sids[task] = opened.structured_content["session_id"]
            if task == TASK:
                mode = str(opened.structured_content["mode"])
        samples: dict[str, list[float]] = {TASK: [], OTHER: []}
        for i in range(steps + 2):
            for task in (TASK, OTHER):
                body = RIGHT if i % 2 == 0 else WRONG
                t = time.perf_counter()
                result = await client.call_tool(
                    "set_proof", {"session_id": sids[task], "body": body}
                )
                ms = (time.perf_counter() - t) * 1000
                assert not result.is_error, result.content
                assert isinstance(result.structured_content, dict)
                assert result.structured_content["complete"] == (i % 2 == 0)
                if i >= 2:
                    samples[task].append(ms)
        return samples[TASK], samples[OTHER], mode


async def leanrig_jsonrpc(suite: Path, run_dir: Path, steps: int) -> list[float]:
    from agent_tools.servers import jsonrpc_subprocess

    async with jsonrpc_subprocess(suite, run_dir) as rpc:
        sid = (await rpc.call("open_task", task_id=TASK))["session_id"]
        samples = []
        for i in range(steps + 2):
            t = time.perf_counter()
            await rpc.call("set_proof", session_id=sid, body=RIGHT if i % 2 == 0 else WRONG)
            if i >= 2:
                samples.append((time.perf_counter() - t) * 1000)
        return samples


def leanclient_peer(
    python: Path, project: Path, bad: str, good: str, lib: Path, steps: int
) -> list[float]:
    lake_dir = project / ".standin"
    lake_standin(find_lean().lean, lake_dir)
    probe = Path(__file__).with_name("leanclient_probe.py")
    out = subprocess.run(
        [str(python), str(probe), str(project), "Peer.lean", str(steps)],
        input=json.dumps([bad, good]), capture_output=True, text=True, timeout=300,
        env=peer_env(lake_dir, lib), cwd=project, check=True,
    )  # fmt: skip
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


async def lean_lsp_mcp_peer(
    python: Path, project: Path, bad: str, good: str, lib: Path, steps: int
) -> list[float]:
    lake_dir = project / ".standin"
    lake_standin(find_lean().lean, lake_dir)
    (project / "lakefile.toml").write_text('name = "bench"\n')
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n")
    target = project / "Peer.lean"
    target.write_text(bad)
    env = peer_env(lake_dir, lib)
    env["LEAN_PROJECT_PATH"] = str(project)
    params = StdioServerParameters(
        command=str(python.parent / "lean-lsp-mcp"), args=[], env=env, cwd=str(project)
    )
    async with Client(params) as client:
        first = await client.call_tool("lean_diagnostic_messages", {"file_path": str(target)})
        assert not first.is_error, first.content
        samples = []
        for i in range(steps + 2):
            t = time.perf_counter()
            await anyio.Path(target).write_text(good if i % 2 == 0 else bad)
            result = await client.call_tool("lean_diagnostic_messages", {"file_path": str(target)})
            ms = (time.perf_counter() - t) * 1000
            assert not result.is_error, result.content
            if i >= 2:
                samples.append(ms)
        return samples


def measure(project: Path, prefix: int, steps: int, notes: list[str]) -> dict[str, Any]:
    suite = make_suite(project, prefix)
    bad, good, lib = texts(suite)
    rows: dict[str, Any] = {}
    work = project / f"work-{prefix}"
    work.mkdir()
    rows["raw Lean LSP (floor)"] = summarize(raw_floor(work, bad, good, lib, steps))
    # The same answers a leanrig step returns (symbols for the scope check, goals), asked the
    # fastest way: in the change's write. What Lean itself needs for a leanrig step.
    rows["raw Lean LSP, same answers (floor)"] = summarize(
        raw_floor(work, bad, good, lib, steps, ask=step_positions(suite))
    )
    prefixed = prefixed_texts(suite, lib, work / "prefix-build")
    if prefixed is not None:
        pbad, pgood, pdir = prefixed
        rows["raw Lean LSP, prefix imported"] = summarize(
            raw_floor(work, pbad, pgood, lib, steps, pdir)
        )
    rows["lsp_bridge (library)"] = summarize(anyio.run(bridge, work, bad, good, lib, steps))
    rows["leanrig set_proof, MCP stdio"] = summarize(
        anyio.run(leanrig_mcp, suite, work / "runs", steps)
    )
    # The same server, driven like the raw floor drives Lean: a minimal blocking client.
    rows["leanrig set_proof, MCP stdio, minimal client"] = summarize(
        time_set_proof(suite, work / "runs", ROOT, TASK, RIGHT, WRONG, steps)
    )
    padded, other, mode = anyio.run(leanrig_mcp_two_sessions, suite, work / "runs", steps)
    rows[f"leanrig MCP, 2 sessions on 1 server: this task ({mode} mode)"] = summarize(padded)
    rows["leanrig MCP, 2 sessions on 1 server: the other (0 decls)"] = summarize(other)
    # The same, driven by the minimal client: the server's own figure, without the SDK
    # client's CPU (~1.5-3 ms per call here: its validation and ~10 loop turns per call).
    padded, other = time_two_sessions(
        suite, work / "runs", ROOT, (TASK, OTHER), RIGHT, WRONG, steps
    )
    rows["leanrig MCP, 2 sessions on 1 server, minimal client: this task"] = summarize(padded)
    rows["leanrig MCP, 2 sessions on 1 server, minimal client: the other"] = summarize(other)
    rows["leanrig set_proof, JSON-RPC stdio"] = summarize(
        anyio.run(leanrig_jsonrpc, suite, work / "runs", steps)
    )
    try:
        python: Path | None = ensure_peers()
    except (subprocess.CalledProcessError, OSError) as exc:
        notes.append(f"peers not installed ({exc}); peer rows missing")
        python = None
    if python is not None:
        peer_project = work / "peer"
        peer_project.mkdir()
        try:
            rows["leanclient async (peer)"] = summarize(
                leanclient_peer(python, peer_project, bad, good, lib, steps)
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError) as exc:
            notes.append(f"leanclient failed: {str(exc)[-300:]}")
        mcp_project = work / "mcp"
        mcp_project.mkdir()
        shutil.copytree(DEMO / "Demo", mcp_project / "Demo")
        try:
            rows["lean-lsp-mcp write + diagnostics (peer)"] = summarize(
                anyio.run(lean_lsp_mcp_peer, python, mcp_project, bad, good, lib, steps)
            )
        except Exception as exc:  # a peer failing must not hide our numbers
            notes.append(f"lean-lsp-mcp failed: {type(exc).__name__}: {str(exc)[-300:]}")
    label = "no preceding declarations" if prefix == 0 else f"{prefix} preceding declarations"
    print_table(f"agent step: edit → fresh diagnostics ({TASK}, {label})", rows,
                "raw Lean LSP (floor)")  # fmt: skip
    return rows


def ratios_of(rows: dict[str, Any]) -> dict[str, float]:
    def med(name: str) -> float:
        return float(rows[name]["median_ms"])

    mcp = med("leanrig set_proof, MCP stdio")
    two = next(
        v for k, v in rows.items() if k.startswith("leanrig MCP, 2 sessions on 1 server: this")
    )
    ratios = {
        "leanrig_mcp_two_sessions_vs_raw": round(
            float(two["median_ms"]) / med("raw Lean LSP (floor)"), 2
        ),
        "leanrig_mcp_vs_raw": round(mcp / med("raw Lean LSP (floor)"), 2),
        "leanrig_jsonrpc_vs_raw": round(
            med("leanrig set_proof, JSON-RPC stdio") / med("raw Lean LSP (floor)"), 2
        ),
        "lsp_bridge_vs_raw": round(med("lsp_bridge (library)") / med("raw Lean LSP (floor)"), 2),
        "leanrig_mcp_minimal_client_vs_raw": round(
            med("leanrig set_proof, MCP stdio, minimal client") / med("raw Lean LSP (floor)"), 2
        ),
        "leanrig_mcp_minimal_client_vs_raw_same_answers": round(
            med("leanrig set_proof, MCP stdio, minimal client")
            / med("raw Lean LSP, same answers (floor)"),
            2,
        ),
        "leanrig_mcp_vs_raw_same_answers": round(
            mcp / med("raw Lean LSP, same answers (floor)"), 2
        ),
        "raw_same_answers_vs_raw": round(
            med("raw Lean LSP, same answers (floor)") / med("raw Lean LSP (floor)"), 2
        ),
    }
    if "lean-lsp-mcp write + diagnostics (peer)" in rows:
        ratios["leanrig_mcp_vs_lean_lsp_mcp"] = round(
            mcp / med("lean-lsp-mcp write + diagnostics (peer)"), 2
        )
    if "leanclient async (peer)" in rows:
        ratios["lsp_bridge_vs_leanclient"] = round(
            med("lsp_bridge (library)") / med("leanclient async (peer)"), 2
        )
    return ratios


def run(quick: bool = False) -> dict[str, Any]:
    steps = 12 if quick else 40
    prefixes = (0, 100) if quick else (0, 10, 100, 1000)
    notes: list[str] = []
    results: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="leanrig-bench-agent-") as tmp:
        for prefix in prefixes:
            rows = measure(
                Path(tmp), prefix, steps if prefix < 1000 else max(10, steps // 4), notes
            )
            results[f"prefix {prefix}"] = rows
            ratios[f"prefix {prefix}"] = ratios_of(rows)
            print("ratios:", ratios[f"prefix {prefix}"])
    two = "leanrig MCP, 2 sessions on 1 server: this"
    mini = "leanrig MCP, 2 sessions on 1 server, minimal client: this"
    if "prefix 0" in results and "prefix 1000" in results:

        def med(prefix: int, name: str) -> float:
            rows = results[f"prefix {prefix}"]
            return float(next(v for k, v in rows.items() if k.startswith(name))["median_ms"])

        ratios["done_when"] = {
            "mcp_1000_vs_mcp_0 (<= 1.5)": round(med(1000, two) / med(0, two), 2),
            "mcp_1000_vs_raw_1000 (<= 0.5)": round(
                med(1000, two) / med(1000, "raw Lean LSP (floor)"), 2
            ),
            "mcp_0_vs_raw_0 (<= 1.3)": round(med(0, two) / med(0, "raw Lean LSP (floor)"), 2),
            # The same three, the server driven by a minimal blocking client (as the raw
            # floor drives Lean) instead of the SDK's client.
            "minimal_client_mcp_1000_vs_mcp_0": round(med(1000, mini) / med(0, mini), 2),
            "minimal_client_mcp_1000_vs_raw_1000": round(
                med(1000, mini) / med(1000, "raw Lean LSP (floor)"), 2
            ),
            "minimal_client_mcp_0_vs_raw_0": round(
                med(0, mini) / med(0, "raw Lean LSP (floor)"), 2
            ),
        }
        print("done when:", ratios["done_when"])
    for note in notes:
        print("note:", note)
    result = {"steps": steps, "results": results, "ratios": ratios, "notes": notes}
    write_result("agent_step", result)
    return result


if __name__ == "__main__":
    from agent_tools.cli import configure_logging

    configure_logging()
    run(quick="--quick" in sys.argv)
