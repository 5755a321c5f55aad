"""README.md's and docs/cli.md's commands as a user types them: `.venv/bin/leanrig …` run from a
temporary directory holding the demo suite at `lean_project/suites/demo`, with default options
and the sandbox on (skipped, with the reason, where bwrap cannot run)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from subprocess import PIPE
from typing import Any

import anyio
import orjson
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from lsp_bridge import LeanClient, LeanInstall, ServerStartFailed, Timeouts
from repl_pool import SandboxPolicy, sandbox_tools, sandbox_wrapper

from .rpc_client import RpcError, RpcProcess, stop_process

ROOT = Path(__file__).resolve().parent.parent
LEANRIG = ROOT / ".venv" / "bin" / "leanrig"
DEMO = ROOT / "lean_project" / "suites" / "demo"
SUITE = "lean_project/suites/demo"  # as README types it, relative to the working directory
PROOF = "\n  " + json.loads((ROOT / "tests" / "demo_reference_proofs.json").read_text())["and_swap"]
DEADLINE = 120.0  # one command, end to end, on a loaded machine


def sandbox_or_skip() -> str:
    bwrap = sandbox_tools()["bwrap"]
    if bwrap is None:
        reason = (
            "bwrap is installed but cannot create namespaces here"
            if shutil.which("bwrap")
            else "bwrap is not installed"
        )
        pytest.skip(f"{reason}: these tests check the commands with the sandbox on")
    return bwrap


def leanrig_exe() -> Path:
    if not LEANRIG.exists():
        pytest.fail(f"{LEANRIG} is missing: run `make setup`")
    return LEANRIG


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """A user's working directory with the demo suite at its README path."""
    sandbox_or_skip()
    shutil.copytree(DEMO, tmp_path / SUITE)
    return tmp_path


def leanrig(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(leanrig_exe()), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )


def leanrig_each(*commands: tuple[str, ...], cwd: Path) -> list[subprocess.CompletedProcess[str]]:
    """Several independent commands run at once; their results in order."""
    argv = [[str(leanrig_exe()), *args] for args in commands]
    started = [subprocess.Popen(a, cwd=cwd, stdout=PIPE, stderr=PIPE, text=True) for a in argv]
    done = []
    try:
        for args, process in zip(commands, started, strict=True):
            out, err = process.communicate(timeout=DEADLINE)
            done.append(subprocess.CompletedProcess(list(args), process.returncode, out, err))
    finally:
        for process in started:
            process.kill()
            process.wait()
    return done


def ledgers(cwd: Path, run_dir: str = "runs") -> list[Path]:
    return sorted((cwd / run_dir).glob("*/ledger.jsonl"))


def ledger_tools(path: Path) -> list[str]:
    return [orjson.loads(line)["tool"] for line in path.read_text().splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def prove_over_mcp(client: Any) -> dict[str, Any]:
    """open_task → set_proof (the reference proof) → check_proof; the verdict."""

    async def call(tool: str, **args: Any) -> dict[str, Any]:
        with anyio.fail_after(DEADLINE):
            result = await client.call_tool(tool, args)
        text = " ".join(getattr(c, "text", "") for c in result.content)
        assert not result.is_error, f"{tool}: {text}"
        assert isinstance(result.structured_content, dict)
        return result.structured_content

    tools = await client.list_tools()
    assert {"open_task", "set_proof", "check_proof"} <= {t.name for t in tools.tools}
    sid = (await call("open_task", task_id="and_swap"))["session_id"]
    assert (await call("set_proof", session_id=sid, body=PROOF))["complete"] is True
    verdict = await call("check_proof", session_id=sid)
    await call("close_session", session_id=sid)
    return verdict


async def serve_mcp_stdio(cwd: Path, *args: str) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=str(leanrig_exe()),
        args=["serve", "--suite", SUITE, *args],
        cwd=str(cwd),
        env=dict(os.environ),  # a shell passes its environment on
    )
    with anyio.fail_after(DEADLINE * 2):
        async with Client(params) as client:
            return await prove_over_mcp(client)


