"""leanrig's agent query tools beside lean-lsp-mcp's equivalents (issue 36), in one run, on
the same task file, the same positions, names and terms, over MCP stdio with the same client
(the official Python SDK's, in this process: the client's CPU is alike on both sides):

    get_hover        vs lean_hover_info         (`And.intro` in the task's body)
    get_declaration  vs lean_declaration_file   (`And.intro`)
    get_completions  vs lean_completions        (after `@And.i` in the body)
    get_outline      vs lean_file_outline       (the task file)
    check_term       vs lean_run_code + #check  (`@And.intro` / `@Or.inl`, alternating)
    profile_proof    vs lean_profile_proof      (the theorem; see the notes)

The task is the demo suite's `and_swap` with a complete term body: leanrig's session gets it by
`set_proof`, lean-lsp-mcp a copy of the file in a prelude project (Demo.Basic compiled, as in
bench_agent). Both servers stay open; every call is timed end to end from the client, and the
two sides alternate call by call (which goes first alternates by round), so the machine's drift
moves both alike. Medians and p95, and leanrig's median over the peer's (target: ≤ 0.8×).
Timing never fails the run; a row either side cannot answer is reported in the notes.

    python -m bench queries      (--quick: fewer calls)
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from agent_tools.tasks import load_suite
from lsp_bridge import find_lean

from .bench_agent import DEMO, RIGHT, ROOT, TASK, texts
from .common import print_table, summarize, write_result
from .peers import ensure_peers, lake_standin, peer_env

TERMS = ("@And.intro", "@Or.inl")  # check_term / #check, alternating call by call
HEADER = "prelude\nimport Demo.Basic\n"  # the task file's header (the peer's #check needs it)
NAME = "And.intro"  # hover target, declaration name
PEER = "lean-lsp-mcp {tool} (peer)"
OURS = "leanrig {tool}, MCP stdio"
WARMUP = 3  # calls per side and tool before measuring


@dataclass(frozen=True)
class Spots:
    """Where the calls point in the task file (1-based lines, 1-based code-point columns)."""

    text: str  # the task file with the complete body
    line: int  # the body's line holding `@And.intro`
    hover: int  # the column of `A` in `@And.intro`
    complete: int  # the column just after `@And.i`
    theorem: int  # the line of `theorem main`

    @classmethod
    def of(cls, text: str) -> Spots:
        lines = text.splitlines()
        line = next(i for i, s in enumerate(lines) if "@And.intro" in s)
        start = lines[line].index("@And.intro") + 1  # 0-based `A`
        theorem = next(i for i, s in enumerate(lines) if s.startswith("theorem "))
        return cls(text, line + 1, start + 1, start + len("And.i") + 1, theorem + 1)


@dataclass(frozen=True)
class Pair:
    """One leanrig tool and the peer's equivalent: arguments for call ``i`` and what every
    answer must contain (checked, so a fast wrong answer is not timed as an answer)."""

    tool: str
    peer_tool: str
    ours: Callable[[str, int], dict[str, Any]]  # (session id, i) -> arguments
    theirs: Callable[[int], dict[str, Any]]  # i -> arguments
    expect: Callable[[int], str]
    # The peer answers an error containing this (the bootstrap Lean cannot do better): its
    # time is still what the call costs, labelled as such.
    peer_error: str | None = None
    calls_scale: float = 1.0  # fewer calls for slow tools


def pairs(spots: Spots, task_file: Path, by_file: Path) -> list[Pair]:
    file = str(task_file)
    return [
        Pair("get_hover", "lean_hover_info",
             lambda sid, i: {"session_id": sid, "line": spots.line, "column": spots.hover},
             lambda i: {"file_path": file, "line": spots.line, "column": spots.hover},
             lambda i: NAME),
        Pair("get_declaration", "lean_declaration_file",
             lambda sid, i: {"session_id": sid, "name": NAME},
             lambda i: {"file_path": file, "symbol": NAME},
             lambda i: "intro"),
        Pair("get_completions", "lean_completions",
             lambda sid, i: {"session_id": sid, "line": spots.line, "column": spots.complete,
                             "prefix": None},
             lambda i: {"file_path": file, "line": spots.line, "column": spots.complete},
             lambda i: "intro"),
        Pair("get_outline", "lean_file_outline",
             lambda sid, i: {"session_id": sid},
             lambda i: {"file_path": file},
             lambda i: "main"),
        Pair("check_term", "lean_run_code",
             lambda sid, i: {"session_id": sid, "term": TERMS[i % 2], "in_context": False},
             lambda i: {"code": f"{HEADER}#check {TERMS[i % 2]}\n"},
             lambda i: TERMS[i % 2].lstrip("@")),
        Pair("profile_proof", "lean_profile_proof",
             lambda sid, i: {"session_id": sid},
             lambda i: {"file_path": str(by_file), "line": spots.theorem},
             lambda i: "",
             peer_error="unknown tactic", calls_scale=0.3),
    ]  # fmt: skip


def answer_text(result: Any) -> str:
    """A tool result's structured content and text, as one string to look into."""
    parts = [orjson.dumps(result.structured_content).decode()] if result.structured_content else []
    parts += [getattr(c, "text", "") for c in result.content]
    return "\n".join(parts)


