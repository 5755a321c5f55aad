"""The early barrier (``ServerCommand.early_barrier``): a direct worker's step ends once Lean has
published the version's last diagnostics, and reports what Lean's own barrier would (real Lean,
varied edits); then the exchange's side, fed by hand."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from lsp_bridge import (
    DocQuery,
    DocumentReport,
    LeanClient,
    LspPos,
    RequestTimeout,
    ServerCommand,
    Timeouts,
)
from lsp_bridge.open_document import OpenDocument
from lsp_bridge.pending_requests import Conditional
from lsp_bridge.transport import LspTransport

from .lean_snippets import decls, slow_theorem
from .test_direct_workers import BODIES, HEAD, TAIL

pytestmark = pytest.mark.anyio

TIMEOUTS = Timeouts(barrier=60, request=60)

# Bodies besides test_direct_workers': several errors, a comment, a hole, unicode, a body that
# ends the declaration and starts another.
MORE_BODIES = [
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h -- done ✓",
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₂) (φ x)) (@Eq.refl β (φ a₂)) a₂ h",
    "_",
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h\n\ntheorem τ : N := N.z",
    "/- a comment first -/ @Eq.refl β (φ a₁)",
]


def variant(rng: random.Random) -> str:
    """A task-like file, sometimes with definitions or a slow declaration around the theorem."""
    body = rng.choice(BODIES + MORE_BODIES)
    head, tail = HEAD, TAIL
    cut = head.index("namespace")
    if rng.random() < 0.4:
        head = head[:cut] + decls(rng.choice((5, 40, 120))) + head[cut:]
    if rng.random() < 0.25:
        head = head[:cut] + slow_theorem("(add two (add two two))") + head[cut:]
    if rng.random() < 0.25:
        tail = "\n\n" + slow_theorem("(add two two)").replace("big", "big₂") + tail
    return head + body + tail


def diagnostics(report: DocumentReport) -> list[tuple[Any, ...]]:
    return [(d.severity, d.range, d.message) for d in report.diagnostics]


async def test_the_early_barrier_reports_what_leans_own_barrier_reports(
    server_command: ServerCommand, project: Path
) -> None:
    rng = random.Random(4_35)
    command = replace(server_command, direct_workers=True)
    steps = 0
    async with LeanClient.start(command, timeouts=TIMEOUTS) as client:
        assert client.direct
        for name in ("A", "B"):
            uri = (project / f"{name}.lean").as_uri()
            for _ in range(60):
                text = variant(rng)
                line = text[: text.index(":=\n  ") + 5].count("\n")
                queries = [
                    DocQuery.symbols(0),
                    DocQuery.plain_goal(LspPos(line, 2)).made_optional().made_unless_clean(),
                    DocQuery.plain_term_goal(LspPos(line, 2)).made_optional().made_unless_clean(),
                ]
                report, _ = await client.update(uri, text, queries)
                own = await client.wait_for(uri, report.version)
                assert own.status == report.status == "done"
                assert diagnostics(report) == diagnostics(own), text
                steps += 1
        assert client.early_barrier_faults == 0
        # Not vacuous: some steps ended early (how many depends on machine load).
        assert client.early_barrier_ends >= 1, (client.early_barrier_ends, steps)


async def test_diagnostics_after_an_early_end_turn_the_early_barrier_off(
    server_command: ServerCommand, project: Path
) -> None:
    """Diagnostics for a version after its step ended early: counted as a fault, and later
    steps wait for Lean's own barrier."""
    command = replace(server_command, direct_workers=True)
    async with LeanClient.start(command, timeouts=TIMEOUTS) as client:
        uri = (project / "A.lean").as_uri()
        await client.update(uri, HEAD + BODIES[0] + TAIL)
        # Not every step ends early: a loaded machine may reorder Lean's report and answer.
        for i in range(1, 41):
            await client.update(uri, HEAD + BODIES[i % 2] + TAIL)
            if client.early_barrier_ends:
                break
        ended = client.early_barrier_ends
        assert ended >= 1
        # More diagnostics of a version already reported done, as a rule-breaking Lean sends.
        doc: OpenDocument = client._docs[uri]
        version = doc.version
        params: dict[str, Any] = {"uri": uri, "version": version, "diagnostics": []}
        client._on_notification("textDocument/publishDiagnostics", params)
        assert client.early_barrier_faults == 1
        report, _ = await client.update(uri, HEAD + BODIES[2] + TAIL)
        assert report.status == "done" and report.diagnostics
        assert client.early_barrier_ends == ended


