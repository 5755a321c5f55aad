"""`leanrig serve` as a subprocess, driven over MCP (official SDK client) and over plain
JSON-RPC, against the real bootstrap Lean. Tests taking ``agent`` run on both transports."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import orjson
import psutil
import pytest

from .conftest import LONG_LIVED
from .rpc_client import McpConn, RpcError, RpcProcess, mcp_server, rpc_server

Agent = RpcProcess | McpConn

pytestmark = pytest.mark.anyio
REFS: dict[str, str] = json.loads(
    (Path(__file__).with_name("demo_reference_proofs.json")).read_text(encoding="utf-8")
)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def rpc() -> AsyncIterator[RpcProcess]:
    async with rpc_server() as server:
        LONG_LIVED.add(server.process.pid)
        yield server
    LONG_LIVED.discard(server.process.pid)


@pytest.fixture(scope="module")
async def mcp() -> AsyncIterator[McpConn]:
    before = set(psutil.Process().children())
    async with mcp_server() as conn:
        servers = set(psutil.Process().children()) - before
        LONG_LIVED.update(p.pid for p in servers)
        yield conn
    LONG_LIVED.difference_update(p.pid for p in servers)


@pytest.fixture(params=["jsonrpc", "mcp"])
def agent(request: pytest.FixtureRequest) -> Agent:
    conn: Agent = request.getfixturevalue("rpc" if request.param == "jsonrpc" else "mcp")
    return conn


async def test_list_tasks_has_the_demo_suite(agent: Agent) -> None:
    result = await agent.call("list_tasks")
    ids = {t["id"] for t in result["tasks"]}
    assert len(ids) >= 8 and set(REFS) <= ids
    assert all({"id", "title", "field", "difficulty"} <= set(t) for t in result["tasks"])


@pytest.mark.parametrize("task_id", sorted(REFS))
async def test_a_full_session_per_demo_task(agent: Agent, task_id: str) -> None:
    opened = await agent.call("open_task", task_id=task_id)
    sid = opened["session_id"]
    assert opened["complete"] is False  # the placeholder uses sorry
    assert opened["goals"], "the expected type is shown as a goal"
    assert opened["text"][: len(opened["text"])].count(opened["body"]) >= 1
    wrong = await agent.call("set_proof", session_id=sid, body="\n  N.z")
    assert wrong["complete"] is False
    assert any(d["severity"] == "error" for d in wrong["diagnostics"])
    assert wrong["version"] == 2
    right = await agent.call("set_proof", session_id=sid, body="\n  " + REFS[task_id])
    assert right["complete"] is True, right["diagnostics"]
    assert right["goals"] == []
    verdict = await agent.call("check_proof", session_id=sid)
    assert verdict["accepted"] is True, verdict["reasons"]
    assert "sorryAx" not in verdict["axioms"]
    timings = await agent.call("get_timings", session_id=sid)
    tools = [e["tool"] for e in timings["entries"]]
    assert tools[:4] == ["open_task", "set_proof", "set_proof", "check_proof"]
    assert all(e["total_ms"] >= e["lean_ms"] >= 0 for e in timings["entries"])
    assert (await agent.call("close_session", session_id=sid))["closed"] is True


ESCAPES = {
    "new theorem": "\n  True.intro\n  theorem evil : True := True.intro",
    "#exit": "\n  True.intro\n  #exit",
    "end of namespace": "\n  True.intro\n  end Demo.TrueIntro",
    "unterminated comment": "\n  True.intro /- swallow the rest",
    "column-0 command": "\n  True.intro\ntheorem evil : True := True.intro",
    "attribute": "\n  True.intro\n  attribute [irreducible] True",
    "set_option": "\n  True.intro\n  set_option pp.all true",
    "unterminated string": '\n  True.intro "',
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
async def test_edits_that_escape_the_proof_are_rejected(agent: Agent, name: str) -> None:
    opened = await agent.call("open_task", task_id="true_intro")
    sid = opened["session_id"]
    with pytest.raises(RpcError) as info:
        await agent.call("set_proof", session_id=sid, body=ESCAPES[name])
    assert info.value.code == -32000
    assert info.value.data["code"] == "rejected"
    assert "rejected" in info.value.message
    state = await agent.call("get_proof_state", session_id=sid)
    assert state["version"] == 1 and state["body"] == opened["body"]
    ok = await agent.call("set_proof", session_id=sid, body="\n  True.intro")
    assert ok["complete"] is True and ok["version"] == 2


async def test_comments_in_the_body_are_fine(agent: Agent) -> None:
    sid = (await agent.call("open_task", task_id="true_intro"))["session_id"]
    body = "\n  -- the trivial proof\n  True.intro -- done\n  /- a closed block -/"
    result = await agent.call("set_proof", session_id=sid, body=body)
    assert result["complete"] is True
    verdict = await agent.call("check_proof", session_id=sid)
    assert verdict["accepted"], verdict["reasons"]


async def test_replace_in_proof_needs_exactly_one_occurrence(agent: Agent) -> None:
    sid = (await agent.call("open_task", task_id="and_swap"))["session_id"]
    await agent.call(
        "set_proof",
        session_id=sid,
        body="\n  @And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hp hq) h",
    )
    with pytest.raises(RpcError) as info:
        await agent.call("replace_in_proof", session_id=sid, old="hp", new="hq")
    assert "occurs" in info.value.message
    fixed = await agent.call("replace_in_proof", session_id=sid, old="hp hq) h", new="hq hp) h")
    assert fixed["complete"] is True


async def test_goals_round_trip_positions_after_non_bmp_text(agent: Agent) -> None:
    opened = await agent.call("open_task", task_id="and_left_unicode")
    sid = opened["session_id"]
    start = opened["body_range"]["start"]
    lines = opened["text"].split("\n")
    # The body starts right after `:=` on a line full of 𝔽/𝓗 (2 UTF-16 units each).
    assert lines[start["line"] - 1][: start["column"] - 1].endswith(":=")
    body = opened["body"]
    term_line = start["line"] + body[: body.index("sorryAx")].count("\n")
    column = lines[term_line - 1].index("sorryAx") + 1
    goals = await agent.call("get_goals", session_id=sid, line=term_line, column=column)
    assert goals["term_goal"].endswith("⊢ 𝔽")
    assert "𝔽 𝓗 : Prop" in goals["term_goal"]
    # An error on the signature's own line, after five non-BMP characters: columns are code
    # points (UTF-16 would be 5 more).
    wrong = await agent.call("set_proof", session_id=sid, body=" h")
    text = (await agent.call("get_proof_state", session_id=sid))["text"]
    error = next(d for d in wrong["diagnostics"] if d["severity"] == "error")
    line = text.split("\n")[error["line"] - 1]
    assert line.endswith(":= h")
    assert error["column"] == len(line)  # the final `h`, 1-based
    assert error["end_column"] == len(line) + 1


async def test_try_proofs_leaves_the_session_unchanged(agent: Agent) -> None:
    opened = await agent.call("open_task", task_id="refl_z")
    sid = opened["session_id"]
    bodies = ["\n  @Eq.refl N N.z", "\n  N.z", "\n  True.intro\n  #exit"]
    bodies.append("\n  @Eq.refl N (N.s N.z)")
    results = (await agent.call("try_proofs", session_id=sid, bodies=bodies))["results"]
    assert [r["complete"] for r in results] == [True, False, False, False]
    assert results[2]["rejected"]
    state = await agent.call("get_proof_state", session_id=sid)
    assert state["version"] == 1 and state["body"] == opened["body"]


async def test_bad_input_gets_clear_errors_and_the_server_keeps_serving(rpc: RpcProcess) -> None:
    with pytest.raises(RpcError) as info:
        await rpc.call("open_task", task_id="no_such_task")
    assert info.value.data["code"] == "unknown_task" and "list_tasks" in info.value.data["hint"]
    with pytest.raises(RpcError) as info:
        await rpc.call("set_proof", session_id="nope", body="x")
    assert info.value.data["code"] == "unknown_session"
    with pytest.raises(RpcError) as info:
        await rpc.call("get_goals", session_id="nope", line="1", column=1)
    assert info.value.code == -32602 and "integer" in info.value.message
    with pytest.raises(RpcError) as info:
        await rpc.call("no_such_method")
    assert info.value.code == -32601
    # what to do next, as every other error says it
    assert "set_proof" in info.value.data["methods"] and "methods" in info.value.data["hint"]
    sid = (await rpc.call("open_task", task_id="true_intro"))["session_id"]
    with pytest.raises(RpcError) as info:
        await rpc.call("set_proof", session_id=sid, body="\n  " + "a" * (1024 * 1024 + 1))
    assert "1 MB" in info.value.message
    with pytest.raises(RpcError) as info:
        await rpc.call("get_goals", session_id=sid, line=999, column=1)
    assert info.value.data["code"] == "invalid_argument"
    await rpc.send_raw(b'{"jsonrpc": "2.0", "id": 77, "method": "list_tasks", "params": {}\xff}\n')
    reply = await rpc.next_unmatched()
    assert reply["error"]["code"] == -32700
    await rpc.send_raw(b"this is not json\n")
    assert (await rpc.next_unmatched())["error"]["code"] == -32700
    assert (await rpc.call("list_tasks"))["tasks"]


async def test_concurrent_edits_on_one_session_are_serialized(agent: Agent) -> None:
    sid = (await agent.call("open_task", task_id="true_intro"))["session_id"]
    versions: list[int] = []

    async def edit(i: int) -> None:
        body = "\n  True.intro" if i % 2 else "\n  N.z"
        versions.append((await agent.call("set_proof", session_id=sid, body=body))["version"])

    async with anyio.create_task_group() as tg:
        for i in range(6):
            tg.start_soon(edit, i)
    assert sorted(versions) == [2, 3, 4, 5, 6, 7]


async def test_eight_concurrent_sessions(agent: Agent) -> None:
    tasks = sorted(REFS)[:8]
    done: dict[str, bool] = {}

    async def session(task_id: str) -> None:
        sid = (await agent.call("open_task", task_id=task_id))["session_id"]
        result = await agent.call("set_proof", session_id=sid, body="\n  " + REFS[task_id])
        done[task_id] = result["complete"]
        await agent.call("close_session", session_id=sid)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for task_id in tasks:
                tg.start_soon(session, task_id)
    assert done == {t: True for t in tasks}
    status = await agent.call("server_status")
    assert status["pool"]["processes"] and all(p["pid"] for p in status["pool"]["processes"])


async def test_complete_ignores_sorry_in_other_declarations_of_the_task_file() -> None:
    suite = Path(__file__).parent / "fixtures" / "exploit_suite"
    async with rpc_server(suite) as rpc:
        sid = (await rpc.call("open_task", task_id="helper"))["session_id"]
        done = await rpc.call("set_proof", session_id=sid, body="\n  True.intro")
        # The helper's "declaration uses sorry" warning stays visible, but the target is done.
        assert any("sorry" in d["message"] for d in done["diagnostics"])
        assert done["complete"] is True
        cheat = await rpc.call("set_proof", session_id=sid, body="\n  sorryAx True Bool.true")
        assert cheat["complete"] is False


async def test_sessions_of_other_connections_are_invisible() -> None:
    async with rpc_server() as a, rpc_server() as b:
        sid = (await a.call("open_task", task_id="true_intro"))["session_id"]
        with pytest.raises(RpcError) as info:
            await b.call("get_proof_state", session_id=sid)
        assert info.value.data["code"] == "unknown_session"


def test_ledger_lines_are_json_with_timing_fields(tmp_path: Path) -> None:
    from agent_tools.sessions import Ledger

    ledger = Ledger(tmp_path / "l.jsonl")
    ledger.record(
        session="s",
        task="t",
        tool="set_proof",
        queue_ms=1.0,
        lean_ms=2.0,
        total_ms=3.5,
        outcome="ok",
    )
    ledger.close()
    (line,) = (tmp_path / "l.jsonl").read_bytes().splitlines()
    entry = orjson.loads(line)
    assert {"ts", "session", "task", "tool", "queue_ms", "lean_ms", "total_ms", "outcome"} <= set(
        entry
    )


async def test_mcp_tool_schemas_are_plain_json_schema(mcp: McpConn) -> None:
    tools = (await mcp.client.list_tools()).tools
    assert {t.name for t in tools} == {
        "list_tasks",
        "open_task",
        "set_proof",
        "replace_in_proof",
        "get_goals",
        "set_statement",
        "check_statement",
        "get_proof_state",
        "try_proofs",
        "check_proof",
        "get_timings",
        "close_session",
        "server_status",
        "get_hover",
        "check_term",
        "get_declaration",
        "get_outline",
        "get_completions",
        "get_code_actions",
        "profile_proof",
    }
    for tool in tools:
        schema = orjson.dumps(tool.input_schema).decode()
        assert "$ref" not in schema and "anyOf" not in schema, (tool.name, schema)
        assert tool.input_schema["type"] == "object"
        assert tool.description


async def test_mcp_bad_arguments_are_errors_not_crashes(mcp: McpConn) -> None:
    result = await mcp.client.call_tool("get_goals", {"session_id": "x", "line": "one"})
    assert result.is_error
    with pytest.raises(RpcError) as info:
        await mcp.call("set_proof", session_id="nope", body="x")
    assert info.value.data["code"] == "unknown_session"
    assert (await mcp.call("list_tasks"))["tasks"]


async def test_mcp_tools_match_the_shared_catalogue(mcp: McpConn) -> None:
    from agent_tools.sessions import TOOLS

    listed = {t.name: t for t in (await mcp.client.list_tools()).tools}
    assert set(listed) == {spec.name for spec in TOOLS}
    for spec in TOOLS:
        schema = listed[spec.name].input_schema
        assert set(schema.get("properties", {})) == set(spec.params), spec.name
        assert set(schema.get("required", [])) == set(spec.params), spec.name
        assert listed[spec.name].description == spec.description
        for pname, (_ptype, desc) in spec.params.items():
            assert schema["properties"][pname].get("description") == desc, (spec.name, pname)
