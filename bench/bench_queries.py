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

from .bench_agent import OTHER, RIGHT, ROOT, TASK, make_suite, texts
from .common import print_table, summarize, write_result
from .peers import ensure_peers, lake_standin, peer_env

TERMS = ("@And.intro", "@Or.inl")  # check_term / #check, alternating call by call
# leanrig keeps an answer asked at the target theorem (what precedes it never changes in a
# session): a term asked again costs it no Lean. The first-ask rows make every call's text new
# (a comment numbered by the call: the same Lean work); the asked-again rows repeat one.
FIRST_ASK = "{term} /- call {i} -/"
# Names for get_declaration's first asks: Demo.Basic's constants (the peer's
# lean_declaration_file answers only a symbol written in its file, so its row asks NAME).
BASIC_NAMES = ("Bool", "Bool.false", "Bool.true", "sorryAx", "True", "True.intro", "False",
               "Eq", "Eq.refl", "And", "And.intro", "Or", "Or.inl", "Or.inr", "N", "N.z", "N.s",
               "List", "List.nil", "List.cons", "N.add", "List.length", "Eq.rec", "And.rec",
               "Or.rec", "N.rec", "List.rec", "True.rec", "False.rec", "Bool.rec")  # fmt: skip
HEADER = "prelude\nimport Demo.Basic\n"  # the task file's header (the peer's #check needs it)
NAME = "And.intro"  # hover target, declaration name
PEER = "lean-lsp-mcp {tool} (peer)"
OURS = "leanrig {tool}, MCP stdio"
WARMUP = 3  # calls per side and tool before measuring
PADDED = 10  # declarations before the theorem in the second task file (bench_agent.make_suite)


@dataclass(frozen=True)
class Spots:
    """One task file and where the calls point in it (1-based lines, 1-based code-point
    columns)."""

    task: str  # the leanrig task id
    file: str  # the task file, relative to the suite (and to the peer's project)
    text: str  # the task file with the complete body
    decls: int  # declarations before the theorem
    line: int  # the body's line holding `@And.intro`
    hover: int  # the column of `A` in `@And.intro`
    complete: int  # the column just after `@And.i`
    theorem: int  # the line of `theorem main`

    @classmethod
    def of(cls, suite: Path, task_id: str, decls: int) -> Spots:
        task = load_suite(suite).task(task_id)
        text = task.with_body(RIGHT)
        lines = text.splitlines()
        line = next(i for i, s in enumerate(lines) if "@And.intro" in s)
        start = lines[line].index("@And.intro") + 1  # 0-based `A`
        theorem = next(i for i, s in enumerate(lines) if s.startswith("theorem "))
        file = task.spec.file
        return cls(task_id, file, text, decls, line + 1, start + 1,
                   start + len("And.i") + 1, theorem + 1)  # fmt: skip


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
    variant: str = ""  # "first ask" / "asked again" (leanrig keeps answers at the target)

    @property
    def key(self) -> str:
        return f"{self.tool} ({self.variant})" if self.variant else self.tool


def pairs(spots: Spots, project: Path) -> list[Pair]:
    file = str(project / spots.file)
    by_file = str(project / by_name(spots.file))
    # leanrig's outline lists what precedes the target theorem; the peer's, the whole file.
    last = f"d{spots.decls - 1}" if spots.decls else ""
    return [
        Pair("get_hover", "lean_hover_info",
             lambda sid, i: {"session_id": sid, "line": spots.line, "column": spots.hover},
             lambda i: {"file_path": file, "line": spots.line, "column": spots.hover},
             lambda i: NAME),
        Pair("get_declaration", "lean_declaration_file",
             lambda sid, i: {"session_id": sid, "name": NAME},
             lambda i: {"file_path": file, "symbol": NAME},
             lambda i: "intro", variant="asked again"),
        Pair("get_declaration", "lean_declaration_file",
             lambda sid, i: {"session_id": sid, "name": BASIC_NAMES[i % len(BASIC_NAMES)]},
             lambda i: {"file_path": file, "symbol": NAME},
             lambda i: "", variant="first ask",
             calls_scale=(len(BASIC_NAMES) - WARMUP) / 100),
        Pair("get_completions", "lean_completions",
             lambda sid, i: {"session_id": sid, "line": spots.line, "column": spots.complete,
                             "prefix": None},
             lambda i: {"file_path": file, "line": spots.line, "column": spots.complete},
             lambda i: "intro"),
        Pair("get_outline", "lean_file_outline",
             lambda sid, i: {"session_id": sid},
             lambda i: {"file_path": file},
             lambda i: last),
        Pair("check_term", "lean_run_code",
             lambda sid, i: {"session_id": sid, "term": first_ask(i), "in_context": False},
             lambda i: {"code": f"{HEADER}#check {first_ask(i)}\n"},
             lambda i: TERMS[i % 2].lstrip("@"), variant="first ask"),
        Pair("check_term", "lean_run_code",
             lambda sid, i: {"session_id": sid, "term": TERMS[0], "in_context": False},
             lambda i: {"code": f"{HEADER}#check {TERMS[0]}\n"},
             lambda i: TERMS[0].lstrip("@"), variant="asked again"),
        Pair("profile_proof", "lean_profile_proof",
             lambda sid, i: {"session_id": sid},
             lambda i: {"file_path": by_file, "line": spots.theorem},
             lambda i: "",
             peer_error="unknown tactic", calls_scale=0.3),
    ]  # fmt: skip