def peer_project(root: Path, spots: Spots) -> tuple[Path, Path, dict[str, str]]:
    """A prelude project for lean-lsp-mcp (bench_agent's set-up): the demo sources, the task
    file with the complete body, the same with a `by` body (what lean_profile_proof needs),
    and the environment: the `lake` stand-in, LEAN_PATH to the compiled Demo.Basic."""
    shutil.copytree(DEMO / "Demo", root / "Demo")
    task_file = root / "Demo" / "AndSwap.lean"
    task_file.write_text(spots.text, encoding="utf-8")
    by_file = root / "Demo" / "AndSwapBy.lean"
    by_file.write_text(spots.text.replace(":=" + RIGHT, ":= by\n  exact " + RIGHT.strip()))
    lake_dir = root / ".standin"
    lean = find_lean().lean
    lake_standin(lean, lake_dir)
    (root / "lakefile.toml").write_text('name = "bench"\n')
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n")
    _, _, lib = texts(DEMO)
    env = peer_env(lake_dir, lib)
    env["LEAN_PROJECT_PATH"] = str(root)
    # Two things `lake` gives a real project that the stand-in does not: the sources' search
    # path (Lean's go-to-declaration resolves a module to its .lean file through it; without
    # it lean_declaration_file answers "No declaration available") and `lean` beside `lake`
    # (lean_profile_proof runs `lake env lean --profile …`; without it the stand-in's exec
    # fails and the peer reports an empty profile in a few ms without running Lean).
    env["LEAN_SRC_PATH"] = str(root)
    env["PATH"] = f"{lean.parent}:{env['PATH']}"
    return task_file, by_file, env


async def measure(calls: int, work: Path, notes: list[str]) -> dict[str, Any]:
    spots = Spots.of(load_task_text())
    python = ensure_peers()
    task_file, by_file, env = peer_project(work / "peer", spots)
    table = pairs(spots, task_file, by_file)
    samples: dict[str, dict[str, list[float]]] = {p.tool: {} for p in table}
    async with AsyncExitStack() as stack:
        errlog = stack.enter_context((work / "lean-lsp-mcp.stderr.log").open("w"))
        peer_params = StdioServerParameters(
            command=str(python.parent / "lean-lsp-mcp"), args=[], env=env, cwd=str(work / "peer")
        )
        peer = await stack.enter_async_context(Client(stdio_client(peer_params, errlog=errlog)))
        ours_params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "agent_tools.cli", "serve", "--suite", str(DEMO),
                  "--run-dir", str(work / "runs")],
            cwd=str(ROOT),
        )  # fmt: skip
        ours = await stack.enter_async_context(Client(ours_params))
        have = {t.name for t in (await ours.list_tools()).tools}
        opened = await ours.call_tool("open_task", {"task_id": TASK})
        assert isinstance(opened.structured_content, dict), opened.content
        sid = str(opened.structured_content["session_id"])
        done = await ours.call_tool("set_proof", {"session_id": sid, "body": RIGHT})
        assert not done.is_error, done.content
        assert isinstance(done.structured_content, dict), done.content
        assert done.structured_content["complete"], done.structured_content
        # The peer opens its file on its first call (as an agent's first call would).
        first = await peer.call_tool("lean_diagnostic_messages", {"file_path": str(task_file)})
        assert not first.is_error, first.content

        async def timed(client: Client, side: str, pair: Pair, i: int) -> float | None:
            if side == "ours":
                tool, args = pair.tool, pair.ours(sid, i)
            else:
                tool, args = pair.peer_tool, pair.theirs(i)
            t = time.perf_counter()
            result = await client.call_tool(tool, args)
            ms = (time.perf_counter() - t) * 1000
            text = answer_text(result)
            if side == "peer" and pair.peer_error is not None:
                ok = result.is_error and pair.peer_error in text
            else:
                ok = not result.is_error and pair.expect(i) in text
            if not ok:
                note = f"{tool} ({side}) answered unexpectedly: {text[:300]!r}"
                if note not in notes:
                    notes.append(note)
                return None
            return ms

        live: dict[str, set[str]] = {}  # tool -> the sides still measured
        for pair in table:
            sides = {"peer"}
            if pair.tool in have:
                sides.add("ours")
            else:
                notes.append(f"leanrig has no `{pair.tool}` tool (tools/list): its row is missing")
            live[pair.tool] = sides
        clients = {"ours": ours, "peer": peer}
        for pair in table:  # warm-up, both sides
            for side in sorted(live[pair.tool]):
                for i in range(WARMUP):
                    if await timed(clients[side], side, pair, i) is None:
                        live[pair.tool].discard(side)
                        break
        for i in range(calls):
            for pair in table:
                if i >= max(3, round(calls * pair.calls_scale)):
                    continue
                # Which side goes first alternates by round.
                for side in sorted(live[pair.tool], reverse=i % 2 == 1):
                    ms = await timed(clients[side], side, pair, WARMUP + i)
                    if ms is None:
                        live[pair.tool].discard(side)
                        continue
                    row = (OURS if side == "ours" else PEER).format(
                        tool=pair.tool if side == "ours" else pair.peer_tool
                    )
                    samples[pair.tool].setdefault(row, []).append(ms)
    return {tool: rows for tool, rows in samples.items()}


