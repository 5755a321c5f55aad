"""The early barrier (``ServerCommand.early_barrier``): a step on a direct worker ends when
Lean's reporter has published the version's last diagnostics, before Lean answers
``waitForDiagnostics``. Property, against the real Lean: over many varied edits it never ends a
step early with diagnostics Lean's own barrier would not report, and it does end most steps."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lsp_bridge import DocQuery, DocumentReport, LeanClient, LspPos, ServerCommand, Timeouts
from lsp_bridge.client import _Document

from .lean_snippets import decls, slow_theorem
from .test_direct_workers import BODIES, HEAD, TAIL

pytestmark = pytest.mark.anyio

TIMEOUTS = Timeouts(barrier=60, request=60)

# Bodies besides test_direct_workers' (a proof, a mismatch, one argument short, an unknown
# name, a parse error): several errors, a comment, a `sorry`-free hole, unicode, a body that
# ends the declaration and starts another.
MORE_BODIES = [
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h -- done ✓",
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₂) (φ x)) (@Eq.refl β (φ a₂)) a₂ h",
    "_",
    "@Eq.rec α a₁ (fun x _ => @Eq β (φ a₁) (φ x)) (@Eq.refl β (φ a₁)) a₂ h\n\ntheorem τ : N := N.z",
    "/- a comment first -/ @Eq.refl β (φ a₁)",
]


def variant(rng: random.Random) -> str:
    """A task-like file: sometimes a prefix of definitions (elaborated after the header, so
    the reporter waits for it), sometimes a slow declaration before or after the theorem."""
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
                # Lean's own barrier for the same version, asked after the step ended.
                own = await client.wait_for(uri, report.version)
                assert own.status == report.status == "done"
                assert diagnostics(report) == diagnostics(own), text
                steps += 1
        assert client.early_barrier_faults == 0
        # Not vacuous: the first version of each document (its worker's didOpen) and the
        # header changes wait for Lean's barrier; the rest end early.
        assert client.early_barrier_ends >= steps // 2, (client.early_barrier_ends, steps)


async def test_diagnostics_after_an_early_end_turn_the_early_barrier_off(
    server_command: ServerCommand, project: Path
) -> None:
    """Should a Lean not follow the rule (a later reporter, another toolchain), the first
    version whose diagnostics come after its step ended turns the early barrier off for the
    client: counted, logged, and every later step waits for Lean's own barrier."""
    command = replace(server_command, direct_workers=True)
    async with LeanClient.start(command, timeouts=TIMEOUTS) as client:
        uri = (project / "A.lean").as_uri()
        await client.update(uri, HEAD + BODIES[0] + TAIL)
        await client.update(uri, HEAD + BODIES[1] + TAIL)
        assert client.early_barrier_ends == 1
        # Lean's reporter as a Lean that broke the rule would behave: the version reported
        # done with its diagnostics out, and then more diagnostics of the same version.
        doc: _Document = client._docs[uri]
        version = doc.version
        params: dict[str, Any] = {"uri": uri, "version": version, "diagnostics": []}
        client._on_notification("textDocument/publishDiagnostics", params)
        assert client.early_barrier_faults == 1
        report, _ = await client.update(uri, HEAD + BODIES[2] + TAIL)
        assert report.status == "done" and report.diagnostics
        assert client.early_barrier_ends == 1  # that step waited for Lean's barrier
