"""`ProofService` in-process against the bootstrap Lean, and the MCP and JSON-RPC wires over it:
typed results matching each outputSchema, error shapes, ledger lines and diagnostics."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped]
import orjson
import pytest
from mcp import Client

from agent_tools.servers import (
    ServeOptions,
    build_mcp,
    handle_message,
    open_service,
    package_version,
)
from agent_tools.sessions import TOOL_BY_NAME, ProofService, ToolError, ToolOutput, output_schema
from lsp_bridge import PRELUDE_HEADER, PRELUDE_SORRY

from .suites import demo_with_library, demo_with_tasks

pytestmark = pytest.mark.anyio
DEMO = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "demo"
AND_SWAP_GOAL = "p q : Prop\nh : And p q\n⊢ And q p"
REFS: dict[str, str] = json.loads(
    (Path(__file__).with_name("demo_reference_proofs.json")).read_text(encoding="utf-8")
)
WRONG = "\n  N.z"


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ProofService]:
    """One service per test: its Lean processes end with the test (the stray check holds)."""
    options = ServeOptions(suite=DEMO, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        yield service


def ledger_lines(service: ProofService) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in service.ledger.path.read_bytes().splitlines()]


def conforms(tool: str, result: Any) -> None:
    jsonschema.Draft202012Validator(output_schema(TOOL_BY_NAME[tool])).validate(result)


# -- the service itself ---------------------------------------------------------------------------


async def test_a_full_session_returns_typed_results_that_match_their_schemas(
    service: ProofService,
) -> None:
    results: list[tuple[str, ToolOutput]] = [("list_tasks", await service.list_tasks())]
    opened = await service.open_task("and_swap")
    sid = opened.session_id
    results.append(("open_task", opened))
    results.append(("set_proof", await service.set_proof(sid, WRONG)))
    start = opened.body_range.start
    results.append(("get_goals", await service.get_goals(sid, start.line + 1, 3)))
    results.append(
        ("try_proofs", await service.try_proofs(sid, [WRONG, "\n  " + REFS["and_swap"]]))
    )
    fixed = await service.set_proof(sid, "\n  " + REFS["and_swap"])
    assert fixed.complete and fixed.version == 3
    results.append(("replace_in_proof", await service.replace_in_proof(sid, "hq hp", "hq hp")))
    results.append(("get_proof_state", await service.get_proof_state(sid)))
    results.append(("check_proof", await service.check_proof(sid)))
    results.append(("get_timings", await service.get_timings(sid)))
    results.append(("server_status", await service.server_status()))
    results.append(("get_hover", await service.get_hover(sid, start.line, 3)))
    results.append(("check_term", await service.check_term(sid, "@And.intro q p", True)))
    results.append(("get_declaration", await service.get_declaration(sid, "And.intro")))
    results.append(("get_outline", await service.get_outline(sid)))
    results.append(("get_completions", await service.get_completions(sid, None, None, "And.")))
    results.append(("get_code_actions", await service.get_code_actions(sid, start.line + 1, 3)))
    results.append(("profile_proof", await service.profile_proof(sid)))
    results.append(("close_session", await service.close_session(sid)))
    for tool, result in results:
        assert isinstance(result, TOOL_BY_NAME[tool].output), tool
        conforms(tool, result.model_dump(mode="json"))
    # Statement tools refuse a proof task: tests/test_statement_sessions.py covers them.
    assert {t for t, _ in results} == set(TOOL_BY_NAME) - {"set_statement", "check_statement"}


async def test_a_failing_body_shows_its_error_and_no_internal_exception(
    service: ProofService,
) -> None:
    """No bootstrap "internal exception" artefact beside real errors; alone, it is explained."""
    for task_id in ("refl_z", "and_swap", "and_left_unicode"):
        sid = (await service.open_task(task_id)).session_id
        wrong = await service.set_proof(sid, WRONG)
        messages = [d.message for d in wrong.diagnostics if d.severity == "error"]
        assert messages and all("Type mismatch" in m for m in messages), messages
        assert not any("internal exception" in m for m in messages)
        candidates = await service.try_proofs(sid, [WRONG])
        assert not any("internal exception" in d.message for d in candidates.results[0].diagnostics)
        await service.close_session(sid)
    sid = (await service.open_task("and_swap")).session_id
    alone = await service.set_proof(sid, "\n  sorry")
    (only,) = [d.message for d in alone.diagnostics if d.severity == "error"]
    assert "internal exception" in only and "sorryAx T Bool.false" in only, only


async def test_bodies_as_agents_write_them_get_lean_s_answer_not_a_refusal(
    service: ProofService,
) -> None:
    """Stray tokens, `@`- or comment-led terms, CRLF and a repeated `old` get a precise answer."""
    sid = (await service.open_task("and_swap")).session_id
    for body in ("\n  h ]", "\n  @And.intro q p h h )"):
        stray = await service.set_proof(sid, body)
        assert not stray.complete and any(
            "unexpected token" in d.message for d in stray.diagnostics
        )
    for body in ("\n  @And.intro q p h h", "\n  -- swap\n  h"):
        wrong = await service.set_proof(sid, body)
        assert wrong.goals == ["p q : Prop\nh : And p q\n⊢ And q p"], (body, wrong.goals)
    await service.set_proof(sid, "\n  (h\n  : And q p)")
    crlf = await service.set_proof(sid, "\r\n  (h\r\n  : And q p)")
    assert any("mismatch" in d.message for d in crlf.diagnostics), crlf.diagnostics
    assert "\r" not in (await service.get_proof_state(sid)).text
    for body, why in (("\n  h\ud800", "lone surrogate"), ("\n  h\r x", "carriage return")):
        with pytest.raises(ToolError, match=why) as refused:
            await service.set_proof(sid, body)
        assert refused.value.code == "rejected"
    await service.set_proof(sid, "\n  @And.intro q p h h h")
    with pytest.raises(ToolError, match="occurs 2 times"):
        await service.replace_in_proof(sid, "h h", "X")
    with pytest.raises(ToolError) as unknown:
        await service.open_task("x" * 10_000)
    assert len(str(unknown.value)) < 400
    right = await service.set_proof(sid, "\r\n  " + REFS["and_swap"].replace("\n", "\r\n"))
    assert right.complete


async def test_every_call_writes_a_ledger_line_even_when_it_fails(service: ProofService) -> None:
    before = len(ledger_lines(service))
    with pytest.raises(ToolError) as info:
        await service.set_proof("no-such-session", WRONG)
    assert info.value.code == "unknown_session"
    sid = (await service.open_task("true_intro")).session_id
    for bodies in ([], ["\n  True.intro"] * 17):
        with pytest.raises(ToolError) as info:
            await service.try_proofs(sid, bodies)
        assert info.value.code == "invalid_argument"
    with pytest.raises(ToolError):
        await service.open_task("no_such_task")
    lines = ledger_lines(service)[before:]
    assert [(e["tool"], e["outcome"]) for e in lines] == [
        ("set_proof", "error:unknown_session"),
        ("open_task", "ok"),
        ("try_proofs", "error:invalid_argument"),
        ("try_proofs", "error:invalid_argument"),
        ("open_task", "error:unknown_task"),
    ]
    assert lines[2]["session"] == sid and lines[0]["session"] is None
    await service.close_session(sid)


async def test_try_proofs_records_wall_time_and_per_candidate_times(service: ProofService) -> None:
    sid = (await service.open_task("refl_z")).session_id
    bodies = ["\n  @Eq.refl N N.z", WRONG, "\n  @Eq.refl N (N.s N.z)", "\n  @Eq.refl N N.z"]
    result = await service.try_proofs(sid, bodies)
    assert [r.complete for r in result.results] == [True, False, False, True]
    entry = ledger_lines(service)[-1]
    assert entry["tool"] == "try_proofs" and entry["outcome"] == "ok"
    assert [c["index"] for c in entry["candidates"]] == [0, 1, 2, 3]
    assert entry["total_ms"] >= entry["queue_ms"] + entry["lean_ms"]
    assert all(c["total_ms"] >= c["lean_ms"] > 0 for c in entry["candidates"])
    assert entry["lean_ms"] <= entry["total_ms"]
    totals = (await service.get_timings(sid)).totals
    assert totals.overhead_ms >= 0 and totals.calls == 2
    await service.close_session(sid)


# -- both wires over the same service ------------------------------------------------------------


async def rpc(service: ProofService, method: str, params: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = await handle_message(service, orjson.dumps(message), "rpc-test")
    assert reply is not None
    return reply


async def test_every_result_of_a_full_session_matches_its_output_schema_on_both_wires(
    service: ProofService,
) -> None:
    async with Client(build_mcp(service, client="mcp-test")) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == set(TOOL_BY_NAME)

        async def mcp(tool: str, **args: Any) -> Any:
            result = await client.call_tool(tool, args)
            assert not result.is_error, result.content
            assert result.structured_content is not None
            jsonschema.validate(result.structured_content, listed[tool].output_schema or {})
            return result.structured_content

        async def jsonrpc(tool: str, **args: Any) -> Any:
            reply = await rpc(service, tool, args)
            assert "result" in reply, reply
            jsonschema.validate(reply["result"], listed[tool].output_schema or {})
            return reply["result"]

        for call in (mcp, jsonrpc):
            seen = {"list_tasks"}
            await call("list_tasks")
            opened = await call("open_task", task_id="or_swap")
            sid = opened["session_id"]
            start = opened["body_range"]["start"]
            await call("get_goals", session_id=sid, line=start["line"], column=start["column"])
            await call("set_proof", session_id=sid, body=WRONG)
            await call("try_proofs", session_id=sid, bodies=[WRONG, "\n  " + REFS["or_swap"]])
            await call("set_proof", session_id=sid, body="\n  " + REFS["or_swap"])
            await call("replace_in_proof", session_id=sid, old="\n", new="\n")
            await call("get_proof_state", session_id=sid)
            assert (await call("check_proof", session_id=sid))["accepted"] is True
            await call("get_timings", session_id=sid)
            await call("server_status")
            at = {"line": start["line"] + 1, "column": 4}  # `Or.rec` of the body
            hover = await call("get_hover", session_id=sid, **at)
            assert hover["found"] is True and hover["name"] == "Or.rec", hover
            checked = await call("check_term", session_id=sid, term="h", in_context=True)
            assert checked["type"] == "Or p q"
            declared = await call("get_declaration", session_id=sid, name="Or.inl")
            assert declared["kind"] == "constructor"
            await call("get_outline", session_id=sid)
            offered = await call(
                "get_completions", session_id=sid, line=None, column=None, prefix="Or.i"
            )
            assert {c["name"] for c in offered["completions"]} == {"Or.inl", "Or.inr"}
            await call("get_code_actions", session_id=sid, **at)
            assert (await call("profile_proof", session_id=sid))["status"] == "complete"
            await call("close_session", session_id=sid)
            seen |= {
                "open_task",
                "get_goals",
                "set_proof",
                "try_proofs",
                "replace_in_proof",
                "get_proof_state",
                "check_proof",
                "get_timings",
                "server_status",
                "get_hover",
                "check_term",
                "get_declaration",
                "get_outline",
                "get_completions",
                "get_code_actions",
                "profile_proof",
                "close_session",
            }
            assert seen == set(TOOL_BY_NAME) - {"set_statement", "check_statement"}


BAD_CALLS = [
    ("get_goals", {"session_id": "s", "line": "8", "column": 1}, "`line` must be an integer"),
    ("set_proof", {"session_id": "s", "body": "x", "force": True}, "unknown argument `force`"),
    ("try_proofs", {"session_id": "s", "bodies": []}, "`bodies` needs 1 to 16 items (0 given)"),
    ("try_proofs", {"session_id": "s", "bodies": ["x"] * 17}, "`bodies` needs 1 to 16 items (17"),
    ("set_proof", {"session_id": "s"}, "missing argument `body`"),
]


@pytest.mark.parametrize(("tool", "arguments", "message"), BAD_CALLS)
async def test_bad_arguments_get_the_same_error_on_both_wires(
    service: ProofService, tool: str, arguments: dict[str, Any], message: str
) -> None:
    async with Client(build_mcp(service, client="mcp-test")) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert text.startswith(f"[invalid_argument] {message}"), text
    assert "Next: " in text
    assert "Error executing tool" not in text and "pydantic" not in text
    reply = await rpc(service, tool, arguments)
    assert reply["error"]["code"] == -32602
    assert message in reply["error"]["message"]
    assert reply["error"]["data"]["code"] == "invalid_argument"
    assert reply["error"]["data"]["hint"]


@pytest.mark.parametrize("wire", ["mcp", "jsonrpc"])
async def test_a_nullable_argument_left_out_is_null_and_a_required_one_still_errors(
    service: ProofService, wire: str
) -> None:
    """The published schema still requires every property of `get_completions`."""
    owner = "mcp-test" if wire == "mcp" else "rpc-test"
    sid = (await service.open_task("and_swap", client=owner)).session_id
    lenient = {"session_id": sid, "prefix": "And."}
    missing = {"prefix": "And."}
    if wire == "mcp":
        async with Client(build_mcp(service, client=owner)) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            schema = listed["get_completions"].input_schema
            assert set(schema["required"]) == {"session_id", "line", "column", "prefix"}
            ok = await client.call_tool("get_completions", lenient)
            refused = await client.call_tool("get_completions", missing)
        assert not ok.is_error and isinstance(ok.structured_content, dict), ok
        names = [c["name"] for c in ok.structured_content["completions"]]
        assert refused.is_error and "missing argument `session_id`" in str(refused.content)
    else:
        reply = await rpc(service, "get_completions", lenient)
        names = [c["name"] for c in reply["result"]["completions"]]
        refused_reply = await rpc(service, "get_completions", missing)
        assert "missing argument `session_id`" in refused_reply["error"]["message"]
    assert "intro" in names or "And.intro" in names, names


@pytest.mark.parametrize("wire", ["mcp", "jsonrpc"])
async def test_refused_arguments_still_write_a_ledger_line(
    service: ProofService, wire: str
) -> None:
    owner = "mcp-test" if wire == "mcp" else "rpc-test"  # sessions belong to their connection
    sid = (await service.open_task("true_intro", client=owner)).session_id
    before = len(ledger_lines(service))
    if wire == "mcp":
        async with Client(build_mcp(service, client="mcp-test")) as client:
            result = await client.call_tool("try_proofs", {"session_id": sid, "bodies": []})
        assert result.is_error
    else:
        reply = await rpc(service, "try_proofs", {"session_id": sid, "bodies": []})
        assert reply["error"]["code"] == -32602
    (entry,) = ledger_lines(service)[before:]
    assert (entry["tool"], entry["outcome"], entry["session"]) == (
        "try_proofs",
        "error:invalid_argument",
        sid,
    )
    await service.close_session(sid, client=owner)


async def test_tool_errors_are_code_message_and_next_step_on_mcp(service: ProofService) -> None:
    async with Client(build_mcp(service, client="mcp-test")) as client:
        result = await client.call_tool("set_proof", {"session_id": "nope", "body": "x"})
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error
    assert text == (
        "[unknown_session] unknown session 'nope'. Next: open a task with open_task and use "
        "the session_id it returns"
    )


async def test_mcp_server_info_and_annotations(service: ProofService) -> None:
    async with Client(build_mcp(service)) as client:
        info = client.server_info
        assert info is not None
        assert info.name == "leanrig" and info.version == package_version() != ""
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name, spec in TOOL_BY_NAME.items():
        annotations = tools[name].annotations
        assert annotations is not None and annotations.title == spec.title
        assert annotations.read_only_hint is spec.read_only
        assert tools[name].input_schema["additionalProperties"] is False
    assert tools["get_goals"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["set_proof"].annotations.read_only_hint is False  # type: ignore[union-attr]


async def test_a_clean_report_that_only_quotes_a_sorry_warning_has_no_goals() -> None:
    """A stub slot: the prelude-only Lean cannot emit such an information message."""
    from agent_tools.sessions.elaborate import LeanStep
    from lsp_bridge import DocumentReport, LeanDiagnostic, LspPos, LspRange, Severity
    from repl_pool import Elaboration

    where = LspRange(LspPos(3, 2), LspPos(3, 9))
    quote = LeanDiagnostic(where, Severity.INFORMATION, "declaration uses 'sorry'")
    report = DocumentReport("file:///T.lean", 2, 2, "done", (quote,))
    assert report.clean

    class StubSlot:
        async def elaborate_and_ask(self, text: str, **_: Any) -> Elaboration:
            return Elaboration(report, [], None, None)

    step = LeanStep("text", 5.0, LspPos(3, 9), LspPos(3, 2))
    answer = await step(StubSlot())  # type: ignore[arg-type]
    assert answer.goals == [] and answer.report is report


@pytest.mark.parametrize(
    ("tactic", "at_end", "known", "asked", "goals"),
    [
        (False, None, None, [("ask", None, "start")], ["⊢ q ∧ p"]),
        (True, "goals", None, [("ask", "end", None)], ["⊢ q"]),
        (True, "no_goal", None, [("ask", "end", None), ("term goal", "start")], ["⊢ q ∧ p"]),
        # the whole body's expected type known from an earlier step: not asked again
        (False, None, "⊢ known", [("ask", None, None)], ["⊢ known"]),
        (True, "goals", "⊢ known", [("ask", "end", None)], ["⊢ q"]),
        (True, "no_goal", "⊢ known", [("ask", "end", None)], ["⊢ known"]),
    ],
)
async def test_a_step_asks_lean_for_the_goals_it_shows_and_no_others(
    tactic: bool, at_end: Any, known: str | None, asked: list[tuple[Any, ...]], goals: list[str]
) -> None:
    """A term body asks only for the expected type at its start; a tactic body for the goals at
    its end, then the expected type only if there are none; a known expected type is not asked."""
    from agent_tools.sessions.elaborate import LeanStep
    from lsp_bridge import (
        DocumentReport,
        LeanDiagnostic,
        LspPos,
        LspRange,
        PlainGoal,
        PlainTermGoal,
        Severity,
    )
    from repl_pool import Elaboration

    start, end = LspPos(3, 2), LspPos(3, 9)
    name = {start: "start", end: "end", None: None}
    error = LeanDiagnostic(LspRange(start, end), Severity.ERROR, "unsolved goals")
    report = DocumentReport("file:///T.lean", 2, 2, "done", (error,))
    term = PlainTermGoal("goal", "⊢ q ∧ p", LspRange(start, end))  # the whole body's
    calls: list[tuple[Any, ...]] = []

    class RecordingSlot:
        async def elaborate_and_ask(
            self, text: str, *, goal_at: LspPos | None, term_at: LspPos | None, **_: Any
        ) -> Elaboration:
            calls.append(("ask", name[goal_at], name[term_at]))
            tactic_goals = ["⊢ q"] if at_end == "goals" else []
            plain = PlainGoal(at_end, tuple(tactic_goals)) if goal_at else None
            return Elaboration(report, [], plain, term if term_at else None)

        async def plain_term_goal(self, pos: LspPos, *, timeout: float) -> PlainTermGoal:
            calls.append(("term goal", name[pos]))
            return term

    step = LeanStep("text", 5.0, end, start, tactic=tactic, expected=known)
    answer = await step(RecordingSlot())  # type: ignore[arg-type]
    assert calls == asked
    assert answer.goals == goals


@pytest.mark.parametrize(
    ("body", "goals"),
    [
        ("\n  by", [AND_SWAP_GOAL]),  # tactic goals at the end
        ("\n  (by exact h : And q p)", [AND_SWAP_GOAL]),  # none there: the expected type
        ("\n  fun x => by", [AND_SWAP_GOAL]),
        ("\n  @And.intro q p h.2 h.2", [AND_SWAP_GOAL]),  # a term body: the expected type
        ("\n  h -- by symmetry", [AND_SWAP_GOAL]),
        ("\n  by exact h", [AND_SWAP_GOAL]),  # `exact` is unknown here: no goals at the end
        # Lean's expected type at these is not the whole body's: the task's is shown
        ("\n  (fun (x : And p q) => x) h", [AND_SWAP_GOAL]),
        ("\n  And.intro h h", [AND_SWAP_GOAL]),
        ("\n  foo h", [AND_SWAP_GOAL]),
        ("\n  (@And.intro q p) h.2 h.1.1", [AND_SWAP_GOAL]),
    ],
)
async def test_tactic_and_term_bodies_show_lean_s_goals(
    service: ProofService, body: str, goals: list[str]
) -> None:
    sid = (await service.open_task("and_swap")).session_id
    step = await service.set_proof(sid, body)
    assert not step.complete and step.goals == goals, (step.goals, step.diagnostics)


async def test_the_late_expected_type_query_gets_time_of_its_own_and_may_be_refused() -> None:
    """The expected-type query after a barrier at the step's last moment still gets
    LATE_QUERY_SECONDS; Lean answering it with an error leaves the goals out."""
    from agent_tools.sessions.elaborate import LATE_QUERY_SECONDS, LeanStep
    from lsp_bridge import (
        DocumentReport,
        LeanDiagnostic,
        LspPos,
        LspRange,
        PlainGoal,
        PlainTermGoal,
        ResponseError,
        Severity,
    )
    from repl_pool import Elaboration

    at = LspPos(3, 2)
    error = LeanDiagnostic(LspRange(at, at), Severity.ERROR, "unknown tactic")
    report = DocumentReport("file:///T.lean", 2, 2, "done", (error,))
    given: list[float] = []

    class LateSlot:
        def __init__(self, refuse: bool) -> None:
            self.refuse = refuse

        async def elaborate_and_ask(self, text: str, *, timeout: float, **_: Any) -> Elaboration:
            await anyio.sleep(timeout)  # the barrier comes at the end of the step's time
            return Elaboration(report, [], PlainGoal("no_goal"), None)

        async def plain_term_goal(self, pos: LspPos, *, timeout: float) -> PlainTermGoal:
            given.append(timeout)
            if self.refuse:
                raise ResponseError("$/lean/plainTermGoal", -32603, "Unknown constant")
            return PlainTermGoal("goal", "⊢ q ∧ p", LspRange(at, at))

    step = LeanStep("text", 0.05, at, at, tactic=True)
    answer = await step(LateSlot(refuse=False))  # type: ignore[arg-type]
    assert answer.goals == ["⊢ q ∧ p"]
    assert given == [LATE_QUERY_SECONDS]
    refused = await step(LateSlot(refuse=True))  # type: ignore[arg-type]
    assert refused.goals == [] and refused.report is report


async def test_a_goal_query_lean_answers_with_an_error_leaves_the_goals_out(
    service: ProofService,
) -> None:
    """On the prelude-only Lean the expected-type query of a name literal fails."""
    sid = (await service.open_task("and_swap")).session_id
    step = await service.set_proof(sid, "\n  `foo")
    # The whole body's expected type, known since open_task's step: not asked again.
    assert not step.complete and step.goals == [AND_SWAP_GOAL]
    assert any("Unknown constant" in d.message for d in step.diagnostics), step.diagnostics
    start = (await service.get_proof_state(sid)).body_range.start
    goals = await service.get_goals(sid, start.line + 1, 3)
    assert goals.term_goal is None and goals.goals == []


def test_an_error_lean_answers_with_is_not_called_a_replaced_process() -> None:
    from agent_tools.sessions import agent_error
    from lsp_bridge import ResponseError, WorkerCrashed

    refused = agent_error(ResponseError("$/lean/plainGoal", -32603, "boom"))
    assert "Lean answered with an error" in refused.message and "boom" in refused.message
    assert refused.code == "lean_error"  # not an infrastructure failure (runs: INFRA_OUTCOMES)
    assert refused.hint is not None and "replaced" not in refused.hint
    crashed = agent_error(WorkerCrashed("$/lean/plainGoal", -32902, "the file worker crashed"))
    assert crashed.hint is not None and "replaced" in crashed.hint


AND_SWAP_PROOF = "@And.rec p q (fun _ => And q p) (fun hp hq => @And.intro q p hq hp) h"


@pytest.mark.parametrize(
    "body",
    [
        "\n  let s := sorryAx\n  s (And q p) Bool.false",
        "\n  let s := @sorryAx (And q p)\n  s Bool.true",
        "\n  (fun (f : (α : Prop) → Bool → α) => f (And q p) Bool.false) sorryAx",
    ],
)
async def test_a_sorry_lean_names_by_its_term_is_not_complete(
    service: ProofService, body: str
) -> None:
    """ "declaration uses `sorryAx …`" warnings count as a sorry, as "uses `sorry`" does."""
    sid = (await service.open_task("and_swap")).session_id
    step = await service.set_proof(sid, body)
    assert not step.complete, step.diagnostics
    assert not (await service.check_proof(sid)).accepted


async def test_a_hypothesis_named_extern_is_a_proof_like_any_other(service: ProofService) -> None:
    sid = (await service.open_task("and_swap")).session_id
    body = "\n  @And.rec p q (fun _ => And q p) (fun extern hq => @And.intro q p hq extern) h"
    step = await service.set_proof(sid, body)
    assert step.complete, step.diagnostics
    assert (await service.check_proof(sid)).accepted


async def test_a_proof_with_a_construct_the_verdict_forbids_is_not_complete(
    service: ProofService,
) -> None:
    """`set_option debug.skipKernelTC true in …`, which Lean accepts, completes no step."""
    sid = (await service.open_task("and_swap")).session_id
    step = await service.set_proof(
        sid, f"\n  set_option debug.skipKernelTC true in {AND_SWAP_PROOF}"
    )
    assert not step.complete
    assert any("set_option debug" in d.message for d in step.diagnostics), step.diagnostics
    verdict = await service.check_proof(sid)
    assert not verdict.accepted
    assert (await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")).complete


# A task file on its own, importing nothing: its header is not the demo tasks' header.
OWN_TASK = f"""{PRELUDE_HEADER}{PRELUDE_SORRY}
namespace Own
theorem main : @Eq N N.z N.z :=
  sorryAx (@Eq N N.z N.z) N.z