def first_ask(i: int) -> str:
    return FIRST_ASK.format(term=TERMS[i % 2], i=i)


def by_name(file: str) -> str:
    """The peer's copy of a task file with the body as `by exact …` (for lean_profile_proof)."""
    return file.removesuffix(".lean") + "By.lean"


def answer_text(result: Any) -> str:
    """A tool result's structured content and text, as one string to look into."""
    parts = [orjson.dumps(result.structured_content).decode()] if result.structured_content else []
    parts += [getattr(c, "text", "") for c in result.content]
    return "\n".join(parts)


def peer_project(root: Path, suite: Path, files: list[Spots]) -> dict[str, str]:
    """A prelude project for lean-lsp-mcp (bench_agent's set-up): the suite's sources, each
    task file with the complete body and a copy with a `by` body (what lean_profile_proof
    needs); and its environment: the `lake` stand-in, LEAN_PATH to the compiled Demo.Basic."""
    shutil.copytree(suite / "Demo", root / "Demo")
    for spots in files:
        (root / spots.file).write_text(spots.text, encoding="utf-8")
        by_text = spots.text.replace(":=" + RIGHT, ":= by\n  exact " + RIGHT.strip())
        (root / by_name(spots.file)).write_text(by_text, encoding="utf-8")
    lake_dir = root / ".standin"
    lean = find_lean().lean
    lake_standin(lean, lake_dir)
    (root / "lakefile.toml").write_text('name = "bench"\n')
    (root / "lean-toolchain").write_text("leanprover/lean4:v4.35.0\n")
    _, _, lib = texts(suite)
    env = peer_env(lake_dir, lib)
    env["LEAN_PROJECT_PATH"] = str(root)
    # Two things `lake` gives a real project that the stand-in does not: the sources' search
    # path (Lean's go-to-declaration resolves a module to its .lean file through it; without
    # it lean_declaration_file answers "No declaration available") and `lean` beside `lake`
    # (lean_profile_proof runs `lake env lean --profile …`; without it the stand-in's exec
    # fails and the peer reports an empty profile in a few ms without running Lean).
    env["LEAN_SRC_PATH"] = str(root)
    env["PATH"] = f"{lean.parent}:{env['PATH']}"
    return env


def label(spots: Spots) -> str:
    return f"{spots.file} ({spots.decls} declarations before the theorem)"


async def measure(
    calls: int, work: Path, notes: list[str], *, with_peer: bool = True
) -> dict[str, Any]:
    """``with_peer=False``: leanrig's rows alone (the smoke test: the peer is installed by
    `make bench`, not `make setup`)."""
    suite = make_suite(work, PADDED)
    files = [Spots.of(suite, OTHER, 0), Spots.of(suite, TASK, PADDED)]
    project = work / "peer"
    samples: dict[str, dict[str, dict[str, list[float]]]] = {label(f): {} for f in files}
    async with AsyncExitStack() as stack:
        peer: Client | None = None
        if with_peer:
            python = ensure_peers()
            env = peer_project(project, suite, files)
            errlog = stack.enter_context((work / "lean-lsp-mcp.stderr.log").open("w"))
            peer_params = StdioServerParameters(
                command=str(python.parent / "lean-lsp-mcp"), args=[], env=env, cwd=str(project)
            )
            peer = await stack.enter_async_context(Client(stdio_client(peer_params, errlog=errlog)))
        ours_params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "agent_tools.cli", "serve", "--suite", str(suite),
                  "--run-dir", str(work / "runs")],
            cwd=str(ROOT),
        )  # fmt: skip
        ours = await stack.enter_async_context(Client(ours_params))
        have = {t.name for t in (await ours.list_tools()).tools}
        table: list[tuple[Spots, str, Pair]] = []  # (file, leanrig session, pair)
        for spots in files:
            opened = await ours.call_tool("open_task", {"task_id": spots.task})
            assert isinstance(opened.structured_content, dict), opened.content
            sid = str(opened.structured_content["session_id"])
            mode = opened.structured_content.get("mode")
            notes.append(f"leanrig's session on {spots.file}: {mode} mode")
            done = await ours.call_tool("set_proof", {"session_id": sid, "body": RIGHT})
            assert not done.is_error, done.content
            assert isinstance(done.structured_content, dict), done.content
            assert done.structured_content["complete"], done.structured_content
            # The peer opens its file on its first call (as an agent's first call would).
            if peer is not None:
                path = str(project / spots.file)
                first = await peer.call_tool("lean_diagnostic_messages", {"file_path": path})
                assert not first.is_error, first.content
            table += [(spots, sid, pair) for pair in pairs(spots, project)]
        missing = sorted({p.tool for _, _, p in table} - have)
        if missing:
            notes.append(f"leanrig has no {', '.join(missing)} tool (tools/list): rows missing")

        async def timed(side: str, sid: str, pair: Pair, i: int) -> float | None:
            if side == "ours":
                client, tool, args = ours, pair.tool, pair.ours(sid, i)
            else:
                assert peer is not None
                client, tool, args = peer, pair.peer_tool, pair.theirs(i)
            t = time.perf_counter()
            result = await client.call_tool(tool, args)
            ms = (time.perf_counter() - t) * 1000
            text = answer_text(result)
            if side == "peer" and pair.peer_error is not None:
                ok = result.is_error and pair.peer_error in text
            else:
                ok = not result.is_error and pair.expect(i) in text
            if not ok:
                notes.append(f"{tool} ({side}) answered unexpectedly: {text[:300]!r}")
                return None
            return ms

        live = {(s.file, p.key): ({"peer"} if peer is not None else set())
                | ({"ours"} if p.tool in have else set())
                for s, _, p in table}  # fmt: skip
        # The slow tools (profile_proof) in a phase of their own, after the others: with them
        # in the same rounds, the peer's next calls paid ~130 ms now and then (its hover and
        # declaration p95 read 120-150 ms against a 7-8 ms median).
        for scale in sorted({p.calls_scale for _, _, p in table}, reverse=True):
            group = [(s, sid, p) for s, sid, p in table if p.calls_scale == scale]
            for spots, sid, pair in group:  # warm-up, both sides
                for side in sorted(live[spots.file, pair.key]):
                    for i in range(WARMUP):
                        if await timed(side, sid, pair, i) is None:
                            live[spots.file, pair.key].discard(side)
                            break
            for i in range(max(3, round(calls * scale))):
                for spots, sid, pair in group:
                    # Which side goes first alternates by round.
                    for side in sorted(live[spots.file, pair.key], reverse=i % 2 == 1):
                        ms = await timed(side, sid, pair, WARMUP + i)
                        if ms is None:
                            live[spots.file, pair.key].discard(side)
                            continue
                        row = (OURS if side == "ours" else PEER).format(
                            tool=pair.tool if side == "ours" else pair.peer_tool
                        )
                        samples[label(spots)].setdefault(pair.key, {}).setdefault(row, [])
                        samples[label(spots)][pair.key][row].append(ms)
    return {"files": files, "samples": samples}


