"""Every tool, over every task of the suite imported from tests/fixtures/corpus and served with
LAD, returns an answer or a typed error, never an empty success."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from agent_tools.authoring import import_suite
from agent_tools.servers import ServeOptions, build_mcp, open_service
from agent_tools.sessions import LIBRARY_TOOLS, TOOLS, ProofService

pytestmark = pytest.mark.anyio

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus" / "core"
ERROR_CODES = (
    "rejected",
    "unknown_task",
    "unknown_session",
    "invalid_argument",
    "timeout",
    "busy",
    "lean_error",
    "lean_failure",
    "unavailable",
    "not_found",
)
# Only every VERDICT_EVERY-th task gets a verdict: each is a fresh sandboxed Lean.
VERDICT_EVERY = 8


def _nonempty(*keys: str) -> Callable[[dict[str, Any]], bool]:
    return lambda r: any(r.get(k) not in (None, "", [], {}) for k in keys)


def _stepped(r: dict[str, Any]) -> bool:
    return r.get("status") in ("complete", "incomplete", "error") and (
        r["status"] == "complete" or bool(r.get("status_reason"))
    )


# What counts as an answer, per tool.
ANSWERS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "list_tasks": _nonempty("tasks"),
    "open_task": lambda r: bool(r.get("session_id")) and _stepped(r),
    "set_proof": _stepped,
    "replace_in_proof": _stepped,
    "get_proof_state": _stepped,
    "get_goals": lambda r: (
        r.get("goal_status") in ("complete", "no_goal")
        or bool(r.get("goals") or r.get("term_goal"))
    ),
    "get_hover": lambda r: r.get("found") is False or _nonempty("signature", "docstring")(r),
    "check_term": _nonempty("type", "errors"),
    "get_declaration": _nonempty("statement"),
    "get_outline": lambda r: isinstance(r.get("declarations"), list),
    "get_completions": _nonempty("completions"),
    "get_code_actions": lambda r: isinstance(r.get("actions"), list),
    "profile_proof": lambda r: bool(r),
    "try_proofs": lambda r: (
        bool(r.get("results"))
        and all(
            c.get("error") or c.get("rejected") or c["status"] != "not_checked"
            for c in r["results"]
        )
    ),
    "check_proof": lambda r: (
        isinstance(r.get("accepted"), bool) and (r["accepted"] or bool(r.get("reasons")))
    ),
    "get_timings": lambda r: bool(r),
    # On proof tasks these get a typed `rejected` error (statement tasks: elsewhere).
    "set_statement": lambda r: r.get("status") in ("elaborated", "error", "not_checked"),
    "check_statement": lambda r: isinstance(r.get("valid"), bool),
    "close_session": lambda r: bool(r),
    "server_status": lambda r: bool(r),
    "search_library": _nonempty("hits", "results"),
    "read_library": _nonempty("source"),
}


@pytest.fixture(scope="module")
def corpus_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("corpus")
    shutil.copytree(CORPUS, work / "core")
    suite = work / "suite"
    imported = import_suite([work / "core"], suite)
    assert imported.skipped == [] and len(imported.tasks) == 22
    # The LAD library, which no task imports: the corpus library under another namespace.
    library = (CORPUS / "Core" / "Library.lean").read_text(encoding="utf-8")
    lad = re.sub(r"^(namespace|end) Core\.", r"\1 Lad.", library, flags=re.MULTILINE)
    (suite / "Lad").mkdir()
    (suite / "Lad" / "Records.lean").write_text(lad, encoding="utf-8")
    toml = suite / "suite.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8") + '\n[lad]\nlibrary = ["Lad/Records.lean"]\n',
        encoding="utf-8",
    )
    return suite


@pytest.fixture
async def service(corpus_suite: Path, tmp_path: Path) -> AsyncIterator[ProofService]:
    options = ServeOptions(
        suite=corpus_suite, run_dir=tmp_path / "runs", condition="lad", sandbox=False
    )
    async with open_service(options) as service:
        yield service


def answered(tool: str, result: Any) -> str | None:
    """Why ``result`` is neither an answer nor a typed error (None: it is one of them)."""
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        code = re.match(r"\[(\w+)\] \S", text)
        return None if code and code[1] in ERROR_CODES else f"untyped error: {text[:200]}"
    content = result.structured_content
    if not isinstance(content, dict):
        return f"no structured answer: {result.content!r:.200}"
    return None if ANSWERS[tool](content) else f"an empty answer: {content!r:.300}"


async def test_every_tool_answers_or_fails_typed_on_every_corpus_task(
    service: ProofService,
) -> None:
    served = {t.name for t in [*TOOLS, *LIBRARY_TOOLS]}
    assert served == set(ANSWERS)
    problems: list[str] = []
    called: set[str] = set()
    async with Client(build_mcp(service, client="corpus")) as client:

        async def ask(tool: str, **args: Any) -> dict[str, Any]:
            called.add(tool)
            result = await client.call_tool(tool, args)
            why = answered(tool, result)
            if why is not None:
                problems.append(f"{task}: {tool}({args}): {why}")
            content = result.structured_content
            return content if isinstance(content, dict) and not result.is_error else {}

        task = "-"
        listed = await ask("list_tasks")
        tasks = [t["id"] for t in listed["tasks"]]
        assert len(tasks) == 22
        await ask("server_status")
        await ask("search_library", query="swap", limit=3)
        await ask("read_library", name="Lad.Geometry.Vec1.Vec.swap_swap")
        for i, task in enumerate(tasks):
            opened = await ask("open_task", task_id=task)
            sid = opened["session_id"]
            at = opened["body_range"]["start"]
            line, column = at["line"], at["column"]
            await ask("get_goals", session_id=sid, line=line, column=column)
            await ask("get_hover", session_id=sid, line=line, column=column + 1)
            await ask("check_term", session_id=sid, term="rfl", in_context=True)
            await ask("check_term", session_id=sid, term="@Eq.symm", in_context=False)
            await ask("get_declaration", session_id=sid, name="Eq.symm")
            await ask("get_outline", session_id=sid)
            await ask("get_completions", session_id=sid, prefix="Eq.")
            await ask("get_code_actions", session_id=sid, line=line, column=column)
            await ask("try_proofs", session_id=sid, bodies=[" rfl", " Eq.refl _"])
            await ask("set_proof", session_id=sid, body=" rfl")
            await ask("replace_in_proof", session_id=sid, old="rfl", new="(rfl)")
            await ask("get_proof_state", session_id=sid)
            await ask("profile_proof", session_id=sid)
            if i % VERDICT_EVERY == 0:
                await ask("check_proof", session_id=sid)
                await ask("set_statement", session_id=sid, statement=" : True")
                await ask("check_statement", session_id=sid)
            await ask("get_timings", session_id=sid)
            await ask("close_session", session_id=sid)
    assert called == served
    assert problems == [], "\n".join(problems)