end Own
"""
DEMO_HEADER = "prelude import Demo.Basic"  # as the pool names the demo tasks' header
# A task after a preamble long enough for a prefix module: its documents import that module.
LONG_PREAMBLE = "\n".join(f"theorem Long.fact{i} : True := True.intro" for i in range(45))
LONG_TASK = f"""prelude
import Demo.Basic

{LONG_PREAMBLE}

namespace Long
theorem main : True :=
  sorryAx (True) Bool.false
end Long
"""


@pytest.mark.parametrize(
    ("task", "file", "text", "proof", "header"),
    [
        ("own", "Own.lean", OWN_TASK, "@Eq.refl N N.z", "prelude"),
        (
            "long",
            "Long.lean",
            LONG_TASK,
            "True.intro",
            "prelude import Demo.Basic import LeanrigPrefix_",
        ),
    ],
    ids=["own-header", "prefix-module"],
)
async def test_a_service_bound_to_one_task_warms_only_that_task_s_process(
    tmp_path: Path, task: str, file: str, text: str, proof: str, header: str
) -> None:
    """`serve --task` (each attempt of a run) starts one Lean process before the first call: the
    one its session then steps on, whose header is the task's (its prefix module's import)."""
    theorem = f"{file.removesuffix('.lean')}.main"
    suite = demo_with_tasks(tmp_path / "suite", {task: (file, theorem, text)})
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False, task=task)
    async with open_service(options) as service:
        with anyio.fail_after(60):
            while not any(p.state == "idle" for p in service.pool.stats().processes):
                await anyio.sleep(0.02)
        sid = (await service.open_task(task)).session_id
        assert (await service.set_proof(sid, f"\n  {proof}")).complete
        stats = service.pool.stats()
        assert stats.started == 1 and len(stats.processes) == 1, stats
        assert stats.processes[0].key.startswith(header), stats


async def test_a_proof_through_a_sorry_in_the_suite_s_library_is_not_complete(
    tmp_path: Path,
) -> None:

    cheat = (
        "theorem Demo.cheat (p q : Prop) (h : And p q) : And q p :=\n  sorryAx (And q p) Bool.false"
    )
    suite = demo_with_library(tmp_path / "suite", cheat)
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("and_swap")).session_id
        step = await service.set_proof(sid, "\n  Demo.cheat p q h")
        assert not step.complete
        assert any("sorryAx" in d.message for d in step.diagnostics), step.diagnostics
        assert not (await service.check_proof(sid)).accepted
        assert (await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")).complete


async def test_a_target_named_like_sorryax_is_complete_when_it_does_not_use_it(
    tmp_path: Path,
) -> None:
    """The probe is judged on Lean's axiom names, not on the text naming the target."""

    cheat = "theorem Demo.cheat (p : Prop) : p :=\n  sorryAx p Bool.false"
    suite = demo_with_library(tmp_path / "suite", cheat)
    for path in (suite / "suite.toml", suite / "Demo" / "AndSwap.lean"):
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("Demo.AndSwap", "Demo.sorryAxFree"), encoding="utf-8")
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("and_swap")).session_id
        step = await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")
        assert step.complete, step.diagnostics
        assert (await service.check_proof(sid)).accepted
        through = await service.set_proof(sid, "\n  Demo.cheat (And q p)")
        assert not through.complete
        assert any("sorryAx" in d.message for d in through.diagnostics), through.diagnostics