def run(quick: bool = False) -> dict[str, Any]:
    calls = 20 if quick else 100
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="leanrig-bench-queries-") as tmp:
        work = Path(tmp)
        measured = anyio.run(measure, calls, work, notes)
        files: list[Spots] = measured["files"]
        samples = measured["samples"]
        results: dict[str, Any] = {}
        ratios: dict[str, Any] = {}
        for spots in files:
            results[label(spots)] = {}
            ratios[label(spots)] = {}
            for pair in pairs(spots, work):
                rows = samples[label(spots)].get(pair.key, {})
                peer_row = PEER.format(tool=pair.peer_tool)
                ours_row = OURS.format(tool=pair.tool)
                # The peer first: the summary's "vs first" column is leanrig over the peer.
                ordered = {r: summarize(rows[r]) for r in (peer_row, ours_row) if r in rows}
                results[label(spots)][pair.key] = ordered
                print_table(f"{pair.key} vs {pair.peer_tool}: {label(spots)}", ordered, peer_row)
                if peer_row in ordered and ours_row in ordered:
                    ratio = ordered[ours_row]["median_ms"] / ordered[peer_row]["median_ms"]
                    key = f"{pair.key} / {pair.peer_tool} (target <= 0.8)"
                    ratios[label(spots)][key] = round(ratio, 2)
    notes += [
        "lean_profile_proof needs a `by` proof (it looks for `:= by` and profiles the tactic "
        "lines); the bootstrap Lean has no Init, so no tactics: on a term body the peer "
        "refuses before running Lean (\"No 'by' proof found in theorem\"), and on the same "
        "proof as `by exact …` it runs `lake env lean --profile -Dtrace.profiler=true` on the "
        'extracted theorem to the end and then refuses ("Profiled snippet failed to compile: '
        '… unknown tactic"). Its row times that call (the whole Lean run it pays for a '
        "profile) on the file's `by` copy; leanrig profiles the session's term body.",
        "lean_run_code's #check runs in the peer's scratch document (its REPL is off by "
        f"default); both sides check {' and '.join(TERMS)} alternately, with the task's imports "
        "(check_term in_context=false).",
        "lean_file_outline lists the whole file (the theorem too) and caches its answer per "
        "file content; leanrig's get_outline lists the declarations before the theorem.",
        "The peer project is given LEAN_SRC_PATH (the project root) and the bootstrap `lean` on "
        "PATH, as a real lake project has; see peer_project.",
    ]
    print(
        "\nleanrig median / peer median:", orjson.dumps(ratios, option=orjson.OPT_INDENT_2).decode()
    )
    for note in notes:
        print("note:", note)
    result = {"calls": calls, "results": results, "ratios": ratios, "notes": notes}
    write_result("queries", result)
    return result


if __name__ == "__main__":
    from agent_tools.cli import configure_logging

    configure_logging()
    run(quick="--quick" in sys.argv)