@pytest.fixture(scope="module")
def mcp_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`leanrig serve --suite lean_project/suites/demo` as an MCP client starts it."""
    sandbox_or_skip()
    cwd = tmp_path_factory.mktemp("user")
    shutil.copytree(DEMO, cwd / SUITE)
    verdict = anyio.run(serve_mcp_stdio, cwd)
    return cwd, verdict


def test_serve_mcp_proves_and_verifies_with_the_default_run_dir(
    mcp_run: tuple[Path, dict[str, Any]],
) -> None:
    cwd, verdict = mcp_run
    assert verdict["accepted"] is True, verdict
    (ledger,) = ledgers(cwd)  # runs/<timestamp>/ledger.jsonl, relative to the user's cwd
    assert {"open_task", "set_proof", "check_proof"} <= set(ledger_tools(ledger))


def test_report_on_the_ledger_serve_wrote(mcp_run: tuple[Path, dict[str, Any]]) -> None:
    cwd, _ = mcp_run
    (ledger,) = ledgers(cwd)
    relative = str(ledger.relative_to(cwd))
    done = leanrig("report", relative, cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "check_proof" in done.stdout
    # Not `report/`: beside a run's ledger that name is the run's own report.
    assert (ledger.parent / "ledger-report" / "report.md").is_file()
    assert list((ledger.parent / "ledger-report").glob("*.png")), "plots are on by default"

    done = leanrig("report", relative, "--out", "my-report", "--no-plots", cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert json.loads((cwd / "my-report" / "report.json").read_text())
    assert not list((cwd / "my-report").glob("*.png"))


@asynccontextmanager
async def serve_process(
    cwd: Path, *args: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Process, list[bytes]]]:
    """`leanrig [prefix] serve --suite lean_project/suites/demo [args]`; its stderr collected.
    Stopped as its client would: stdio servers by closing stdin, network ones by SIGTERM."""
    network = "--port" in args or "--http" in args
    argv = [str(leanrig_exe()), *prefix, "serve", "--suite", SUITE, *args]
    process = await anyio.open_process(argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, cwd=cwd, env=env)
    stderr: list[bytes] = []

    async def drain() -> None:
        assert process.stderr is not None
        async for chunk in process.stderr:
            stderr.append(chunk)

    async with anyio.create_task_group() as tg:
        tg.start_soon(drain)
        try:
            yield process, stderr
        finally:
            await stop_process(process, close_stdin=not network)
            tg.cancel_scope.cancel()


@asynccontextmanager
async def jsonrpc_stdio(
    cwd: Path, *args: str, prefix: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> AsyncIterator[tuple[RpcProcess, list[bytes]]]:
    async with (
        serve_process(cwd, "--jsonrpc", *args, prefix=prefix, env=env) as (process, stderr),
        anyio.create_task_group() as tg,
    ):
        rpc = RpcProcess(process)
        tg.start_soon(rpc.read_loop)
        try:
            yield rpc, stderr
        finally:
            tg.cancel_scope.cancel()


async def prove_over_jsonrpc(rpc: Any) -> dict[str, Any]:
    sid = (await rpc.call("open_task", timeout=DEADLINE, task_id="and_swap"))["session_id"]
    done = await rpc.call("set_proof", timeout=DEADLINE, session_id=sid, body=PROOF)
    assert done["complete"] is True, done
    verdict: dict[str, Any] = await rpc.call("check_proof", timeout=DEADLINE, session_id=sid)
    return verdict


@pytest.mark.anyio
async def test_serve_jsonrpc_stdio_proves_and_verifies(cwd: Path) -> None:
    async with jsonrpc_stdio(cwd) as (rpc, _):
        verdict = await prove_over_jsonrpc(rpc)
    assert verdict["accepted"] is True, verdict
    (ledger,) = ledgers(cwd)
    assert "check_proof" in ledger_tools(ledger)


@pytest.mark.anyio
@pytest.mark.parametrize("condition", [("--lad",), ("--condition", "lad")])
async def test_serve_lad_serves_the_library_tools(cwd: Path, condition: tuple[str, ...]) -> None:
    async with jsonrpc_stdio(cwd, *condition) as (rpc, _):
        found = await rpc.call("search_library", timeout=DEADLINE, query="ex falso", limit=1)
        assert [r["name"] for r in found["results"]] == ["Lib.Logic.false_elim"], found
        read = await rpc.call("read_library", timeout=DEADLINE, name="Lib.Logic.false_elim")
        assert read["source"].endswith("@False.rec (fun _ => p) h")


class TcpRpc:
    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream, self.reader, self.ids = stream, BufferedByteReceiveStream(stream), 0

    async def call(self, method: str, timeout: float, **params: Any) -> Any:
        self.ids += 1
        message = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        await self.stream.send(orjson.dumps(message) + b"\n")
        with anyio.fail_after(timeout):
            reply = orjson.loads(await self.reader.receive_until(b"\n", 2**24))
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]


@pytest.mark.anyio
async def test_serve_jsonrpc_tcp_port_proves_and_verifies(cwd: Path) -> None:
    port = free_port()
    async with serve_process(cwd, "--jsonrpc", "--port", str(port)) as (process, stderr):
        with anyio.fail_after(DEADLINE):
            while f"127.0.0.1:{port}".encode() not in b"".join(stderr):  # the announcement
                assert process.returncode is None, b"".join(stderr).decode()
                await anyio.sleep(0.05)
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            verdict = await prove_over_jsonrpc(TcpRpc(stream))
    assert verdict["accepted"] is True, verdict
    assert len(ledgers(cwd)) == 1


@pytest.mark.anyio
async def test_serve_mcp_over_http_proves_and_verifies(cwd: Path) -> None:
    from mcp import Client

    port = free_port()
    async with serve_process(cwd, "--http", str(port)) as (process, stderr):
        with anyio.fail_after(DEADLINE):
            while True:  # up when it accepts connections
                assert process.returncode is None, b"".join(stderr).decode()
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                verdict = await prove_over_mcp(client)
    assert verdict["accepted"] is True, verdict
    assert len(ledgers(cwd)) == 1
    # serve_process stops it with SIGTERM: a clean shutdown, exit 0.
    said = b"".join(stderr).decode()
    assert f"leanrig: MCP (streamable HTTP) on http://127.0.0.1:{port}/mcp" in said
    assert "Traceback" not in said and "ERROR" not in said, said
    assert process.returncode == 0, said


def test_a_port_in_use_is_one_line_before_any_lean_starts(cwd: Path) -> None:
    """`serve --http PORT` and `--jsonrpc --port PORT` on a taken port: exit 2 and one line."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for args in (("--http", port), ("--jsonrpc", "--port", port)):
            done = leanrig("--log-level", "info", "serve", "--suite", SUITE, *args, cwd=cwd)
            assert done.returncode == 2, done.stderr[-3000:]
            assert f"leanrig: cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr
            assert "Traceback" not in done.stderr
            assert "pool.start" not in done.stderr


