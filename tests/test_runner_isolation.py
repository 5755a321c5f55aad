"""The runner owns each attempt's service: an agent that forges records or writes in the run
directory changes nothing recorded or judged, and sees only its own socket, without network.
The stdio↔socket relay: bytes both ways, half-close, exit when the server ends."""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from agent_tools.runs import RunOptions, relay, run_benchmark
from agent_tools.runs.agent_sandbox import RunSandbox, agent_sandbox, scratch_mounts
from agent_tools.runs.attempt_dir import relay_command
from agent_tools.runs.leftovers import socket_parent
from agent_tools.sessions import body_sha
from agent_tools.tasks import load_suite

from .test_runner import AGENTS, PY, SUITE, attempt_processes, mcp_agent, options, raw_lines

WRONG = "\n  leanrig_no_such_proof"
sandboxed = pytest.mark.skipif(
    agent_sandbox(network=False, mounts=()) is None,
    reason="bwrap cannot sandbox the agent here (its records are then not protected)",
)


@sandboxed
@pytest.mark.anyio
async def test_forged_records_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lsp_bridge import cache_root

    # The agent's HOME is its attempt's own: it finds the real cache (and Lean) by name.
    monkeypatch.setenv("LEANRIG_CACHE", str(cache_root()))
    run_dir = tmp_path / "run"
    modes = {"refl_z": "skip", "and_swap": "session"}
    agent = f"{PY} {AGENTS / 'forging_agent.py'} '{json.dumps(modes)}'"
    # Another run's socket directory, there while this run goes: its agents must not see it.
    decoy = socket_parent() / f"run-decoy-{tmp_path.name}"
    decoy.mkdir()
    try:
        summary = await run_benchmark(options(run_dir, agent, parallel=2))
    finally:
        decoy.rmdir()
    suite = load_suite(SUITE)
    r = {x.task: x for x in raw_lines(run_dir)}
    assert set(r) == set(modes) and len(summary.results) == 2
    # Never connected: the initial file is judged (rejected), no tool call counted.
    assert r["refl_z"].final_body_sha == body_sha(suite.tasks["refl_z"].body)
    assert not r["refl_z"].accepted and r["refl_z"].tool_calls == 0 and r["refl_z"].lean_s == 0
    # Connected and set a wrong body: that body is judged, the service's two calls counted.
    assert r["and_swap"].final_body_sha == body_sha(WRONG)
    assert not r["and_swap"].accepted and r["and_swap"].tool_calls == 2
    ledger = [orjson.loads(x) for x in (run_dir / "ledger.jsonl").read_bytes().splitlines()]
    calls = [e["tool"] for e in ledger if e.get("closed_by") != "server"]
    assert calls == ["open_task", "set_proof"]
    assert len(raw_lines(run_dir)) == 2
    for task in modes:
        root = run_dir / "attempts" / task / "1"
        forged = json.loads((root / "workspace" / "forge.json").read_text())
        # The run directory is hidden; what the agent wrote there went to a discarded view.
        assert forged["run_dir_entries"] == ["attempts"], forged
        assert forged["task_attempts"] == ["1"]
        assert forged["attempt_entries"] == ["home", "workspace"]
        assert not any(k.startswith("overwrite") for k in forged), forged
        assert forged["capabilities"] == "0000000000000000", forged
        assert not (root / "forged.txt").exists()
        assert not (root / "serve" / "submission-1.json").exists()
        assert forged["socket_dirs"] == [forged["own_socket_dir"]], forged
        assert forged["run_socket_dirs"] == [forged["own_run_socket_dir"]], forged
        assert forged["network"].startswith("refused"), forged
        # The submission is written as a new file (not through the agent's link), no usage is
        # read from a FIFO, and a directory there is left with a note; the verdict stands.
        written = root / "workspace" / "Submission.lean"
        assert not written.is_symlink()
        body = WRONG if task == "and_swap" else suite.tasks[task].body
        if modes[task] == "skip":
            assert written.is_dir()
            assert any("Submission.lean could not be written" in n for n in r[task].notes)
        else:
            assert written.read_text() == suite.tasks[task].with_body(body)
        assert r[task].input_tokens is None and r[task].cost_usd is None
        # What the verdict trusts is read-only to the agent; its scratch is its own.
        trusted = {k: v for k, v in forged.items() if k.startswith("trusted")}
        assert len(trusted) == 5 and all(v.startswith("refused") for v in trusted.values()), forged
        assert forged["block_devices"] == [], forged
        stashes = [v for k, v in forged.items() if k.startswith("stash")]
        assert len(stashes) == 3 and all(v != "refused" for v in stashes), forged
        assert not any(Path(v).exists() for v in stashes), forged  # noqa: ASYNC240
    assert attempt_processes(run_dir) == []