async def test_a_proof_naming_an_axiom_of_lean_s_own_library_is_not_complete(
    tmp_path: Path,
) -> None:
    """Init's `Lean.ofReduceBool`, declared by the suite's library on the prelude Lean."""

    cheat = "axiom Lean.ofReduceBool (p : Prop) : p"
    suite = demo_with_library(tmp_path / "suite", cheat)
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        service.elaborator.library_axioms = ()
        sid = (await service.open_task("and_swap")).session_id
        step = await service.set_proof(sid, "\n  Lean.ofReduceBool (And q p)")
        assert not step.complete
        assert any("Lean.ofReduceBool" in d.message for d in step.diagnostics), step.diagnostics
        verdict = await service.check_proof(sid)
        assert not verdict.accepted
        assert any("Lean.ofReduceBool" in r for r in verdict.reasons), verdict.reasons
        assert (await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")).complete


EXIT_TASK = """prelude
import Demo.Basic

namespace Bx

axiom cheat : False

theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false

def after : N := N.z

end Bx

#exit

this is never read
"""


async def test_a_probed_task_file_ending_in_exit_can_be_completed(tmp_path: Path) -> None:
    """The `#print axioms` probe goes before the `#exit`, so the right proof completes."""

    suite = demo_with_tasks(tmp_path / "suite", {"exit": ("Exit.lean", "Bx.main", EXIT_TASK)})
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("exit")).session_id
        done = await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")
        assert done.complete, done.diagnostics
        assert done.diagnostics == []
        assert (await service.check_proof(sid)).accepted
        cheat = await service.set_proof(sid, "\n  @False.rec (fun _ => And q p) cheat")
        assert not cheat.complete
        assert any("Bx.cheat" in d.message for d in cheat.diagnostics), cheat.diagnostics
        wrong = await service.set_proof(sid, "\n  h")
        assert not wrong.complete and wrong.diagnostics[0].line == 9, wrong.diagnostics


