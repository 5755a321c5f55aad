"""The LAD library against the bootstrap Lean: the index built from Lean's parse of the demo
`[lad]` files, BM25 search and exact reads, the two library tools on LAD services only (MCP and
JSON-RPC), and a library that does not elaborate stopping the server at its start."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import orjson
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from agent_tools.library import (
    LibraryError,
    LibraryIndex,
    fts_query,
    library_digest,
    open_library,
    parse_library,
)
from agent_tools.library.parse import field_names
from agent_tools.runs import RunOptions, run_benchmark
from agent_tools.servers import (
    ServeOptions,
    build_mcp,
    handle_message,
    open_service,
    serve_argv,
)
from agent_tools.sessions import LIBRARY_TOOLS, TOOLS, ProofService, ToolError, output_schema
from agent_tools.tasks import Suite, SuiteError, library_dir, load_suite
from bench.serve_clients import RpcError, jsonrpc_subprocess
from lsp_bridge import LeanInstall
from repl_pool import LeanEnvironment, SandboxPolicy, sandbox_wrapper

pytestmark = pytest.mark.anyio
DEMO = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "demo"
LIBRARY_TOOL_NAMES = {t.name for t in LIBRARY_TOOLS}
SCHEMAS = {t.name: output_schema(t) for t in [*TOOLS, *LIBRARY_TOOLS]}


def copy_suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("*.olean", "*.ilean"))
    return root


def environment_for(suite: Suite, install: LeanInstall, *wrapper: str) -> LeanEnvironment:
    library = library_dir(suite, install)
    env = {**os.environ, "LEAN_PATH": str(library)}
    return LeanEnvironment(install, suite.root, env=env, wrapper=tuple(wrapper))


@pytest.fixture
async def demo_index(tmp_path: Path, lean_install: LeanInstall) -> AsyncIterator[LibraryIndex]:
    suite = load_suite(DEMO)
    index = await open_library(suite, environment_for(suite, lean_install), cache=tmp_path)
    yield index
    index.close()


# -- the index ---------------------------------------------------------------------------------


async def test_the_index_holds_every_declaration_as_lean_parsed_it(
    demo_index: LibraryIndex,
) -> None:
    assert demo_index.built and demo_index.count == 10
    symm = await demo_index.read("Lib.Equality.symm")
    assert (symm.kind, symm.file, symm.line) == ("theorem", "Lib/Equality.lean", 16)
    # The statement is Lean's signature (hover, as #check prints it): universes included.
    assert symm.statement == "Lib.Equality.symm.{u} {α : Sort u} (a b : α) (h : Eq a b) : Eq b a"
    assert symm.docstring is not None and symm.docstring.startswith("Symmetry of equality")
    one = await demo_index.read("Lib.Naturals.one")
    assert (one.kind, one.statement, one.docstring) == (
        "def",
        "Lib.Naturals.one : N",
        "One, the successor of zero.",
    )


async def test_a_lemma_under_set_option_in_is_indexed(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    """Lean's document symbols leave out a lemma under `set_option maxRecDepth 2000 in`."""
    root = copy_suite(tmp_path)
    equality = root / "Lib" / "Equality.lean"
    equality.write_text(
        equality.read_text("utf-8").replace(
            "/-- Transitivity", "set_option maxRecDepth 2000 in\nopen Lib in\n/-- Transitivity"
        ),
        encoding="utf-8",
    )
    suite = load_suite(root)
    index = await open_library(suite, environment_for(suite, lean_install), cache=tmp_path / "c")
    try:
        assert index.count == 10
        trans = await index.read("Lib.Equality.trans")
        assert (trans.kind, trans.line) == ("theorem", 22)  # the name's line in the file
        assert trans.docstring is not None and trans.docstring.startswith("Transitivity")
        symm = await index.read("Lib.Equality.symm")
        assert symm.line == 16
    finally:
        index.close()


@asynccontextmanager
async def naturals_with(
    tmp_path: Path, lean_install: LeanInstall, declarations: str
) -> AsyncIterator[LibraryIndex]:
    """The demo's library index with ``declarations`` added at the end of Lib.Naturals."""
    root = copy_suite(tmp_path)
    naturals = root / "Lib" / "Naturals.lean"
    text = naturals.read_text("utf-8")
    naturals.write_text(
        text.replace("end Lib.Naturals", declarations + "end Lib.Naturals"), "utf-8"
    )
    suite = load_suite(root)
    index = await open_library(suite, environment_for(suite, lean_install), cache=tmp_path / "c")
    try:
        yield index
    finally:
        index.close()


