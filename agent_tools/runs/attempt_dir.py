"""One attempt's directory ``RUN_DIR/attempts/<task>/<k>[-retry]/`` (layout: docs/runs.md)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson

from ..tasks import Suite, Task, writes_statement

PROMPT_FILE: Final = "PROMPT.md"
MCP_CONFIG_FILE: Final = "mcp.json"
SUBMISSION_FILE: Final = "Submission.lean"
SERVER_NAME: Final = "leanrig"
SOCKET_FILE: Final = "mcp.sock"
ATTEMPT_TOKEN_VAR: Final = "LEANRIG_ATTEMPT_TOKEN"  # inherited by all of an attempt's processes
RELAY_SCRIPT: Final = Path(__file__).resolve().with_name("relay.py")


# Where programs keep configuration, credentials and caches: all point into the fresh home.
HOME_VARS: Final = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
)


def home_env(home: Path) -> dict[str, str]:
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
    }


def relay_command(socket: Path) -> list[str]:
    """The attempt's MCP server command: relay.py to ``socket``, without site for a fast start."""
    return [str(Path(sys.executable).absolute()), "-I", "-S", str(RELAY_SCRIPT), str(socket)]


@dataclass(frozen=True, slots=True)
class AttemptDir:
    task: Task
    attempt: int
    root: Path  # RUN_DIR/attempts/<task>/<k>
    workspace: Path
    task_file: Path
    prompt: Path
    mcp_config: Path
    submission: Path
    serve_dir: Path
    ledger: Path
    log: Path
    token: str
    socket: Path  # the attempt's MCP socket (in a runner-owned directory)
    home: Path  # the agent's fresh home

    def placeholders(self) -> dict[str, str]:
        return {
            "prompt": str(self.prompt),
            "task": self.task.id,
            "workspace": str(self.workspace),
            "mcp_config": str(self.mcp_config),
            "home": str(self.home),
        }

    def agent_env(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with the attempt's variables and its fresh home in place of the user's."""
        env = {k: v for k, v in base.items() if k not in HOME_VARS}
        env.update(home_env(self.home))
        env.update(
            LEANRIG_TASK=self.task.id,
            LEANRIG_WORKSPACE=str(self.workspace),
            LEANRIG_MCP_CONFIG=str(self.mcp_config),
            LEANRIG_PROMPT=str(self.prompt),
        )
        env[ATTEMPT_TOKEN_VAR] = self.token
        return env

    def submission_records(self) -> list[Path]:
        return sorted(self.serve_dir.glob("submission-*.json"))


def agent_argv(command: Sequence[str], workspace: AttemptDir) -> list[str]:
    """``--agent``'s words with the attempt's ``{placeholders}`` replaced; other braces kept."""
    values = workspace.placeholders()
    out = []
    for word in command:
        for key, value in values.items():
            word = word.replace("{" + key + "}", value)
        out.append(word)
    return out


# Named in the prompt too: not every agent shows a server's instructions to its model.
LIBRARY_PROMPT = """
A verified library of Lean lemmas is available through `search_library` (by name or words of
a statement) and `read_library` (a lemma's full source). The task file does not import it:
adapt a lemma's proof into your body rather than naming the lemma.
"""


def _lean_here(suite: Suite) -> str:
    if suite.spec.lean == "prelude":
        return "prelude-only (no Init library, no tactics): write explicit terms"
    return "Lean 4 with the suite's libraries"


def prompt_text(suite: Suite, task: Task, task_file: Path, library: bool = False) -> str:
    """The attempt's prompt, per the task's kind: prove the theorem, state the claim, or both."""
    if writes_statement(task.kind):
        return statement_prompt(suite, task, task_file, library)
    s = task.spec
    return f"""# Prove `{s.theorem}` (task `{s.id}` of suite `{suite.name}`)

{s.title}

Complete the proof of the theorem `{s.theorem}` in the Lean file below (a copy is at
`{task_file}`). Only the proof body — the text after the `:=` that ends the theorem's
signature — may change; every other byte of the file is fixed.

Work through the `{SERVER_NAME}` MCP server's tools: `open_task` with `task_id = "{s.id}"`,
then `set_proof` / `replace_in_proof` to change the body (each returns Lean's diagnostics and
goals), `get_goals`, `try_proofs` to test several bodies at once, and `check_proof` for the
verdict. Ask without editing: `check_term` (a term's type), `get_declaration`, `get_hover`,
`get_completions`, `get_outline`, `get_code_actions`, `profile_proof`. Editing the file on
disk has no effect.
{LIBRARY_PROMPT if library else ""}
**Your submission is the last body you set** (in any session). When you stop — or when the
time limit stops you — that body gets an independent check. Lean here is
{
        "prelude-only (no Init library, no tactics): write explicit terms"
        if suite.spec.lean == "prelude"
        else "Lean 4 with the suite's libraries"
    }.

```lean
{task.text.rstrip()}
```
"""


def create_attempt_dir(
    run_dir: Path,
    suite: Suite,
    task: Task,
    attempt: int,
    *,
    token: str,
    socket: Path,
    retry: bool = False,
    library: bool = False,
    home_from: Path | None = None,
) -> AttemptDir:
    """A fresh attempt directory (replacing any old one) whose MCP config relays to ``socket``."""
    run_dir = run_dir.resolve()
    root = run_dir / "attempts" / task.id / (f"{attempt}-retry" if retry else str(attempt))
    if root.exists():
        shutil.rmtree(root)
    workspace = root / "workspace"
    serve_dir = root / "serve"
    workspace.mkdir(parents=True)
    serve_dir.mkdir()
    home = root / "home"
    if home_from is not None:
        shutil.copytree(home_from, home, symlinks=True)
    home.mkdir(exist_ok=True)
    task_file = workspace / task.path.name
    task_file.write_text(task.text, encoding="utf-8")
    prompt = workspace / PROMPT_FILE
    prompt.write_text(prompt_text(suite, task, task_file, library), encoding="utf-8")
    ledger = root / "ledger.jsonl"
    command = relay_command(socket)
    config = {
        "mcpServers": {
            SERVER_NAME: {
                "command": command[0],
                "args": command[1:],
                "env": {ATTEMPT_TOKEN_VAR: token},
                "cwd": str(workspace),
            }
        }
    }
    mcp_config = workspace / MCP_CONFIG_FILE
    mcp_config.write_bytes(orjson.dumps(config, option=orjson.OPT_INDENT_2))
    return AttemptDir(
        task=task,
        attempt=attempt,
        root=root,
        workspace=workspace,
        task_file=task_file,
        prompt=prompt,
        mcp_config=mcp_config,
        submission=workspace / SUBMISSION_FILE,
        serve_dir=serve_dir,
        ledger=ledger,
        log=root / "agent.log",
        token=token,
        socket=socket,
        home=home,
    )


def statement_prompt(suite: Suite, task: Task, task_file: Path, library: bool = False) -> str:
    """A statement task's prompt: the claim in words (never the reference statement)."""
    s = task.spec
    both = task.kind == "statement_and_proof"
    goal = "State and prove" if both else "State"
    proof = (
        "Then prove it: `set_proof` / `replace_in_proof` change the proof body (the text after "
        "`:=`), `check_proof` gives the proof's verdict.\n"
        if both
        else "The proof body stays as it is: only the statement is graded.\n"
    )
    return f"""# {goal} the claim of task `{s.id}` (suite `{suite.name}`)

{s.title}

**The claim:** {task.claim}

Write the statement of the theorem `{s.theorem}` in the Lean file below (a copy is at
`{task_file}`) so that it says exactly the claim: replace its binders and type — the text
between the theorem's name and `:=` (now `{task.statement.strip()}`) — using the definitions the
file and its imports give. Only the statement may change: no new declarations.

Work through the `{SERVER_NAME}` MCP server's tools: `open_task` with `task_id = "{s.id}"`,
then `set_statement` (returns Lean's diagnostics and the statement as Lean elaborated it) and
`check_statement` (the final check: it elaborates, no sorry, allowed axioms; it does not say
whether the statement matches the claim). Ask without editing: `get_declaration`,
`get_outline`, `check_term`, `get_hover`, `get_completions`. {proof}
{LIBRARY_PROMPT if library else ""}
**Your submission is the last statement you set** (in any session). After the attempt it is
graded by proving it equivalent to a reference statement of the claim, in both directions, in
Lean. Lean here is {_lean_here(suite)}.

```lean
{task.text.rstrip()}
```
"""