@pytest.mark.anyio
async def test_port_0_serves_on_a_free_port_and_says_which(cwd: Path) -> None:
    from mcp import Client

    async with serve_process(cwd, "--http", "0") as (process, stderr):
        with anyio.fail_after(DEADLINE):
            while b"streamable HTTP) on " not in b"".join(stderr):
                assert process.returncode is None, b"".join(stderr).decode()
                await anyio.sleep(0.05)
        said = b"".join(stderr).decode()
        url = said.split("streamable HTTP) on ", 1)[1].split()[0]
        assert not url.endswith(":0/mcp"), url
        async with Client(url) as client:
            assert "set_proof" in {t.name for t in (await client.list_tools()).tools}


@pytest.mark.anyio
async def test_http_stops_quietly_with_a_client_stuck_mid_request(cwd: Path) -> None:
    """SIGTERM with a POST whose body never comes: exit 0 within 3 s and no ERROR logged."""
    async with serve_process(cwd, "--http", "0") as (process, stderr):
        with anyio.fail_after(DEADLINE):
            while b"streamable HTTP) on " not in b"".join(stderr):
                assert process.returncode is None, b"".join(stderr).decode()
                await anyio.sleep(0.05)
        port = int(b"".join(stderr).decode().split("127.0.0.1:", 1)[1].split("/", 1)[0])
        stuck = await anyio.connect_tcp("127.0.0.1", port)
        await stuck.send(
            b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        await anyio.sleep(0.3)
        started = anyio.current_time()
        await stop_process(process, close_stdin=False)
        took = anyio.current_time() - started
        await stuck.aclose()
    said = b"".join(stderr).decode()
    assert process.returncode == 0 and took < 3.0, (process.returncode, took, said)
    assert "ERROR" not in said and "Traceback" not in said, said


@pytest.mark.anyio
async def test_serve_options_with_relative_paths_and_no_sandbox(cwd: Path) -> None:
    """Every other serve option, with relative paths: a proof is still accepted."""
    args = (
        "--run-dir",
        "my-runs",
        "--ledger",
        "ledger.jsonl",
        "--max-processes",
        "1",
        "--step-timeout",
        "30",
        "--no-sandbox",
    )
    async with jsonrpc_stdio(cwd, *args, prefix=("--log-level", "info")) as (rpc, stderr):
        verdict = await prove_over_jsonrpc(rpc)
    assert verdict["accepted"] is True, verdict
    assert "check_proof" in ledger_tools(cwd / "ledger.jsonl")
    assert list((cwd / "my-runs").glob("*/scratch")) and not (cwd / "runs").exists()
    events = [orjson.loads(line) for line in b"".join(stderr).splitlines() if line.startswith(b"{")]
    assert any(e.get("event") == "serve.opened" and e.get("sandbox") == "off" for e in events)


@pytest.mark.anyio
async def test_serve_task_binds_the_server_to_one_task(cwd: Path) -> None:
    async with jsonrpc_stdio(cwd, "--task", "and_swap") as (rpc, _):
        listed = await rpc.call("list_tasks", timeout=DEADLINE)
        assert [t["id"] for t in listed["tasks"]] == ["and_swap"]
        with pytest.raises(RpcError) as refused:
            await rpc.call("open_task", timeout=DEADLINE, task_id="refl_z")
        assert refused.value.data["code"] == "unknown_task"
        verdict = await prove_over_jsonrpc(rpc)
    assert verdict["accepted"] is True, verdict
    (ledger,) = ledgers(cwd)
    assert "check_proof" in ledger_tools(ledger)


def test_check_with_a_relative_submission(cwd: Path) -> None:
    task = (cwd / SUITE / "Demo" / "AndSwap.lean").read_text()
    (cwd / "Submission.lean").write_text(task.replace("sorryAx (And q p) Bool.false", PROOF))
    done = leanrig("check", "--suite", SUITE, "--task", "and_swap", "Submission.lean", cwd=cwd)
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "ACCEPTED"), done.stderr

    unsolved = f"{SUITE}/Demo/AndSwap.lean"
    done = leanrig("check", "--suite", SUITE, "--task", "and_swap", unsolved, "--json", cwd=cwd)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["accepted"] is False