TREE = """
/-- A binary tree of naturals. -/
inductive Tree : Type where
  /-- The empty tree. -/
  | leaf : Tree
  | node (l : Tree) (n : N) (r : Tree) : Tree

/-- A class with two ways to hold. -/
class inductive Holds : Prop where
  | /-- By the left. -/ left : Holds
  | right : Holds

"""


async def test_an_inductive_types_constructors_are_searched_and_read_by_name(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    text = (DEMO / "Lib" / "Naturals.lean").read_text("utf-8")
    async with naturals_with(tmp_path, lean_install, TREE) as index:
        assert index.count == 10 + 3 + 3  # each type and its two constructors
        left = await index.read("Holds.left")  # a class inductive's, its doc after the bar
        assert (left.name, left.kind, left.docstring) == (
            "Lib.Naturals.Holds.left",
            "constructor",
            "By the left.",
        )
        node = await index.read("Tree.node")
        assert (node.name, node.kind) == ("Lib.Naturals.Tree.node", "constructor")
        assert node.statement == "Lib.Naturals.Tree.node (l : Tree) (n : N) (r : Tree) : Tree"
        assert node.source.startswith("/-- A binary tree") and "| node" in node.source
        leaf = await index.read("Lib.Naturals.Tree.leaf")
        assert leaf.docstring == "The empty tree."
        assert leaf.line == text.count("\n", 0, text.index("end Lib.Naturals")) + 5
        hits = await index.search("leaf", 5)
        assert hits[0].name == "Lib.Naturals.Tree.leaf", hits
        tree = await index.read("Lib.Naturals.Tree")
        assert tree.kind == "inductive"


POINT = """
/-- A point of naturals. -/
structure Point : Type where
  /-- Its constructor, named. -/
  make ::
  /-- The first coordinate. -/
  x : N
  (y z : N)
  /-- A field whose type names
  another constant. -/ w : N →
    N

"""


async def test_a_structures_fields_and_constructor_are_searched_and_read_by_name(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    text = (DEMO / "Lib" / "Naturals.lean").read_text("utf-8")
    async with naturals_with(tmp_path, lean_install, POINT) as index:
        assert index.count == 10 + 1 + 5  # the structure, its four fields and its constructor
        x = await index.read("Point.x")
        assert (x.name, x.kind, x.docstring) == (
            "Lib.Naturals.Point.x",
            "field",
            "The first coordinate.",
        )
        assert x.statement == "Lib.Naturals.Point.x (self : Point) : N"
        assert x.source.startswith("/-- A point of naturals.") and "(y z : N)" in x.source
        z = await index.read("Lib.Naturals.Point.z")
        assert (z.kind, z.line) == (
            "field",
            text.count("\n", 0, text.index("end Lib.Naturals")) + 8,
        )
        w = await index.read("Point.w")
        assert w.docstring == "A field whose type names\n  another constant."
        make = await index.read("Point.make")
        assert (make.kind, make.docstring) == ("constructor", "Its constructor, named.")
        assert make.statement.startswith("Lib.Naturals.Point.make (x y z : N)"), make.statement
        hits = await index.search("first coordinate", 5)
        assert hits[0].name == "Lib.Naturals.Point.x", hits
        assert (await index.read("Lib.Naturals.Point")).kind == "structure"


def test_a_field_on_the_where_line_is_a_candidate() -> None:
    """`structure P where x : N` indexes `P.x`."""
    source = "structure P where x : N"
    assert field_names(source) == [(source.index("x"), None, "field")]
    source = "structure P where\n  mk ::\n  x : N"
    assert [kind for _, _, kind in field_names(source)] == ["constructor", "field"]


async def test_a_one_line_structure_s_field_is_read_by_name(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    async with naturals_with(tmp_path, lean_install, "structure Box where item : N\n\n") as index:
        item = await index.read("Box.item")
        assert (item.kind, item.statement) == ("field", "Lib.Naturals.Box.item (self : Box) : N")


async def test_a_declaration_left_with_sorry_is_not_in_the_index(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    root = copy_suite(tmp_path)
    equality = root / "Lib" / "Equality.lean"
    equality.write_text(
        equality.read_text("utf-8").replace(
            "end Lib.Equality",
            "/-- Anything at all. -/\ntheorem bogus (p : Prop) : p :=\n  sorryAx p Bool.false\n\n"
            "end Lib.Equality",
        ),
        encoding="utf-8",
    )
    suite = load_suite(root)
    index = await open_library(suite, environment_for(suite, lean_install), cache=tmp_path / "c")
    try:
        assert index.count == 10  # the demo's ten, not the unproved one
        assert not [h for h in await index.search("bogus anything", 10) if "bogus" in h.name]
        with pytest.raises(LibraryError):
            await index.read("Lib.Equality.bogus")
        assert (await index.read("Lib.Equality.symm")).line == 16
    finally:
        index.close()


async def test_a_second_open_is_a_cache_hit_and_a_changed_file_rebuilds(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    root = copy_suite(tmp_path)
    cache = tmp_path / "cache"
    suite = load_suite(root)
    environment = environment_for(suite, lean_install)
    first = await open_library(suite, environment, cache=cache)
    second = await open_library(suite, environment, cache=cache)
    assert first.built and not second.built
    assert second.path == first.path and second.digest == first.digest
    assert [p.name for p in cache.iterdir()] == [first.path.name]
    first.close()
    second.close()

    logic = root / "Lib" / "Logic.lean"
    logic.write_text(
        logic.read_text(encoding="utf-8").replace(
            "end Lib.Logic",
            "/-- Modus ponens, for the rebuild test. -/\n"
            "theorem modus_ponens (p q : Prop) (hp : p) (hpq : p → q) : q :=\n  hpq hp\n\n"
            "end Lib.Logic",
        ),
        encoding="utf-8",
    )
    changed = load_suite(root)
    third = await open_library(changed, environment_for(changed, lean_install), cache=cache)
    try:
        assert third.built and third.digest != first.digest and third.count == 11
        assert [h.name for h in await third.search("modus ponens", 1)] == ["Lib.Logic.modus_ponens"]
    finally:
        third.close()


async def test_the_parse_runs_under_the_sandbox_wrapper(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    suite = load_suite(DEMO)
    wrapper = sandbox_wrapper(SandboxPolicy(writable=(tmp_path,)))
    declarations = await parse_library(
        environment_for(suite, lean_install, *wrapper), suite.root, suite.lad_files
    )
    assert [d.name for d in declarations][:3] == [
        "Lib.Equality.symm",
        "Lib.Equality.trans",
        "Lib.Equality.congr_arg",
    ]


# -- search and read ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("symmetry of equality", "Lib.Equality.symm"),
        ("symmetric", "Lib.Equality.symm"),
        ("swap a disjunction", "Lib.Logic.or_comm"),
        ("or_comm", "Lib.Logic.or_comm"),
        ("commutativity of conjunction", "Lib.Logic.and_comm"),
        ("ex falso", "Lib.Logic.false_elim"),
        ("transitive", "Lib.Equality.trans"),
        ("function maps equal arguments", "Lib.Equality.congr_arg"),
        ("length of a singleton list", "Lib.Naturals.length_singleton"),
        ("adding zero", "Lib.Naturals.add_zero"),
    ],
)
async def test_a_query_naming_a_lemmas_concept_finds_it_first(
    demo_index: LibraryIndex, query: str, first: str
) -> None:
    hits = await demo_index.search(query, 5)
    assert hits and hits[0].name == first, [h.name for h in hits]


async def test_search_respects_the_limit_and_reads_any_text_safely(
    demo_index: LibraryIndex,
) -> None:
    assert len(await demo_index.search("equality", 2)) == 2
    # FTS5 syntax in the query is only text: quotes, operators, columns, parentheses.
    for hostile in ['"', 'a" OR "b', "NEAR(a b)", "name:symm", "*", "AND", "-x", "(", "ü ∀ φ₁"]:
        await demo_index.search(hostile, 3)
    assert await demo_index.search("   ", 3) == []
    assert fts_query('say "hi" of the') == '"say" OR "say"* OR "hi"'
    assert fts_query("(*)") is None


async def test_read_library_gives_the_exact_source_of_a_declaration(
    demo_index: LibraryIndex,
) -> None:
    text = (DEMO / "Lib" / "Logic.lean").read_text(encoding="utf-8")
    expected = (
        "/-- Commutativity of disjunction: swap the sides of `Or p q` by cases. -/\n"
        "theorem or_comm (p q : Prop) (h : Or p q) : Or q p :=\n"
        "  @Or.rec p q (fun _ => Or q p) (fun hp => @Or.inr q p hp) "
        "(fun hq => @Or.inl q p hq) h"
    )
    assert expected in text
    by_full_name = await demo_index.read("Lib.Logic.or_comm")
    assert by_full_name.source == expected
    assert (await demo_index.read("or_comm")).source == expected  # a unique last part
    assert (await demo_index.read("Logic.or_comm")).source == expected
    with pytest.raises(LibraryError, match="no library declaration named 'comm'"):
        await demo_index.read("comm")


# -- suites ------------------------------------------------------------------------------------


def test_lad_files_are_checked_when_the_suite_loads(tmp_path: Path) -> None:
    root = copy_suite(tmp_path)
    manifest = root / "suite.toml"
    original = manifest.read_text(encoding="utf-8")
    listed = 'library = ["Lib/Equality.lean", "Lib/Logic.lean", "Lib/Naturals.lean"]'
    assert listed in original
    cases = {
        'library = ["Lib/Missing.lean"]': "[lad] library file Lib/Missing.lean does not exist",
        'library = ["../outside.lean"]': "outside the suite directory",
        'library = ["Lib/Logic.lean", "Lib/Logic.lean"]': "listed twice",
        "library = []": "lad.library",
    }
    for replacement, message in cases.items():
        manifest.write_text(original.replace(listed, replacement), encoding="utf-8")
        with pytest.raises(SuiteError, match=message.replace("[", r"\[").replace("]", r"\]")):
            load_suite(root)
    manifest.write_text(original, encoding="utf-8")
    task = root / "Demo" / "ReflZ.lean"
    task.write_text(
        task.read_text(encoding="utf-8").replace(
            "import Demo.Basic", "import Demo.Basic\nimport Lib.Logic"
        ),
        encoding="utf-8",
    )
    with pytest.raises(
        SuiteError, match=r"task refl_z: imports the \[lad\] library module Lib\.Logic"
    ):
        load_suite(root)


def test_hidden_paths_are_checked_when_the_suite_loads(tmp_path: Path) -> None:
    root = copy_suite(tmp_path)
    manifest = root / "suite.toml"
    original = manifest.read_text(encoding="utf-8")
    cases = {
        '["Solutions"]': "hidden path 'Solutions' does not exist",
        '["../outside"]': "hidden path '../outside' is not inside the suite directory",
        '["."]': "is not inside the suite directory",
    }
    for listed, message in cases.items():
        manifest.write_text(f"hidden = {listed}\n" + original, encoding="utf-8")
        with pytest.raises(SuiteError, match=re.escape(message)):
            load_suite(root)
    (root / "Solutions").mkdir()
    manifest.write_text('hidden = ["Solutions", "Lib/Logic.lean"]\n' + original, "utf-8")
    assert load_suite(root).hidden_paths == (
        (root / "Solutions").resolve(),
        (root / "Lib" / "Logic.lean").resolve(),
    )


def test_a_suite_without_a_lad_library_has_no_index(lean_install: LeanInstall) -> None:
    suite = load_suite(DEMO)
    bare = Suite(suite.root, suite.spec.model_copy(update={"lad": None}), suite.tasks)
    with pytest.raises(LibraryError, match="declares no \\[lad\\] library"):
        library_digest(bare, environment_for(bare, lean_install))


# -- the service and both wires ----------------------------------------------------------------


@pytest.fixture
async def lad_service(tmp_path: Path) -> AsyncIterator[ProofService]:
    options = ServeOptions(suite=DEMO, run_dir=tmp_path / "runs", sandbox=False, condition="lad")
    async with open_service(options) as service:
        yield service


@pytest.fixture
async def baseline_service(tmp_path: Path) -> AsyncIterator[ProofService]:
    options = ServeOptions(suite=DEMO, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        yield service


async def rpc(service: ProofService, method: str, params: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    reply = await handle_message(service, orjson.dumps(message), "rpc-test")
    assert reply is not None
    return reply


async def test_baseline_servers_neither_list_nor_accept_the_library_tools(
    baseline_service: ProofService,
) -> None:
    assert baseline_service.library is None
    async with Client(build_mcp(baseline_service, client="mcp-test")) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert listed == {t.name for t in TOOLS}
        with pytest.raises(MCPError, match="unknown tool 'search_library'"):
            await client.call_tool("search_library", {"query": "symmetry", "limit": 3})
    reply = await rpc(baseline_service, "read_library", {"name": "or_comm"})
    assert reply["error"]["code"] == -32601
    assert not LIBRARY_TOOL_NAMES & set(reply["error"]["data"]["methods"])
    with pytest.raises(ToolError) as info:
        await baseline_service.search_library("symmetry", 3)
    assert info.value.code == "unavailable"


async def test_lad_servers_list_and_answer_the_library_tools_on_both_wires(
    lad_service: ProofService,
) -> None:
    async with Client(build_mcp(lad_service, client="mcp-test")) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {t.name for t in TOOLS} | LIBRARY_TOOL_NAMES
        assert listed["search_library"].annotations is not None
        assert listed["search_library"].annotations.read_only_hint is True

        found = await client.call_tool("search_library", {"query": "swap disjunction", "limit": 3})
        assert not found.is_error and found.structured_content is not None
        jsonschema.validate(found.structured_content, listed["search_library"].output_schema)
        assert found.structured_content["results"][0]["name"] == "Lib.Logic.or_comm"
        read = await client.call_tool("read_library", {"name": "Lib.Logic.or_comm"})
        assert not read.is_error and read.structured_content is not None
        jsonschema.validate(read.structured_content, listed["read_library"].output_schema)
        assert read.structured_content["source"].startswith("/-- Commutativity of disjunction")

        missing = await client.call_tool("read_library", {"name": "no_such_lemma"})
        assert missing.is_error
        text = " ".join(getattr(c, "text", "") for c in missing.content)
        assert text.startswith("[invalid_argument] no library declaration named 'no_such_lemma'")

    reply = await rpc(lad_service, "search_library", {"query": "symmetry of equality", "limit": 2})
    jsonschema.validate(reply["result"], SCHEMAS["search_library"])
    assert reply["result"]["results"][0]["name"] == "Lib.Equality.symm"
    reply = await rpc(lad_service, "read_library", {"name": "symm"})
    jsonschema.validate(reply["result"], SCHEMAS["read_library"])
    assert reply["result"]["name"] == "Lib.Equality.symm"
    reply = await rpc(lad_service, "search_library", {"query": "x", "limit": 99})
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "limit"
    reply = await rpc(lad_service, "no_such_method", {})
    assert set(reply["error"]["data"]["methods"]) >= LIBRARY_TOOL_NAMES
    lines = [orjson.loads(x) for x in lad_service.ledger.path.read_bytes().splitlines()]
    assert [(e["tool"], e["outcome"]) for e in lines if e["tool"].endswith("_library")] == [
        ("search_library", "ok"),
        ("read_library", "ok"),
        ("read_library", "error:invalid_argument"),
        ("search_library", "ok"),
        ("read_library", "ok"),
        ("search_library", "error:invalid_argument"),
    ]


async def test_a_library_proof_read_in_lad_proves_the_matching_task(
    lad_service: ProofService,
) -> None:
    """The first lemma search_library finds, as read_library gives it, proves the task."""
    for task_id, query in [
        ("eq_symm", "symmetry of equality"),
        ("or_swap", "swap a disjunction"),
        ("eq_trans", "transitivity of equality"),
        ("congr_arg", "functions respect equality"),
    ]:
        hit = (await lad_service.search_library(query, 1)).results[0]
        source = (await lad_service.read_library(hit.name)).source
        proof = source.split(":=", 1)[1]
        sid = (await lad_service.open_task(task_id)).session_id
        result = await lad_service.try_proofs(sid, [proof])
        assert result.results[0].complete, (task_id, hit.name, result.results[0].diagnostics)
        await lad_service.close_session(sid)


async def test_a_library_that_does_not_elaborate_stops_the_server_at_its_start(
    tmp_path: Path,
) -> None:
    root = copy_suite(tmp_path)
    bad = root / "Lib" / "Logic.lean"
    bad.write_text(
        bad.read_text(encoding="utf-8").replace("@False.rec (fun _ => p) h", "@False.rec h"),
        encoding="utf-8",
    )
    options = ServeOptions(suite=root, run_dir=tmp_path / "runs", sandbox=False, condition="lad")
    with pytest.raises(LibraryError) as info:
        async with open_service(options):
            pytest.fail("the server started with a broken library")
    assert "library file Lib/Logic.lean does not elaborate" in info.value.message
    assert "first at line 18: Application type mismatch" in info.value.message
    # Baseline does not read the library: the same suite serves.
    async with open_service(ServeOptions(suite=root, run_dir=tmp_path / "b", sandbox=False)) as s:
        assert s.library is None


# -- `leanrig serve --condition lad` -----------------------------------------------------------


async def test_serve_lad_over_a_jsonrpc_subprocess_answers_the_library_tools(
    tmp_path: Path,
) -> None:
    async with jsonrpc_subprocess(DEMO, tmp_path / "runs", "--lad", "--no-sandbox") as server:
        found = await server.call("search_library", query="ex falso", limit=1)
        jsonschema.validate(found, SCHEMAS["search_library"])
        assert [r["name"] for r in found["results"]] == ["Lib.Logic.false_elim"]
        read = await server.call("read_library", name="Lib.Logic.false_elim")
        assert read["source"].endswith("@False.rec (fun _ => p) h")
    async with jsonrpc_subprocess(DEMO, tmp_path / "base", "--no-sandbox") as server:
        with pytest.raises(RpcError) as info:
            await server.call("search_library", query="ex falso", limit=1)
        assert info.value.code == -32601


def test_serve_lad_with_a_broken_library_exits_2_naming_the_file(tmp_path: Path) -> None:
    root = copy_suite(tmp_path)
    bad = root / "Lib" / "Naturals.lean"
    bad.write_text(
        bad.read_text(encoding="utf-8").replace("@Eq.refl N n", "@Eq.refl N N.z"),
        encoding="utf-8",
    )
    argv = serve_argv(root, tmp_path / "runs", "--condition", "lad", "--jsonrpc", "--no-sandbox")
    done = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "leanrig: library file Lib/Naturals.lean does not elaborate" in done.stderr
    assert "first at line 14" in done.stderr
    assert done.stdout == ""


# -- `leanrig run --condition lad` -------------------------------------------------------------


async def test_a_lad_run_gives_each_attempt_the_library_tools_and_baseline_none(
    tmp_path: Path,
) -> None:
    """The index is built once; the library agent solves with the tools what it cannot without."""
    agent = f"{sys.executable} {Path(__file__).with_name('agents') / 'library_agent.py'}"
    lines = {}
    for condition in ("baseline", "lad"):
        out = tmp_path / condition
        options = RunOptions(
            suite=DEMO,
            agent=agent,
            out=out,
            condition=condition,
            tasks=["eq_symm"],
            time_limit=120,
            quiet=True,
            agent_network="all",
        )
        await run_benchmark(options)
        attempt = out / "attempts" / "eq_symm" / "1"
        tools = set(orjson.loads((attempt / "workspace" / "tools.json").read_bytes()))
        assert (tools >= LIBRARY_TOOL_NAMES) is (condition == "lad")
        (line,) = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
        lines[condition] = line
    assert lines["baseline"]["accepted"] is False and lines["lad"]["accepted"] is True
    assert lines["lad"]["condition"] == "lad"


async def test_a_lad_run_on_a_suite_without_a_library_is_refused_up_front(
    tmp_path: Path,
) -> None:
    root = copy_suite(tmp_path)
    manifest = root / "suite.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("[lad]\nlibrary", "# [lad]\n# library"), encoding="utf-8")
    options = RunOptions(suite=root, agent="true", out=tmp_path / "run", condition="lad")
    with pytest.raises(LibraryError, match="declares no \\[lad\\] library"):
        await run_benchmark(options)
    assert not (tmp_path / "run" / "attempts").exists()