def load_task_text() -> str:
    """The task file with the complete body (what both servers hold)."""
    return load_suite(DEMO).task(TASK).with_body(RIGHT)


def run(quick: bool = False) -> dict[str, Any]:
    calls = 20 if quick else 100
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="leanrig-bench-queries-") as tmp:
        work = Path(tmp)
        (work / "peer").mkdir()
        samples = anyio.run(measure, calls, work, notes)
    results: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    for pair in pairs(Spots.of(load_task_text()), Path("-"), Path("-")):
        rows = samples.get(pair.tool, {})
        peer_row = PEER.format(tool=pair.peer_tool)
        ours_row = OURS.format(tool=pair.tool)
        # The peer first: the summary's "vs first" column is then leanrig over the peer.
        ordered = {r: summarize(rows[r]) for r in (peer_row, ours_row) if r in rows}
        results[pair.tool] = ordered
        print_table(f"{pair.tool} vs {pair.peer_tool}", ordered, peer_row)
        if peer_row in ordered and ours_row in ordered:
            ratio = ordered[ours_row]["median_ms"] / ordered[peer_row]["median_ms"]
            ratios[f"{pair.tool}_vs_{pair.peer_tool} (target <= 0.8)"] = round(ratio, 2)
    notes += [
        "lean_profile_proof needs a `by` proof (it looks for `:= by` and profiles the tactic "
        "lines); the bootstrap Lean has no Init, so no tactics: on a term body the peer "
        "refuses before running Lean (\"No 'by' proof found in theorem\"), and on the same "
        "proof as `by exact …` it runs `lake env lean --profile -Dtrace.profiler=true` on the "
        'extracted theorem to the end and then refuses ("Profiled snippet failed to compile: '
        '… unknown tactic"). Its row times that call (the whole Lean run it pays for a '
        "profile), on AndSwapBy.lean; leanrig profiles the session's term body.",
        "lean_run_code's #check runs in the peer's scratch document (its REPL is off by "
        f"default); both sides check {' and '.join(TERMS)} alternately, with the task's imports "
        "(check_term in_context=false).",
        "The peer project is given LEAN_SRC_PATH (the project root) and the bootstrap `lean` on "
        "PATH, as a real lake project has; see peer_project.",
    ]
    print("\nleanrig median / peer median:", ratios)
    for note in notes:
        print("note:", note)
    result = {"calls": calls, "results": results, "ratios": ratios, "notes": notes}
    write_result("queries", result)
    return result


if __name__ == "__main__":
    from agent_tools.cli import configure_logging

    configure_logging()
    run(quick="--quick" in sys.argv)