LAST_COMMAND_TASK = """prelude
import Demo.Basic

theorem helper (p : Prop) : p := sorryAx p Bool.false

theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false
"""


async def test_a_parse_error_at_the_end_of_a_probed_file_names_no_hidden_command(
    tmp_path: Path,
) -> None:
    """An unclosed parenthesis at a probed file's end gets the task file's own parse message."""

    suite = demo_with_tasks(tmp_path / "suite", {"last": ("Last.lean", "main", LAST_COMMAND_TASK)})
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("last")).session_id
        step = await service.set_proof(sid, f"\n  ({AND_SWAP_PROOF}")
        messages = [d.message for d in step.diagnostics]
        assert not step.complete
        assert not any("#print" in m for m in messages), messages
        assert any(m.startswith("unexpected end of input") for m in messages), messages


async def test_a_proof_through_an_axiom_outside_the_allow_list_is_not_complete(
    tmp_path: Path,
) -> None:
    """The step names the library's axiom outside the allow-list."""

    cheat = "axiom Demo.swapAx (p q : Prop) (h : And p q) : And q p"
    suite = demo_with_library(tmp_path / "suite", cheat)
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("and_swap")).session_id
        step = await service.set_proof(sid, "\n  Demo.swapAx p q h")
        assert not step.complete
        assert any("Demo.swapAx" in d.message for d in step.diagnostics), step.diagnostics
        verdict = await service.check_proof(sid)
        assert not verdict.accepted
        assert any("Demo.swapAx" in r for r in verdict.reasons), verdict.reasons
        assert (await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")).complete


async def test_a_complete_step_near_the_verdict_s_time_limit_says_it_may_time_out(
    tmp_path: Path,
) -> None:
    """A complete step that took more than half the verdict's limit says so; with
    `wall_seconds = 0.005` every step is over it and the verdict times out."""
    import shutil

    suite = tmp_path / "suite"
    shutil.copytree(DEMO, suite)
    spec = suite / "suite.toml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(
        text.replace(
            'library = ["Demo.Basic"]\n',
            'library = ["Demo.Basic"]\nlimits = { wall_seconds = 0.005 }\n',
            1,
        ),
        encoding="utf-8",
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("and_swap")).session_id
        step = await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")
        assert step.complete
        assert any("may time out" in d.message for d in step.diagnostics), step.diagnostics
        verdict = await service.check_proof(sid)
        assert not verdict.accepted
        assert any("0.005 s" in r for r in verdict.reasons), verdict.reasons


