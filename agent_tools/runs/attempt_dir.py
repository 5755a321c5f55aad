"""One attempt's files: a fresh workspace for the agent, and the attempt's own directory.

``RUN_DIR/attempts/<task>/<k>[-retry]/`` holds

- ``workspace/`` — the agent's working directory (the only part of the run directory the agent
  may write, where the sandbox allows): a copy of the task file (its own name), the prompt
  (``PROMPT.md``), the MCP config (``mcp.json``), later ``Submission.lean`` (the final
  submission, written by the runner) and ``usage.json`` (optional, written by the agent);
- ``serve/`` — the run dir of the attempt's service, which the runner owns (its scratch dir,
  its ``submission-<pid>.json``: the last accepted body, rewritten on every edit);
- ``ledger.jsonl`` — the attempt's ledger (one line per tool call, written by the runner's
  service; appended to the run's ``RUN_DIR/ledger.jsonl`` when the attempt ends);
- ``agent.log`` — the agent's stdout and stderr (capped);
- ``home/`` — the agent's fresh home (``HOME`` and the XDG directories inside it), empty or a
  copy of ``--agent-home``: the user's own home is read-only to agents, and nothing carries
  over from one attempt to the next.

The MCP config is self-contained (MCP clients start the server with only the config's ``env``)
and uses absolute paths only. Its command is the stdio↔socket relay (relay.py) to the
attempt's socket, which lives in a short runner-owned directory (a Unix socket's path has at
most 107 bytes) outside the run directory.
"""

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
# Inherited by every process of one attempt (the agent, its relay, whatever it starts): how the
# runner finds them all when it ends the attempt, whatever session or parent they ended up in.
ATTEMPT_TOKEN_VAR: Final = "LEANRIG_ATTEMPT_TOKEN"
RELAY_SCRIPT: Final = Path(__file__).resolve().with_name("relay.py")


# Where programs keep configuration, credentials and caches: all point into the attempt's
# fresh home (a harness preset adds its own, there too).
HOME_VARS: Final = ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
                    "XDG_STATE_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR")  # fmt: skip


def home_env(home: Path) -> dict[str, str]:
    """``HOME`` and the XDG base directories, inside ``home``."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
    }


def relay_command(socket: Path) -> list[str]:
    """The MCP server command of an attempt: this interpreter running relay.py in isolated
    mode without site (standard library only: a fast start) against ``socket``."""
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
    """``--agent`` split into words (shlex), each word's ``{prompt}``, ``{task}``,
    ``{workspace}``, ``{mcp_config}`` and ``{home}`` replaced (other braces are left alone)."""
    values = workspace.placeholders()
    out = []
    for word in command:
        for key, value in values.items():
            word = word.replace("{" + key + "}", value)
        out.append(word)
    return out


# The library-access (LAD) condition's tools, named in its prompt: the MCP server's own
# instructions say the same, but not every agent shows a server's instructions to its model.
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
    """The attempt's prompt, per the task's kind: prove the theorem, state the claim, or
    both."""
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
    """A fresh attempt directory (an old one of the same name is removed first) whose MCP
    config relays to ``socket`` (bound by the runner); ``library``: the LAD condition, whose
    prompt names the library tools; ``home_from``: copied into the agent's fresh home (links
    kept as links)."""
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
        task=task, attempt=attempt, root=root, workspace=workspace, task_file=task_file,
        prompt=prompt, mcp_config=mcp_config, submission=workspace / SUBMISSION_FILE,
        serve_dir=serve_dir, ledger=ledger, log=root / "agent.log", token=token,
        socket=socket, home=home,
    )  # fmt: skip


def statement_prompt(suite: Suite, task: Task, task_file: Path, library: bool = False) -> str:
    """The prompt of a statement task (``statement``, ``statement_and_proof``): the claim in
    words, and how to write its statement (the reference is never in it)."""
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