# The exchange's side: a transport fed by hand, so the test chooses the order of messages.


class _Stdin:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, data: bytes) -> None:
        self.sent.append(data)


class _Process:
    pid = 0
    returncode = None

    def __init__(self) -> None:
        self.stdin = _Stdin()


def _hand_fed() -> tuple[LspTransport, _Process]:
    process = _Process()
    transport = LspTransport(process, ["lean"], lambda method, params: None, 1.0, "token")  # type: ignore[arg-type]
    return transport, process


async def test_an_exchange_ends_at_the_early_moment_when_its_goals_are_already_in() -> None:
    """Goals answered before the version's last diagnostics: the step ends on those
    diagnostics."""
    transport, _ = _hand_fed()
    final = False
    answers: list[Any] = []
    goals = Conditional([("$/lean/plainGoal", {}, None)], needed=lambda: True)

    async def step() -> None:
        answers.extend(
            await transport.exchange(
                [],
                [
                    ("textDocument/waitForDiagnostics", {}, None),
                    ("textDocument/documentSymbol", {}, None),
                ],
                timeout=5.0,
                conditional=goals,
                early=lambda: final,
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(step)
        await anyio.sleep(0.05)
        _barrier, symbols, goal = sorted(transport._pending)
        transport._dispatch({"jsonrpc": "2.0", "id": symbols, "result": []})
        transport._dispatch({"jsonrpc": "2.0", "id": goal, "result": {"goals": ["⊢ q ∧ p"]}})
        final = True  # the next notification is the version's last diagnostics
        transport._dispatch({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics"})
        with anyio.fail_after(1.0):
            while not answers:
                await anyio.sleep(0.005)
    assert answers == [None, [], {"goals": ["⊢ q ∧ p"]}]
    assert transport.pending_count == 0 and not transport._watchers


async def test_a_timeout_after_the_early_moment_names_the_query_that_did_not_answer() -> None:
    transport, process = _hand_fed()
    with pytest.raises(RequestTimeout) as caught:
        await transport.exchange(
            [],
            [
                ("textDocument/waitForDiagnostics", {}, None),
                ("textDocument/documentSymbol", {}, None),
            ],
            timeout=0.2,
            early=lambda: True,
        )
    assert "textDocument/documentSymbol" in str(caught.value)
    assert b"$/cancelRequest" in b"".join(process.stdin.sent)
    assert transport.pending_count == 0 and not transport._watchers


@pytest.mark.parametrize("needed", [True, False])
async def test_an_exchange_of_conditional_requests_only_waits_for_them_when_needed(
    needed: bool,
) -> None:
    transport, _ = _hand_fed()
    answers: list[Any] = []
    goals = Conditional([("$/lean/plainGoal", {}, None)], needed=lambda: needed)

    async def step() -> None:
        answers.extend(await transport.exchange([], [], timeout=5.0, conditional=goals))

    async with anyio.create_task_group() as tg:
        tg.start_soon(step)
        await anyio.sleep(0.05)
        assert bool(answers) is not needed  # needed: still waiting for the goal
        (goal,) = transport._pending or (None,)
        if goal is not None:
            transport._dispatch({"jsonrpc": "2.0", "id": goal, "result": {"goals": []}})
        with anyio.fail_after(1.0):
            while not answers:
                await anyio.sleep(0.005)
    expected: list[Any] = [{"goals": []}] if needed else [None]
    assert answers == expected