async def test_a_quick_complete_step_has_no_time_warning(service: ProofService) -> None:
    sid = (await service.open_task("and_swap")).session_id
    step = await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")
    assert step.complete and step.diagnostics == [], step.diagnostics


async def test_an_axiom_named_like_an_allowed_one_is_probed_and_the_demo_is_not(
    tmp_path: Path,
) -> None:
    """Axioms are compared with the allow-list by their full name (`Demo.sound` is probed, not
    taken for `Quot.sound`); the demo's `unsafe axiom lcErased` gets no probe."""

    async with open_service(
        ServeOptions(suite=DEMO, run_dir=tmp_path / "demo-runs", sandbox=False)
    ) as service:
        for task in service.suite.tasks.values():
            assert not (await service.elaborator.memo(task)).probed, task.id
    cheat = "namespace Demo\naxiom sound (p q : Prop) (h : And p q) : And q p\nend Demo"
    suite = demo_with_library(tmp_path / "suite", cheat)
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("and_swap")).session_id
        step = await service.set_proof(sid, "\n  Demo.sound p q h")
        verdict = await service.check_proof(sid)
        assert not verdict.accepted
        assert any("Demo.sound" in r for r in verdict.reasons), verdict.reasons
        assert not step.complete
        assert any("Demo.sound" in d.message for d in step.diagnostics), step.diagnostics
        assert (await service.set_proof(sid, f"\n  {AND_SWAP_PROOF}")).complete