def test_check_judges_the_line_ends_lean_reads(cwd: Path) -> None:
    """CRLF line ends are accepted; a lone carriage return anywhere is rejected, as Lean does."""
    task = (cwd / SUITE / "Demo" / "AndSwap.lean").read_text()
    solved = task.replace("sorryAx (And q p) Bool.false", PROOF.strip())
    files = {
        "Crlf.lean": solved.replace("\n", "\r\n"),
        "CrOutside.lean": solved.replace("\n\n", "\n\r", 1),
        "CrInside.lean": solved.replace("\n  @And.rec", "\r  @And.rec", 1),
        # a CR before a CRLF: read as CRLF once normalized, still a lone CR to Lean
        "CrCrLf.lean": solved.replace("\n  @And.rec", "\r\r\n  @And.rec", 1),
    }
    for name, text in files.items():
        assert text != solved, name
        (cwd / name).write_bytes(text.encode())
    done = leanrig_each(
        *[("check", "--suite", SUITE, "--task", "and_swap", name) for name in files], cwd=cwd
    )
    codes = {name: d.returncode for name, d in zip(files, done, strict=True)}
    assert codes == {"Crlf.lean": 0, "CrOutside.lean": 1, "CrInside.lean": 1, "CrCrLf.lean": 1}, [
        d.stdout + d.stderr for d in done
    ]


