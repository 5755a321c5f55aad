"""`leanrig edit`: a workspace a human opens in their editor, wired to `leanrig lsp`.

Writes the task file, ``lean``/``lake`` shims that start `leanrig lsp`, and VS Code, Neovim and
Emacs settings naming the shims. Must not start Lean or talk LSP."""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from lsp_bridge import LeanInstall, find_lean

from ..tasks import load_suite
from .emacs_config import CHECK_KEY, emacs_config, open_command
from .rundir import attempt_state, check_run_dir

SHIM_VAR = "LEANRIG_SHIM_DIR"


@dataclass(frozen=True, slots=True)
class EditOptions:
    suite: Path
    task: str
    workspace: Path | None = None  # None: ./leanrig-<task>
    run_dir: Path | None = None  # None: WORKSPACE/run
    time_limit: float | None = None
    sandbox: bool = True
    lean: str | None = None
    python: str = field(default_factory=lambda: sys.executable)


@dataclass(frozen=True, slots=True)
class EditWorkspace:
    root: Path
    task_file: Path
    shim_dir: Path
    run_dir: Path
    lsp_command: tuple[str, ...]
    files: dict[str, Path]  # what was written, by editor/purpose
    kept_task_file: bool = False

    def instructions(self) -> str:
        cmd = ", ".join(json.dumps(a) for a in self.lsp_command)
        return "\n".join(
            [
                f"workspace: {self.root}",
                f"task file: {self.task_file}"
                + (" (kept as it was: delete it to start over)" if self.kept_task_file else ""),
                f"results:   {self.run_dir / 'results.jsonl'} (ledger: ledger.jsonl beside it)",
                "",
                f"VS Code (vscode-lean4): code {_sh(self.root)}  (the folder, trusted: "
                f".vscode/settings.json puts {self.shim_dir} first on Lean's PATH)",
                "  Restart the server (Lean 4: Restart Server) if Lean was already running.",
                f"Neovim (lean.nvim, or the built-in client): nvim --cmd "
                f"{_sh('luafile ' + str(self.files['neovim']))} {_sh(self.task_file)}",
                f"  (or set the leanls cmd to: {{{cmd}}})",
                "Emacs (lsp-mode or eglot; lean4-mode optional): "
                + open_command(self.files["emacs"], self.task_file),
                f"  (M-x leanrig-check-proof, {CHECK_KEY}: the verdict)",
                "",
                "Edit only the proof body. The LSP command `leanrig.checkProof` runs the verdict "
                "(how to call it from each editor: docs/human-baselines.md); the attempt ends at "
                "the first accepted verdict or at the time limit. Closing the editor does not "
                "stop the clock: opening the task again resumes the same attempt.",
            ]
        )


def _sh(value: str | Path) -> str:
    return shlex.quote(str(value))


def _shim(kind: str, lsp: list[str], install: LeanInstall, shim_dir: Path) -> str:
    """A POSIX sh script: the server invocation runs leanrig; the rest behaves like ``kind``."""
    real_lean = _sh(install.lean)
    lsp_cmd = " ".join(_sh(a) for a in lsp)
    head = [
        "#!/bin/sh",
        f"# leanrig shim ({kind}): the editor's Lean server is `leanrig lsp` for one task.",
        f"export {SHIM_VAR}={_sh(shim_dir)}",
        f"export LEANRIG_LEAN={real_lean}",
    ]
    if kind == "lean":
        body = [
            'for arg in "$@"; do',
            f'  [ "$arg" = "--server" ] && exec {lsp_cmd}',
            "done",
            f'exec {real_lean} "$@"',
        ]
    else:
        real_lake = _sh(install.lake) if install.lake else ""
        line = f"Lake version 5.0.0-{install.githash[:7]} (Lean version {install.version})"
        version = f'exec {real_lake} "$@"' if real_lake else f"echo {_sh(line)}; exit 0"
        body = [
            'case "$1" in',
            f"  serve) exec {lsp_cmd} ;;",
            f"  --version) {version} ;;",
            "esac",
            f'exec {real_lake} "$@"'
            if real_lake
            else 'echo "lake is not available in this leanrig workspace" >&2; exit 1',
        ]
    return "\n".join([*head, *body]) + "\n"


def shim_dir(root: Path) -> Path:
    return root / ".leanrig" / "bin"