def _echo_server(path: Path, ready: threading.Event, seen: list[bytes]) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen()
        ready.set()
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(65536):
                seen.append(data)
                conn.sendall(data)


def test_relay_copies_both_ways_and_ends_with_the_server(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    ready, seen = threading.Event(), list[bytes]()
    thread = threading.Thread(target=_echo_server, args=(path, ready, seen), daemon=True)
    thread.start()
    assert ready.wait(10)
    t0 = time.perf_counter()
    with subprocess.Popen(
        relay_command(path), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as process:
        start_ms, rtts = _exercise(process, t0)
    thread.join(10)
    assert not thread.is_alive() and b"".join(seen).endswith(b"y" * 1000 + b"\n")
    direct = _direct_rtt_ms(tmp_path / "d.sock")
    print(
        f"\nrelay: first answer {start_ms:.1f} ms after spawn (interpreter start + connect); "
        f"round trip median {statistics.median(rtts):.3f} ms, p95 "
        f"{sorted(rtts)[int(len(rtts) * 0.95)]:.3f} ms; the same round trip straight over "
        f"the socket {direct:.3f} ms"
    )


def _exercise(process: subprocess.Popen[bytes], t0: float) -> tuple[float, list[float]]:
    """First answer's time since spawn, 300 round trips, then a 3 MB line as stdin closes."""
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None and stdout is not None
    try:
        first = b'{"jsonrpc": "2.0", "id": 0, "method": "ping"}\n'
        stdin.write(first)
        stdin.flush()
        assert stdout.readline() == first
        start_ms = (time.perf_counter() - t0) * 1000
        rtts = []
        message = b'{"jsonrpc": "2.0", "id": 1, "result": "' + b"x" * 200 + b'"}\n'
        for _ in range(300):
            t = time.perf_counter()
            stdin.write(message)
            stdin.flush()
            assert stdout.readline() == message
            rtts.append((time.perf_counter() - t) * 1000)
        big = b"y" * (3 * 2**20) + b"\n"  # larger than any pipe or socket buffer

        def write_big() -> None:
            stdin.write(big)
            stdin.close()

        writer = threading.Thread(target=write_big)
        writer.start()
        assert stdout.readline() == big
        writer.join(10)
        # stdin's EOF half-closes the socket: the server sees EOF, closes, the relay exits 0.
        assert process.wait(10) == 0
        return start_ms, rtts
    finally:
        process.kill()


def _direct_rtt_ms(path: Path) -> float:
    ready, seen = threading.Event(), list[bytes]()
    thread = threading.Thread(target=_echo_server, args=(path, ready, seen), daemon=True)
    thread.start()
    assert ready.wait(10)
    message = b"x" * 200 + b"\n"
    rtts = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(path))
        reader = client.makefile("rb")
        for _ in range(300):
            t = time.perf_counter()
            client.sendall(message)
            assert reader.readline() == message
            rtts.append((time.perf_counter() - t) * 1000)
        reader.close()
        client.shutdown(socket.SHUT_WR)
    thread.join(10)
    return statistics.median(rtts)


def test_relay_without_a_server_fails_clearly(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    assert relay.relay(str(tmp_path / "none.sock"), timeout=0.2) == 1
    assert time.perf_counter() - t0 >= 0.2


@sandboxed
def test_the_users_home_is_read_only_and_the_attempts_home_is_fresh(tmp_path: Path) -> None:
    """The runner's PATH is read-only too."""
    base = Path.home() / f".leanrig-home-{tmp_path.name}"
    trusted = base / "a" / "trusted"
    trusted.mkdir(parents=True)
    (trusted / "lean").write_text("real")
    path_dirs = [Path(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    fresh_home = tmp_path / "attempt" / "home"
    workspace = tmp_path / "attempt" / "workspace"
    sockets = tmp_path / "sockets"
    for d in (fresh_home, workspace, sockets / "1"):
        d.mkdir(parents=True)
    sandbox = RunSandbox(
        trusted=[trusted],
        suite=workspace,
        run_dir=tmp_path / "run",
        socket_parent=sockets,
        hidden=[],
        network=False,
    )
    (tmp_path / "run").mkdir()
    tries = [
        f"mv {base / 'a'} {base / 'a2'}",
        f"touch {base / 'planted'}",
        f"touch {fresh_home / 'mine'}",
        *(f"touch {d / 'leanrig-planted'}" for d in path_dirs if d.is_dir()),
    ]
    script = "; ".join(f"{t} 2>/dev/null && echo yes || echo no" for t in tries)
    try:
        prefix = sandbox.prefix(workspace, sockets / "1", [], fresh_home)
        out = subprocess.run(
            [*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=30, check=True
        )
        answers = dict(zip(tries, out.stdout.split(), strict=True))
        assert answers.pop(f"touch {fresh_home / 'mine'}") == "yes"
        assert set(answers.values()) == {"no"}, answers
        assert (trusted / "lean").read_text() == "real" and not (base / "planted").exists()
        assert (fresh_home / "mine").exists()
        assert not any((d / "leanrig-planted").exists() for d in path_dirs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_agents_files_under_tmp_stay_visible(tmp_path: Path) -> None:
    """Paths the command names, even inside a word, are bound back read-only by their top dir."""
    top = Path("/tmp") / f"leanrig-agent-{tmp_path.name}"
    (top / "bin").mkdir(parents=True)
    (top / "home").mkdir()
    (top / "bin" / "agent.py").write_text("")
    try:
        script = top / "bin" / "agent.py"
        argv = [
            "python3",
            str(script),
            f"--cfg={top / 'cfg.json'}",
            "sh",
            "-c",
            f"cat {script}",
            "/tmp/leanrig-missing-x/a",
        ]
        fresh, named = scratch_mounts(argv)
        assert ("--tmpfs", Path("/tmp")) in fresh
        assert named == [("--ro-bind", top)]  # once, and not what does not exist
    finally:
        shutil.rmtree(top, ignore_errors=True)


@sandboxed
@pytest.mark.anyio
async def test_a_lean_planted_on_path_in_the_agents_home_is_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempts get the Lean the runner resolved at its start."""
    from lsp_bridge import cache_root

    monkeypatch.setenv("LEANRIG_CACHE", str(cache_root()))  # the home changes below
    monkeypatch.delenv("LEANRIG_LEAN", raising=False)
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    ran = tmp_path / "planted-lean-ran"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    agent = tmp_path / "plant.sh"
    agent.write_text(
        "#!/bin/sh\n"
        f"printf '#!/bin/sh\\ntouch {ran}\\nexit 1\\n' > {home}/bin/lean\n"
        f"chmod +x {home}/bin/lean\n"
    )
    agent.chmod(0o755)
    run_dir = tmp_path / "run"
    summary = await run_benchmark(options(run_dir, str(agent), parallel=1))
    assert not (home / "bin" / "lean").exists()
    assert not ran.exists(), "the runner ran the agent's lean"
    assert len(summary.results) == 2
    assert not any(r.infra_retry for r in raw_lines(run_dir))


@sandboxed
@pytest.mark.anyio
async def test_a_sandbox_that_cannot_be_set_up_is_the_runners_failure_not_the_agents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap failing before the agent starts: retried once, the reason naming the sandbox."""
    from agent_tools.runs.agent_sandbox import RunSandbox

    real = RunSandbox.prefix

    def broken(self: RunSandbox, *args: Any) -> tuple[str, ...]:
        prefix = real(self, *args)
        bad = "/leanrig-no-such-directory"
        return (*prefix[:-2], "--ro-bind", bad, bad, *prefix[-2:])

    monkeypatch.setattr(RunSandbox, "prefix", broken)
    run_dir = tmp_path / "run"
    await run_benchmark(options(run_dir, mcp_agent("solve"), tasks=("refl_z",)))
    (line,) = raw_lines(run_dir)
    assert line.infra_retry and not line.accepted, line
    assert any("the agent's sandbox could not be set up" in r for r in line.reasons), line


@sandboxed
@pytest.mark.anyio
@pytest.mark.parametrize("condition", ["baseline", "lad"])
async def test_hidden_suite_paths_and_a_baseline_runs_library_are_unreadable(
    tmp_path: Path, condition: str
) -> None:
    """Hidden from the attempt's Lean too; an agent kept in a hidden directory still runs."""
    from .test_runner_faults import FAULT

    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite, ignore=shutil.ignore_patterns("*.olean", "*.ilean"))
    (suite / "Solutions").mkdir()
    (suite / "Solutions" / "ReflZ.lean").write_text("-- the reference proof\n")
    (suite / "NOTES.md").write_text("answers\n")
    agent_copy = suite / "Solutions" / "agent.py"
    shutil.copy(FAULT, agent_copy)
    toml = suite / "suite.toml"
    toml.write_text('hidden = ["Solutions", "NOTES.md"]\n' + toml.read_text())
    (suite / ".git").mkdir()  # a checkout: what is hidden is still in its history
    (suite / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    earlier = tmp_path / "runs" / "earlier" / "Submission.lean"  # an earlier run's proof
    earlier.parent.mkdir(parents=True)
    earlier.write_text("@Eq.refl N N.z\n")
    (earlier.parent / "run.json").write_text("{}")
    beside = tmp_path / "runs" / "tools" / "helper.txt"  # not a run: the user's, visible
    beside.parent.mkdir()
    beside.write_text("a helper")
    from agent_tools.library import index_dir

    index_dir().mkdir(parents=True, exist_ok=True)
    marker = index_dir() / f"leanrig-test-{os.getpid()}-{condition}.sqlite"
    marker.write_text("an index")  # as a LAD server caches the library
    wanted = {
        "solution": suite / "Solutions" / "ReflZ.lean",
        "notes": suite / "NOTES.md",
        "lad": suite / "Lib" / "Logic.lean",
        "index": marker,
        "history": suite / ".git" / "HEAD",
        "earlier run": earlier,
        "beside": beside,
        "library": suite / "Demo" / "Basic.lean",
    }
    listed = tmp_path / "peek.json"  # a path named in the command is shown: not this one
    listed.write_text(json.dumps([str(p) for p in wanted.values()]))
    agent = f"{PY} {agent_copy.parent}/../Solutions/agent.py peek {listed}"  # `..` resolved
    run_dir = tmp_path / "runs" / condition
    from agent_tools.servers import open_service

    served: list[tuple[Path, ...]] = []

    def service(serve: Any) -> Any:
        served.append(serve.hidden)
        return open_service(serve)

    options = RunOptions(
        suite=suite,
        agent=agent,
        out=run_dir,
        tasks=("refl_z",),
        quiet=True,
        time_limit=60.0,
        condition=condition,  # type: ignore[arg-type]
        service=service,
    )
    try:
        await run_benchmark(options)
    finally:
        marker.unlink()
    (peek,) = run_dir.glob("attempts/refl_z/1/workspace/peek.json")
    seen = {name: json.loads(peek.read_text())[str(path)] for name, path in wanted.items()}
    assert seen["solution"] == "No such file or directory", seen  # an empty directory there
    assert seen["history"] == "No such file or directory", seen
    assert seen["earlier run"] == "No such file or directory", seen
    assert seen["beside"] == len("a helper"), seen
    assert seen["notes"] in (0, "Permission denied"), seen  # the null device over a file
    assert isinstance(seen["library"], int) and seen["library"] > 0, seen
    # The attempt's Lean hides the same (a body's Lean could show a file in its messages).
    (lean_hidden,) = served
    assert {wanted["solution"].parent.resolve(), wanted["history"].parent.resolve()} <= set(
        lean_hidden
    )
    assert (wanted["lad"].resolve() in lean_hidden) == (condition == "baseline")
    assert run_dir.resolve() in lean_hidden  # other attempts' proofs; its scratch bound over
    if condition == "lad":
        assert isinstance(seen["lad"], int) and seen["lad"] > 0, seen
        assert seen["index"] == len("an index"), seen
    else:
        assert seen["lad"] in (0, "Permission denied"), seen
        assert seen["index"] == "No such file or directory", seen


def test_a_command_naming_a_hidden_paths_parent_shows_nothing_more(tmp_path: Path) -> None:
    from agent_tools.runs.agent_sandbox import hidden_mounts

    hidden = tmp_path / "suite" / "Solutions"
    (hidden / "deep").mkdir(parents=True)
    (hidden / "agent.py").write_text("")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "suite")
    argv = ["python", f"{hidden}/..", f"--x={hidden}/deep/../agent.py", f"{link}/Solutions/deep"]
    assert hidden_mounts([hidden], argv) == [
        ("--hide", hidden),
        ("--ro-bind", hidden / "agent.py"),
        ("--ro-bind", hidden / "deep"),  # the link resolved: the hidden path's own name
    ]


@sandboxed
@pytest.mark.anyio
async def test_an_agent_gets_a_fresh_home_with_what_agent_home_holds(tmp_path: Path) -> None:
    """What one attempt writes in its HOME reaches neither the next one's nor the user's."""
    template = tmp_path / "agent-home"
    (template / ".config").mkdir(parents=True)
    (template / ".config" / "agent.toml").write_text("model = 'x'\n")
    script = tmp_path / "home_agent.sh"
    script.write_text(
        "#!/bin/sh\n"
        'cat "$HOME/.config/agent.toml" > "$LEANRIG_WORKSPACE/seen.txt"\n'
        'ls -a "$HOME" > "$LEANRIG_WORKSPACE/listing.txt"\n'
        'echo "$1" > "$LEANRIG_WORKSPACE/home.txt"\n'
        'touch "$HOME/left-behind"\n'
    )
    script.chmod(0o755)
    run_dir = tmp_path / "run"
    await run_benchmark(options(run_dir, f"{script} {{home}}", parallel=1, agent_home=template))
    for task in ("refl_z", "and_swap"):
        root = run_dir.resolve() / "attempts" / task / "1"
        workspace = root / "workspace"
        assert (workspace / "seen.txt").read_text() == "model = 'x'\n"
        assert (workspace / "home.txt").read_text().strip() == str(root / "home")
        assert "left-behind" not in (workspace / "listing.txt").read_text()
        assert (root / "home" / "left-behind").exists()  # kept with the attempt
    assert not (template / "left-behind").exists() and not (Path.home() / "left-behind").exists()
    info = json.loads((run_dir / "run.json").read_text())
    assert info["agent_home"] == str(template)