def test_a_wrong_suite_path_is_exit_2_and_says_what_to_pass(cwd: Path) -> None:
    """`--suite` naming suite.toml itself, a missing directory, an unreadable or non-UTF-8
    suite.toml: exit 2 with the hint, no traceback."""
    (cwd / "Submission.lean").write_text("prelude\n")
    (cwd / "dir_toml" / "suite.toml").mkdir(parents=True)
    (cwd / "latin1").mkdir()
    (cwd / "latin1" / "suite.toml").write_bytes(b'name = "d\xe9mo"\n')
    cases = {
        f"{SUITE}/suite.toml": f"pass the directory that holds suite.toml: {cwd / SUITE}",
        "lean_project/suites/nosuch": "no such suite directory",
        "dir_toml": "cannot read",
        "latin1": "is not UTF-8",
    }
    done = leanrig_each(
        *[("check", "--suite", s, "--task", "and_swap", "Submission.lean") for s in cases],
        cwd=cwd,
    )
    for (suite, expected), result in zip(cases.items(), done, strict=True):
        assert result.returncode == 2, (suite, result.stderr)
        assert "Traceback" not in result.stderr and expected in result.stderr, result.stderr


def test_an_unknown_task_id_on_the_command_line_lists_the_suite_s_ids(cwd: Path) -> None:
    (cwd / "Submission.lean").write_text("prelude\n")
    done = leanrig("check", "--suite", SUITE, "--task", "and-swap", "Submission.lean", cwd=cwd)
    assert done.returncode == 2, done.stderr
    assert "unknown task 'and-swap'" in done.stderr and "and_swap" in done.stderr, done.stderr


def test_serving_an_unknown_task_makes_nothing_on_disk(cwd: Path) -> None:
    done = leanrig("serve", "--suite", SUITE, "--task", "and-swap", cwd=cwd)
    assert done.returncode == 2, done.stderr
    assert "unknown task 'and-swap'" in done.stderr and "and_swap" in done.stderr, done.stderr
    assert not (cwd / "runs").exists(), sorted((cwd / "runs").rglob("*"))


def test_doctor_json(cwd: Path) -> None:
    done, plain = leanrig_each(("doctor", "--json"), ("doctor",), cwd=cwd)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["smoke_ok"] is True, report["detail"]
    assert report["bwrap"] == sandbox_tools()["bwrap"] and report["lean_version"]
    # Without --json: the same facts, one per line.
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "smoke_ok: True" in plain.stdout
    assert f"lean_version: {report['lean_version']}" in plain.stdout
    assert report["programs"]["lean"] == report["lean_path"] and "None" not in plain.stdout
    assert all(p.startswith("/") or p == "not found" for p in report["programs"].values())