@pytest.mark.parametrize(
    "body",
    [
        f"\n  aux\nwhere aux : And q p := {AND_SWAP_PROOF}",  # a `where` clause in column 0
        f"\n  ({AND_SWAP_PROOF}\n)",  # a closing bracket in column 0
        f"\n  /- swap:\nthe two sides\n  -/\n  {AND_SWAP_PROOF}",  # a comment's line
        # a `where` clause's declarations in column 0, one with a doc comment
        f"\n  aux₂\nwhere\n/-- the swap -/\naux : And q p := {AND_SWAP_PROOF}\n"
        "aux₂ : And q p := aux",
    ],
)
async def test_column_0_lines_lean_reads_as_part_of_the_proof_are_accepted(
    service: ProofService, body: str
) -> None:
    sid = (await service.open_task("and_swap")).session_id
    step = await service.set_proof(sid, body)
    assert step.complete, step.diagnostics
    assert (await service.check_proof(sid)).accepted


async def test_a_command_after_a_where_clause_in_column_0_is_rejected_by_lean_s_parse(
    service: ProofService,
) -> None:
    sid = (await service.open_task("and_swap")).session_id
    evil = "theorem evil (r : Prop) (hr : r) : r := hr"
    for body in (
        f"\n  aux\nwhere\naux : And q p := {AND_SWAP_PROOF}\n{evil}",
        f"\n  aux\nwhere\naux : And q p := {AND_SWAP_PROOF}\n#exit",
    ):
        with pytest.raises(ToolError) as refused:
            await service.set_proof(sid, body)
        assert refused.value.code == "rejected", refused.value
        assert "column 0" not in str(refused.value), refused.value  # Lean judged it
    assert (await service.check_proof(sid)).reasons  # still the task's own body


