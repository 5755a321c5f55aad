"""Headless Neovim's built-in LSP client, driven by a Lua script, against `leanrig lsp` started
through the workspace's `lean --server` shim."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import orjson
import psutil
import pytest

from agent_tools.editor import EditOptions, prepare_workspace

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "lean_project" / "suites" / "demo"
NVIM = shutil.which("nvim")

LUA = r"""
local cmd = vim.fn.json_decode(os.getenv('LEANRIG_CMD'))
local file = os.getenv('LEANRIG_FILE')
local out = os.getenv('LEANRIG_OUT')
local report = { steps = {} }

local function finish(code)
  local fh = io.open(out, 'w')
  fh:write(vim.fn.json_encode(report))
  fh:close()
  vim.cmd(code == 0 and 'qa!' or 'cquit! ' .. code)
end

local function step(name, ok, detail)
  table.insert(report.steps, { name = name, ok = ok and true or false, detail = detail })
  if not ok then
    report.failed = name
    finish(1)
  end
end

local function wait(ms, cond) return vim.wait(ms, cond, 20) end

vim.cmd('edit ' .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
local uri = vim.uri_from_bufnr(buf)
local id = vim.lsp.start_client({
  name = 'leanls', cmd = cmd, root_dir = vim.fn.fnamemodify(file, ':h'),
  init_options = { editDelay = 10, hasWidgets = true },
  flags = { debounce_text_changes = 0 },
})
step('client started', id ~= nil)
vim.lsp.buf_attach_client(buf, id)
local client = vim.lsp.get_client_by_id(id)

local function diags(severity)
  return vim.diagnostic.get(buf, severity and { severity = severity } or nil)
end
local function leanrig_diags()
  local found = {}
  for _, d in ipairs(diags()) do
    if d.source == 'leanrig' then table.insert(found, d) end
  end
  return found
end
local function line_of(pattern)
  for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if l:find(pattern, 1, true) then return i - 1 end
  end
end

-- 1. open: Lean reports the sorry of the initial body.
step('initial diagnostics', wait(60000, function() return #diags() > 0 end))
step('initialize advertised checkProof', vim.tbl_contains(
  client.server_capabilities.executeCommandProvider.commands, 'leanrig.checkProof'))

-- 2. a wrong proof: an error diagnostic.
local body = line_of('sorryAx')
vim.api.nvim_buf_set_lines(buf, body, body + 1, false, { '  @Eq.refl N (N.s N.z)' })
step('wrong proof → error', wait(60000, function()
  return #diags(vim.diagnostic.severity.ERROR) > 0
end))

-- 3. goals at the body.
local params = { textDocument = { uri = uri }, position = { line = body, character = 4 } }
local plain, perr = client.request_sync('$/lean/plainGoal', params, 20000, buf)
step('$/lean/plainGoal answered', plain ~= nil and plain.err == nil, perr)
local term = client.request_sync('$/lean/plainTermGoal', params, 20000, buf)
step('$/lean/plainTermGoal shows the goal',
  term ~= nil and term.result ~= nil and term.result.goal:find('Eq', 1, true) ~= nil)

-- 4. typing outside the body: restored, with the scoping diagnostic.
local ns = line_of('namespace')
local original = vim.api.nvim_buf_get_lines(buf, ns, ns + 1, false)[1]
vim.api.nvim_buf_set_lines(buf, ns, ns + 1, false, { original .. 'X' })
step('outside edit reverted', wait(30000, function()
  return vim.api.nvim_buf_get_lines(buf, ns, ns + 1, false)[1] == original
end))
step('scoping diagnostic', wait(30000, function() return #leanrig_diags() > 0 end),
  vim.inspect(diags()))

-- 5. the right proof: no errors, notice gone.
vim.api.nvim_buf_set_lines(buf, body, body + 1, false, { '  @Eq.refl N N.z' })
step('right proof → no errors', wait(60000, function()
  return #diags(vim.diagnostic.severity.ERROR) == 0 and #leanrig_diags() == 0
end), vim.inspect(diags()))

-- 6. the verdict.
local verdict = client.request_sync('workspace/executeCommand',
  { command = 'leanrig.checkProof', arguments = { uri } }, 120000, buf)
step('checkProof accepted', verdict ~= nil and verdict.result ~= nil
  and verdict.result.accepted == true, vim.inspect(verdict))
report.verdict = verdict.result
client.stop()
wait(10000, function() return client.is_stopped() end)
finish(0)
"""


@pytest.mark.skipif(
    NVIM is None,
    reason="nvim is not installed (make setup installs Debian's neovim where apt-get works)",
)
def test_headless_neovim_proves_a_task_through_leanrig_lsp(tmp_path: Path) -> None:
    assert NVIM is not None
    ws = prepare_workspace(
        EditOptions(suite=SUITE, task="refl_z", workspace=tmp_path / "ws", run_dir=tmp_path / "run")
    )
    script = tmp_path / "drive.lua"
    script.write_text(LUA, encoding="utf-8")
    out = tmp_path / "nvim.json"
    env = {
        **os.environ,
        "LEANRIG_CMD": json.dumps([str(ws.shim_dir / "lean"), "--server"]),
        "LEANRIG_FILE": str(ws.task_file),
        "LEANRIG_OUT": str(out),
        "XDG_STATE_HOME": str(tmp_path / "state"),  # nvim's LSP log stays in the test dir
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-n", "-c", f"luafile {script}"],
        env=env,
        cwd=ws.root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.exists(), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    report = orjson.loads(out.read_bytes())
    assert report.get("failed") is None, report
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["verdict"]["accepted"] is True
    results = [
        orjson.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_bytes().splitlines()
    ]
    assert [r["accepted"] for r in results] == [True]
    assert results[0]["condition"] == "human"
    ledger = [
        orjson.loads(x) for x in (tmp_path / "run" / "ledger.jsonl").read_bytes().splitlines()
    ]
    tools = {e["tool"] for e in ledger}
    assert {"open_task", "edit", "check_proof"} <= tools
    assert any(e["tool"] == "edit" and e["outcome"] == "rejected" for e in ledger)
    (closing,) = [e for e in ledger if e["tool"] == "close_session"]
    assert closing["edit_delay_ms"] == 10  # lean.nvim's editDelay, recorded


# docs/human-baselines.md's Neovim steps: a proof typed in the body, then the verdict command.
AS_DOCUMENTED = r"""
local proof = os.getenv('LEANRIG_PROOF')
local results = os.getenv('LEANRIG_RESULTS')
local out = io.open(os.getenv('LEANRIG_OUT'), 'w')
local function note(k, v) out:write(k .. '=' .. tostring(v) .. '\n') end
local buf = vim.api.nvim_get_current_buf()
note('filetype', vim.bo.filetype)
note('diagnostics', vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 20))
note('clients', #vim.lsp.buf_get_clients(buf))
for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  if l:find('sorryAx', 1, true) then
    vim.api.nvim_buf_set_lines(buf, i - 1, i, false, { '  ' .. proof })
  end
end
note('no errors', vim.wait(60000, function()
  return #vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR }) == 0
end, 20))
vim.lsp.buf.execute_command({ command = 'leanrig.checkProof' })
note('verdict', vim.wait(120000, function()
  local fh = io.open(results, 'r')
  if not fh then return false end
  local text = fh:read('*a')
  fh:close()
  return text:find('"accepted":true', 1, true) ~= nil
end, 50))
out:close()
vim.cmd('qa!')
"""


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed")
def test_neovim_as_the_human_baselines_page_says(tmp_path: Path) -> None:
    """`leanrig edit`, then Neovim without lean.nvim as documented: the typed proof is accepted
    by `leanrig.checkProof`."""
    from .test_as_typed import DEMO, SUITE, leanrig, sandbox_or_skip

    sandbox_or_skip()
    assert NVIM is not None
    shutil.copytree(DEMO, tmp_path / SUITE)
    done = leanrig(
        "edit",
        "--suite",
        SUITE,
        "--task",
        "and_swap",
        "--workspace",
        "attempt-and_swap",
        "--run-dir",
        "runs/human",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    driver = tmp_path / "driver.lua"
    driver.write_text(AS_DOCUMENTED, encoding="utf-8")
    out = tmp_path / "nvim.out"
    proof = json.loads((ROOT / "tests" / "demo_reference_proofs.json").read_text())["and_swap"]
    env = {
        **os.environ,
        "LEANRIG_PROOF": proof,
        "LEANRIG_RESULTS": str(tmp_path / "runs" / "human" / "results.jsonl"),
        "LEANRIG_OUT": str(out),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    proc = subprocess.run(
        [
            NVIM,
            "--headless",
            "--clean",
            "-n",
            "--cmd",
            "luafile attempt-and_swap/.leanrig/nvim.lua",
            "attempt-and_swap/Demo/AndSwap.lean",
            "-c",
            f"luafile {driver}",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.exists(), (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    seen = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert seen == {
        "filetype": "lean",
        "diagnostics": "true",
        "clients": "1",
        "no errors": "true",
        "verdict": "true",
    }, seen


# Up to a wrong proof Lean has checked; then the editor says it is ready and waits to be killed.
UNTIL_KILLED = r"""
local out = io.open(os.getenv('LEANRIG_OUT'), 'w')
local buf = vim.api.nvim_get_current_buf()
local function note(k, v) out:write(k .. '=' .. tostring(v) .. '\n'); out:flush() end
note('diagnostics', vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 20))
for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
  if l:find('sorryAx', 1, true) then
    vim.api.nvim_buf_set_lines(buf, i - 1, i, false, { '  ' .. os.getenv('LEANRIG_WRONG') })
  end
end
note('errors', vim.wait(60000, function()
  return #vim.diagnostic.get(buf, { severity = vim.diagnostic.severity.ERROR }) > 0
end, 20))
note('ready', true)
vim.wait(120000, function() return false end, 100)
"""


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed")
@pytest.mark.parametrize("killed", ["server", "editor"])
def test_neovim_killed_or_its_server_killed_still_closes_the_attempt(
    tmp_path: Path, killed: str
) -> None:
    """Neovim's server process group, or Neovim itself, SIGKILLed after a wrong proof: the
    attempt is recorded as cut off with its closing verdict, and nothing of it is left."""
    from agent_tools.editor.human_attempt import body_sha

    from .test_human_attempts import closed_records, ended, kill_server, process_tree

    assert NVIM is not None
    run = tmp_path / "run"
    ws = prepare_workspace(
        EditOptions(suite=SUITE, task="and_swap", workspace=tmp_path / "ws", run_dir=run)
    )
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    for name in ("lean", "lake"):
        (fake / name).write_text(f'#!/bin/sh\necho "$0 $*" >> {tmp_path / "fake-ran"}\nexit 1\n')
        (fake / name).chmod(0o755)
    driver = tmp_path / "driver.lua"
    driver.write_text(UNTIL_KILLED, encoding="utf-8")
    out = tmp_path / "nvim.out"
    wrong = "And.intro h.1 h.2"
    env = {
        **os.environ,
        "LEANRIG_OUT": str(out),
        "LEANRIG_WRONG": wrong,
        "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}",
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    editor = subprocess.Popen(
        [
            NVIM,
            "--headless",
            "--clean",
            "-n",
            "--cmd",
            f"luafile {ws.files['neovim']}",
            str(ws.task_file),
            "-c",
            f"luafile {driver}",
        ],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while "ready=true" not in (out.read_text() if out.exists() else ""):
            assert editor.poll() is None and time.monotonic() < deadline, (
                out.read_text() if out.exists() else "no output"
            )
            time.sleep(0.05)
        seen = dict(line.split("=", 1) for line in out.read_text().splitlines())
        assert seen == {"diagnostics": "true", "errors": "true", "ready": "true"}, seen
        tree = process_tree(editor.pid)[1:]
        if killed == "server":
            (relay,) = [
                p
                for p in psutil.Process(editor.pid).children()
                if "agent_tools.editor" in " ".join(p.cmdline())
            ]
            kill_server(relay)
        else:
            editor.kill()
        results, ledger = closed_records(run, tree)
    finally:
        editor.kill()
        editor.wait(timeout=60)
    assert not (tmp_path / "fake-ran").exists()
    (line,) = results
    assert line["accepted"] is False and line["final_body_sha"] == body_sha("\n  " + wrong)
    assert line["reasons"] and line["reasons"] != ["no verdict"], line
    assert any("without `shutdown`" in note for note in line["notes"]), line["notes"]
    assert ended(ledger) == ["cut off"]
