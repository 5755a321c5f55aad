"""Statement tasks (autoformalization) in a `ProofService` against the real bootstrap Lean: the
claims suite loads with its kinds and hidden references; ``set_statement`` elaborates the
agent's statement in place and prints it as Lean does; ``check_statement`` is the final check
in fresh sandboxed Lean; proof tools refuse; nothing a session answers holds the reference."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import jsonschema  # type: ignore[import-untyped]
import pytest

from agent_tools.servers import ServeOptions, open_service
from agent_tools.sessions import TOOL_BY_NAME, ProofService, ToolError, output_schema
from agent_tools.tasks import SuiteError, load_suite, reference_statement

pytestmark = pytest.mark.anyio
CLAIMS = Path(__file__).resolve().parent.parent / "lean_project" / "suites" / "claims"
ADD_COMM = " (a b : N) : Eq (N.add b a) (N.add a b)"


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ProofService]:
    options = ServeOptions(suite=CLAIMS, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        yield service


@pytest.mark.unit
def test_the_claims_suite_loads_statement_tasks_with_claims() -> None:
    suite = load_suite(CLAIMS)
    assert len(suite.tasks) >= 10
    for task in suite.tasks.values():
        assert task.kind == "statement" and task.claim
        assert task.statement == " : True "
        reference = reference_statement(suite.reference_path(task).read_text(encoding="utf-8"))
        assert reference.strip() and reference not in task.text


@pytest.mark.unit
def test_a_reference_outside_the_hidden_paths_refuses_the_suite(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "claims"
    shutil.copytree(CLAIMS, root)
    manifest = root / "suite.toml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace('hidden = ["References"]', "hidden = []"),
        encoding="utf-8",
    )
    with pytest.raises(SuiteError, match="not in a `hidden` path"):
        load_suite(root)


@pytest.mark.unit
def test_a_statement_task_without_a_claim_refuses_the_suite(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "claims"
    shutil.copytree(CLAIMS, root)
    manifest = root / "suite.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace('claim = "Adding zero to a natural number', 'title2 = "x'), encoding="utf-8"
    )
    with pytest.raises(SuiteError):
        load_suite(root)


@pytest.mark.unit
def test_restating_a_task_keeps_its_body_and_shifts_its_spans() -> None:
    task = load_suite(CLAIMS).task("add_comm")
    restated = task.restated(ADD_COMM)
    assert restated.statement == ADD_COMM and restated.body == task.body
    assert restated.text == task.with_statement(ADD_COMM)
    assert restated.key != task.key and task.restated(task.statement) is task
    view = task.statement_view()
    assert view.with_body(ADD_COMM) == restated.text


@pytest.mark.lean
async def test_set_statement_elaborates_and_prints_the_statement(service: ProofService) -> None:
    listed = await service.list_tasks()
    kinds = {t.id: (t.kind, t.claim) for t in listed.tasks}
    assert kinds["add_comm"][0] == "statement" and "commutative" in kinds["add_comm"][1]
    opened = await service.open_task("add_comm")
    assert opened.kind == "statement" and opened.statement == " : True "
    # The placeholder body's goal is not the agent's: the state points at set_statement.
    assert opened.goals == [] and opened.status == "incomplete" and not opened.complete
    assert opened.status_reason is not None and "set_statement" in opened.status_reason
    sid = opened.session_id
    result = await service.set_statement(sid, ADD_COMM)
    jsonschema.Draft202012Validator(output_schema(TOOL_BY_NAME["set_statement"])).validate(
        result.model_dump(mode="json")
    )
    assert result.status == "elaborated" and result.version == 2
    assert result.statement == "∀ (a b : N), Eq (b.add a) (a.add b)"
    assert result.diagnostics == []  # (not the placeholder body's sorry)
    assert ADD_COMM in (await service.get_proof_state(sid)).text
    bad = await service.set_statement(sid, " (a : N) : Eq a c d")
    assert bad.status == "error" and bad.statement is None and bad.diagnostics
    # Question tools see the session's statement: its binders are in scope.
    await service.set_statement(sid, ADD_COMM)
    term = await service.check_term(sid, "N.add a b", in_context=True)
    assert term.type == "N"


@pytest.mark.lean
async def test_a_statement_that_adds_a_declaration_is_rejected(service: ProofService) -> None:
    sid = (await service.open_task("add_comm")).session_id
    with pytest.raises(ToolError) as caught:
        await service.set_statement(sid, " : True :=\n  True.intro\n\ntheorem extra : True ")
    assert caught.value.code == "rejected"
    assert (await service.get_proof_state(sid)).version == 1


@pytest.mark.lean
async def test_check_statement_is_the_final_check_and_says_nothing_of_the_claim(
    service: ProofService,
) -> None:
    sid = (await service.open_task("add_comm")).session_id
    unchanged = await service.check_statement(sid)
    assert not unchanged.valid and "placeholder" in unchanged.reasons[0]
    await service.set_statement(sid, " (p : Prop) : And p p")  # wrong, but a valid statement
    wrong = await service.check_statement(sid)
    assert wrong.valid and wrong.reasons == [] and wrong.statement is not None
    jsonschema.Draft202012Validator(output_schema(TOOL_BY_NAME["check_statement"])).validate(
        wrong.model_dump(mode="json")
    )
    await service.set_statement(sid, " : sorryAx Prop Bool.false")
    sorry = await service.check_statement(sid)
    assert not sorry.valid and "sorryAx" in sorry.reasons[0]
    reference = reference_statement(
        load_suite(CLAIMS).reference_path(load_suite(CLAIMS).task("add_comm")).read_text()
    )
    dumped = json.dumps([unchanged.model_dump(), wrong.model_dump(), sorry.model_dump()])
    assert reference.strip() not in dumped


@pytest.mark.lean
async def test_proof_tools_refuse_a_statement_task(service: ProofService) -> None:
    sid = (await service.open_task("add_comm")).session_id
    for call in (service.set_proof(sid, "\n  True.intro"), service.check_proof(sid)):
        with pytest.raises(ToolError) as caught:
            await call
        assert caught.value.code == "rejected"


@pytest.mark.lean
async def test_a_statement_and_proof_session_proves_its_own_statement(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "claims"
    shutil.copytree(CLAIMS, root)
    manifest = root / "suite.toml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace('id = "and_comm"\nkind = "statement"', 'id = "and_comm"\nkind = '
                     '"statement_and_proof"'),
        encoding="utf-8",
    )  # fmt: skip
    options = ServeOptions(suite=root, run_dir=tmp_path / "runs", sandbox=False)
    async with open_service(options) as service:
        sid = (await service.open_task("and_comm")).session_id
        stated = await service.set_statement(sid, " (p q : Prop) (h : And p q) : And q p")
        assert stated.status == "elaborated"
        proved = await service.set_proof(sid, "\n  And.intro h.right h.left")
        assert proved.complete, proved
        verdict = await service.check_proof(sid)
        assert verdict.accepted, verdict.reasons
        # A new statement keeps the proof, which no longer fits it.
        await service.set_statement(sid, " (p q : Prop) (h : And p q) : And p q")
        assert not (await service.check_proof(sid)).accepted
        assert (await service.check_statement(sid)).valid


@pytest.mark.lean
async def test_the_statement_grader_refuses_a_statement_that_uses_sorry(tmp_path: Path) -> None:
    from agent_tools.tasks import library_dir
    from agent_tools.verdict import EquivalenceGrader, StatementGrader, Verifier
    from lsp_bridge import find_lean

    suite = load_suite(CLAIMS)
    install = find_lean()
    library = library_dir(suite, install)
    grader = StatementGrader(suite, Verifier(suite, install, library=library),
                             EquivalenceGrader(suite, install, library=library))  # fmt: skip
    task = suite.task("add_comm")
    graded = await grader.grade(task, " : sorryAx Prop Bool.false", 20.0)
    assert not graded.accepted and "sorryAx" in " ".join(graded.reasons), graded.reasons
    # An elaboration error is the statement check's to refuse (its parse stage), not BEq+'s.
    broken = await grader.grade(task, " (a : N) : Eq a (N.add a)", 20.0)
    assert not broken.accepted and broken.equivalence is None, broken
    assert "Lean reports 1 error(s)" in broken.reasons[0], broken.reasons
    right = await grader.grade(task, ADD_COMM, 20.0)
    assert right.accepted and right.equivalence is not None