async def test_a_rejected_edit_says_what_to_do_and_which_version_stays(
    service: ProofService,
) -> None:
    """Every rejection's hint says what to do and names the version the session stays at."""
    sid = (await service.open_task("and_swap")).session_id
    await service.set_proof(sid, WRONG)  # version 2
    cases = {
        "\n  h\x00": "remove it",
        '\n  h "open': 'close it with `"`',
        f"\n  {AND_SWAP_PROOF} #exit": "or an unterminated comment or string; remove it",
        f"\n  {AND_SWAP_PROOF}\n  set_option pp.all true": "separate commands (e.g.",
    }
    for body, action in cases.items():
        with pytest.raises(ToolError) as refused:
            await service.set_proof(sid, body)
        assert refused.value.code == "rejected", refused.value
        assert action in str(refused.value), refused.value
        assert refused.value.hint.endswith("the session stays at version 2"), refused.value.hint
    assert (await service.get_proof_state(sid)).version == 2


async def test_a_goal_position_off_its_line_says_how_long_the_line_is(
    service: ProofService,
) -> None:
    """A column past the end of an existing line is refused with the line's length."""
    opened = await service.open_task("and_swap")
    text = (await service.get_proof_state(opened.session_id)).text
    empty = text.split("\n").index("") + 1  # an empty line of the task file
    with pytest.raises(ToolError) as off:
        await service.get_goals(opened.session_id, empty, 3)
    assert str(off.value).startswith(f"column 3 is outside line {empty}, which has 0 char")
    assert off.value.hint is not None and "1..1" in off.value.hint, off.value.hint
    with pytest.raises(ToolError, match="line 999 is outside the file"):
        await service.get_goals(opened.session_id, 999, 1)


async def test_goals_after_the_documents_worker_crashed_restart_it(
    service: ProofService,
) -> None:
    """get_goals on unchanged text after the document's worker crashed re-sends the text."""
    import os
    import signal

    import psutil

    opened = await service.open_task("and_swap")
    sid = opened.session_id
    await service.set_proof(sid, WRONG)
    start = opened.body_range.start
    before = await service.get_goals(sid, start.line + 1, 3)

    # This service's pool: its document workers are this process's own children.
    def is_worker(p: psutil.Process) -> bool:
        try:
            return "--worker" in p.cmdline()
        except psutil.Error:  # gone, or a zombie another test left
            return False

    workers = [p for p in psutil.Process().children() if is_worker(p)]
    assert workers
    for worker in workers:
        os.kill(worker.pid, signal.SIGKILL)
    psutil.wait_procs(workers, timeout=10)
    after = await service.get_goals(sid, start.line + 1, 3)
    assert after.goals == before.goals and after.term_goal == before.term_goal


async def test_the_mode_reason_counts_in_english(service: ProofService) -> None:
    """The mode reason says "1 command", not "1 commands"."""
    opened = await service.open_task("and_swap")
    assert opened.mode == "file"
    assert opened.mode_reason.startswith("1 command before the target "), opened.mode_reason


BROKEN_TASK = """prelude
import Demo.Basic

namespace Broken

theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false

def after : N := notDefinedAnywhere

end Broken
"""


WRAPPED_BROKEN_TASK = """prelude
import Demo.Basic

namespace Outer
def helper : N := N.z
end Outer

open Outer in
/-- The swap, with `helper` in scope for this theorem only. -/
theorem main (p q : Prop) (h : And p q) : And q p :=
  sorryAx (And q p) Bool.false

def after : N := helper
"""