def test_demo(tmp_path: Path) -> None:
    sandbox_or_skip()
    done = leanrig("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[check_proof] ACCEPTED" in done.stdout
    assert "step - ms" not in done.stdout and "; remove it." in done.stdout


def test_make_demo_as_the_readme_types_it() -> None:
    sandbox_or_skip()
    done = subprocess.run(
        ["make", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[check_proof] ACCEPTED" in done.stdout


def test_bootstrap_quiet(tmp_path: Path) -> None:
    done = leanrig("bootstrap", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    if done.stdout:  # it had to build
        assert "bootstrap Lean:" in done.stdout
        done = leanrig("bootstrap", "--quiet", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr  # built already: silent


REFUSAL = "bwrap: Can't find source path /leanrig-test-refusal: No such file or directory"


@pytest.fixture
def refusing_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment whose `bwrap` passes leanrig's probe, then refuses every real sandbox."""
    real = sandbox_or_skip()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\nfor last; do :; done\n"
        f'if [ "$last" = true ]; then exec {real} "$@"; fi\n'
        f'echo "{REFUSAL}" >&2\nexit 1\n'
    )
    fake.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "LEANRIG_BWRAP": str(bin_dir / "bwrap"),
    }


def test_doctor_fails_like_serve_and_shows_the_sandbox_error(
    cwd: Path, refusing_bwrap: dict[str, str]
) -> None:
    done = leanrig("--log-level", "info", "doctor", cwd=cwd, env=refusing_bwrap)
    assert done.returncode == 1, done.stdout
    assert "smoke_ok: False" in done.stdout and REFUSAL in done.stdout
    events = [json.loads(x) for x in done.stderr.splitlines() if x.startswith("{")]
    names = {e.get("event") for e in events}
    assert "serve.opened" in names, "doctor serves its smoke suite with serve's code"
    assert any(REFUSAL in str(e.get("error")) for e in events if e.get("event") == "lsp.died")


@pytest.mark.anyio
async def test_serve_logs_the_sandbox_error(cwd: Path, refusing_bwrap: dict[str, str]) -> None:
    async with jsonrpc_stdio(cwd, env=refusing_bwrap) as (rpc, stderr):
        with pytest.raises(RpcError) as failed:
            await rpc.call("open_task", timeout=DEADLINE, task_id="and_swap")
    assert failed.value.data["code"] == "lean_failure"
    assert REFUSAL not in failed.value.message  # the agent gets no raw stderr ...
    assert REFUSAL in b"".join(stderr).decode()  # ... the operator's log has the cause


def test_a_relative_sandbox_path_is_bound_where_the_caller_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox_or_skip()
    monkeypatch.chdir(tmp_path)
    Path("scratch").mkdir()
    argv = sandbox_wrapper(SandboxPolicy(writable=(Path("scratch"),)))
    target = tmp_path / "scratch" / "written"
    done = subprocess.run(
        [*argv, "sh", "-c", f"echo ok > {target}"],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert target.read_text() == "ok\n"


@pytest.mark.anyio
async def test_a_lean_the_sandbox_cannot_start_names_the_sandbox_error(
    tmp_path: Path, lean_install: LeanInstall
) -> None:
    sandbox_or_skip()
    missing = tmp_path / "missing"  # bwrap cannot bind what does not exist
    command = lean_install.server_command(
        tmp_path, use_lake=False, wrapper=sandbox_wrapper(SandboxPolicy(writable=(missing,)))
    )
    with anyio.fail_after(30), pytest.raises(ServerStartFailed) as failed:
        async with LeanClient.start(command, timeouts=Timeouts(spawn=20)):
            pass
    assert "Can't find source path" in str(failed.value)
    assert str(missing) in failed.value.stderr_tail


@pytest.mark.anyio
async def test_serving_finds_lean_and_builds_the_library_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event loop keeps ticking while `serve` runs find_lean and library_dir."""
    import threading

    from agent_tools.servers import ServeOptions, open_service, service_wiring
    from agent_tools.tasks import library_dir
    from lsp_bridge import find_lean

    loop_ticked = threading.Event()
    blocked: list[str] = []

    def needs_the_loop(name: str, call: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            loop_ticked.clear()
            if not loop_ticked.wait(10):
                blocked.append(name)
            return call(*args, **kwargs)

        return run

    monkeypatch.setattr(service_wiring, "find_lean", needs_the_loop("find_lean", find_lean))
    monkeypatch.setattr(service_wiring, "library_dir", needs_the_loop("library_dir", library_dir))

    async def ticker() -> None:
        while True:
            loop_ticked.set()
            await anyio.sleep(0.01)

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            options = ServeOptions(suite=DEMO, run_dir=tmp_path, max_processes=1)
            async with open_service(options) as service:
                assert service.suite.name == "demo"
            tg.cancel_scope.cancel()
    assert blocked == []