def prepare_workspace(options: EditOptions) -> EditWorkspace:
    """Write the workspace for one human attempt; returns where everything is."""
    suite = load_suite(options.suite)
    task = suite.task(options.task)
    install = find_lean(suite.root, explicit=options.lean)
    root = (options.workspace or Path(f"leanrig-{task.id}")).resolve()
    run_dir = (options.run_dir or root / "run").resolve()
    check_run_dir(run_dir, suite, options.time_limit)  # before anything is written
    attempt_state(run_dir, task, options.time_limit)  # refuses an attempt that is over
    task_path = (root / task.spec.file).resolve()
    task_path.parent.mkdir(parents=True, exist_ok=True)
    kept = task_path.exists()  # the human's proof so far
    if not kept:
        task_path.write_text(task.text, encoding="utf-8")
    hidden = root / ".leanrig"
    shims = shim_dir(root)
    shims.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)

    lsp = [
        options.python,
        "-m",
        "agent_tools.editor",
        "lsp",
        "--suite",
        str(suite.root),
        "--task",
        task.id,
        "--workspace",
        str(root),
        "--run-dir",
        str(run_dir),
    ]
    if options.time_limit is not None:
        limit = options.time_limit
        # Exact: run.json compares it.
        lsp += ["--time-limit", str(int(limit)) if limit.is_integer() else repr(limit)]
    if not options.sandbox:
        lsp.append("--no-sandbox")
    lsp += ["--lean", str(install.lean)]
    files: dict[str, Path] = {}
    for kind in ("lean", "lake"):
        shim = shims / kind
        shim.write_text(_shim(kind, lsp, install, shims), encoding="utf-8")
        shim.chmod(0o755)
        files[f"shim_{kind}"] = shim

    vscode = root / ".vscode" / "settings.json"
    vscode.parent.mkdir(exist_ok=True)
    settings: dict[str, object] = {}
    if vscode.exists():
        try:
            loaded = json.loads(vscode.read_text(encoding="utf-8"))
            settings = loaded if isinstance(loaded, dict) else {}
        except json.JSONDecodeError:
            settings = {}
    settings["lean4.envPathExtensions"] = [str(shims)]
    vscode.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    files["vscode"] = vscode

    lua_cmd = ", ".join(json.dumps(a) for a in lsp)
    nvim = hidden / "nvim.lua"
    nvim.write_text(
        "\n".join(
            [
                "-- leanrig: point Neovim's Lean client at `leanrig lsp` for this task.",
                f"local cmd = {{{lua_cmd}}}",
                f"local root = {json.dumps(str(root))}",
                "-- Any `lean`/`lake` Neovim starts is the workspace's shim (leanrig's server).",
                f"vim.env.PATH = {json.dumps(str(shims) + os.pathsep)} .. (vim.env.PATH or '')",
                "local ok, lean = pcall(require, 'lean')",
                "if ok then",
                "  -- lean.nvim: its leanls client with our cmd",
                "  lean.setup({ mappings = true, lsp = { cmd = cmd } })",
                "elseif vim.lsp.config then",
                "  -- Neovim >= 0.11 without lean.nvim",
                "  vim.lsp.config('leanls',",
                "    { cmd = cmd, filetypes = { 'lean' }, root_dir = root })",
                "  vim.lsp.enable('leanls')",
                "else",
                "  -- Neovim 0.7-0.10: start the client for Lean buffers",
                "  vim.api.nvim_create_autocmd('FileType', {",
                "    pattern = 'lean',",
                "    callback = function()",
                "      local id = vim.lsp.start_client({",
                "        name = 'leanls', cmd = cmd, root_dir = root })",
                "      if id then vim.lsp.buf_attach_client(0, id) end",
                "    end,",
                "  })",
                "  vim.cmd('autocmd BufRead,BufNewFile *.lean setfiletype lean')",
                "end",
                "",
            ]
        ),
        encoding="utf-8",
    )
    files["neovim"] = nvim

    emacs = hidden / "emacs.el"
    emacs.write_text(
        emacs_config(root=root, shim_dir=shims, task_file=task_path, task_id=task.id),
        encoding="utf-8",
    )
    files["emacs"] = emacs
    dir_locals = root / ".dir-locals.el"
    rootdir = json.dumps(str(hidden))
    dir_locals.write_text(
        f";; leanrig: lean4-mode runs {hidden}/bin/lean (the leanrig shim); load "
        f"{emacs} to be sure of it\n"
        f"((lean4-mode . ((lean4-rootdir . {rootdir}))))\n",
        encoding="utf-8",
    )
    files["emacs_dir_locals"] = dir_locals
    (hidden / "edit.json").write_text(
        json.dumps(
            {
                "suite": str(suite.root),
                "task": task.id,
                "workspace": str(root),
                "run_dir": str(run_dir),
                "time_limit": options.time_limit,
                "lean": str(install.lean),
                "lsp_command": lsp,
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    return EditWorkspace(root, task_path, shims, run_dir, tuple(lsp), files, kept)