async def test_a_task_file_broken_only_as_written_is_never_complete(tmp_path: Path) -> None:
    """The target's unwrapped `open … in` hides the file's error: every step says so."""
    suite = demo_with_tasks(
        tmp_path / "suite", {"wrapped": ("Wrapped.lean", "main", WRAPPED_BROKEN_TASK)}
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    said = "the task file as written has an error outside the proof body"
    async with open_service(options) as service:
        opened = await service.open_task("wrapped")
        assert any(d.message.startswith(said) for d in opened.diagnostics), opened.diagnostics
        step = await service.set_proof(opened.session_id, f"\n  {AND_SWAP_PROOF}")
        assert not step.complete
        warned = [d.message for d in step.diagnostics if d.message.startswith(said)]
        assert len(warned) == 1 and "line 13" in warned[0] and "helper" in warned[0], warned
        assert not (await service.check_proof(opened.session_id)).accepted
    fixed = WRAPPED_BROKEN_TASK.replace("def after : N := helper", "def after : N := Outer.helper")
    suite = demo_with_tasks(tmp_path / "fixed", {"wrapped": ("Wrapped.lean", "main", fixed)})
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs-fixed", sandbox=False)
    async with open_service(options) as service:
        opened = await service.open_task("wrapped")
        step = await service.set_proof(opened.session_id, f"\n  {AND_SWAP_PROOF}")
        assert step.complete, step.diagnostics
        assert not any(d.message.startswith(said) for d in step.diagnostics)
        assert (await service.check_proof(opened.session_id)).accepted


async def test_the_file_as_written_is_asked_again_when_lean_could_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed elaboration of the file as written (busy pool, timeout) is not "no errors"."""
    from agent_tools.sessions import elaborate
    from lsp_bridge import LeanrigError

    real = elaborate.WrittenFile.__call__
    failures = [LeanrigError("Lean did not answer in time")]

    async def flaky(self: elaborate.WrittenFile, slot: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real(self, slot)

    monkeypatch.setattr(elaborate.WrittenFile, "__call__", flaky)
    suite = demo_with_tasks(
        tmp_path / "suite", {"wrapped": ("Wrapped.lean", "main", WRAPPED_BROKEN_TASK)}
    )
    said = "the task file as written has an error outside the proof body"
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        opened = await service.open_task("wrapped")
        assert not any(d.message.startswith(said) for d in opened.diagnostics)  # not known
        step = await service.set_proof(opened.session_id, f"\n  {AND_SWAP_PROOF}")
        assert not step.complete
        assert any(d.message.startswith(said) for d in step.diagnostics), step.diagnostics


SLY_TASK = f"""prelude
import Demo.Basic

namespace Sly

theorem swap.sorry (p q : Prop) (h : And p q) : And q p :=
  {AND_SWAP_PROOF}

theorem main (p q : Prop) (h : And p q) : And q p :=
  swap.sorry p q h

end Sly
"""


async def test_a_placeholder_that_proves_the_theorem_is_no_one_s_proof(tmp_path: Path) -> None:
    """A lemma named `swap.sorry`: the untouched task is neither complete nor accepted."""
    suite = demo_with_tasks(tmp_path / "suite", {"sly": ("Sly.lean", "Sly.main", SLY_TASK)})
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        opened = await service.open_task("sly")
        assert not opened.complete
        assert any("placeholder already proves" in d.message for d in opened.diagnostics)
        verdict = await service.check_proof(opened.session_id)
        assert not verdict.accepted
        assert any("placeholder already proves" in r for r in verdict.reasons), verdict.reasons
        step = await service.set_proof(opened.session_id, f"\n  {AND_SWAP_PROOF}")
        assert step.complete, step.diagnostics
        assert (await service.check_proof(opened.session_id)).accepted


async def test_a_task_file_with_errors_outside_the_body_says_so_at_open(tmp_path: Path) -> None:
    """open_task says so once, at the first error."""

    from agent_tools.sessions.elaborate import TASK_FILE_ERRORS

    suite = demo_with_tasks(
        tmp_path / "suite", {"broken": ("Broken.lean", "Broken.main", BROKEN_TASK)}
    )
    options = ServeOptions(suite=suite, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        opened = await service.open_task("broken")
        warnings = [d for d in opened.diagnostics if d.message == TASK_FILE_ERRORS]
        assert len(warnings) == 1 and warnings[0].line == 9, opened.diagnostics
        step = await service.set_proof(opened.session_id, f"\n  {AND_SWAP_PROOF}")
        assert not step.complete
        assert not any(d.message == TASK_FILE_ERRORS for d in step.diagnostics)
    async with open_service(
        ServeOptions(suite=DEMO, run_dir=tmp_path / "demo-runs", sandbox=False)
    ) as demo:
        for task_id in demo.suite.tasks:
            opened = await demo.open_task(task_id)
            assert not any(d.message == TASK_FILE_ERRORS for d in opened.diagnostics), task_id


async def test_constructs_that_act_while_lean_elaborates_never_reach_the_sessions_lean(
    service: ProofService,
) -> None:
    """`include_str` or a file-reading `run_tac`: this Lean has neither, so refusal is observed."""
    opened = await service.open_task("and_swap")
    sid = opened.session_id
    for body, construct in (
        ('\n  (include_str "/etc/hostname")', "include_str"),
        ("\n  by run_tac (pure ())", "run_tac"),
        ("\n  by\n    «run_tac» (pure ())", "run_tac"),
    ):
        with pytest.raises(ToolError, match=f"`{construct}`") as refused:
            await service.set_proof(sid, body)
        assert refused.value.code == "rejected"
    assert (await service.get_proof_state(sid)).version == opened.version  # nothing went to Lean
    tried = await service.try_proofs(sid, ['\n  (include_str "x")', "\n  h"])
    assert tried.results[0].rejected is not None and "include_str" in tried.results[0].rejected
    assert tried.results[1].rejected is None
    # In a comment or a string it is no construct.
    plain = await service.set_proof(sid, '\n  -- include_str "x"\n  h')
    assert plain.version == opened.version + 1
