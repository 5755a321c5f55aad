"""Harness presets (agent_tools/runs/harness.py): what each harness is given per attempt, and
what it reported about its own usage. No harness runs here."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path

import orjson
import pytest

from agent_tools.runs import RunError, RunOptions, Usage, run_benchmark
from agent_tools.runs.harness import (
    KEY_PLACEHOLDER,
    HarnessError,
    PresetInputs,
    codex_config,
    find_harness,
    harness_usage,
    key_variable,
    plan_launch,
    usage_mismatch,
)
from agent_tools.runs.model_access import model_route

from .suites import DEMO as DEMO_SUITE

pytestmark = pytest.mark.anyio


def attempt(tmp: Path) -> PresetInputs:
    return PresetInputs(
        prompt="Prove `Demo.AndSwap.main` (task `and_swap` of suite `demo`)",
        workspace=tmp / "ws",
        home=tmp / "home",
        mcp_command=["/venv/bin/python", "-I", "-S", "/x/relay.py", "/tmp/s/1/mcp.sock"],
        mcp_env={"LEANRIG_ATTEMPT_TOKEN": "tok"},
        model_url="http://127.0.0.1:4141",
        time_limit=1800.0,
    )


def test_claude_code_gets_leanrig_s_tools_only_json_output_and_a_home_of_its_own(
    tmp_path: Path,
) -> None:
    a = attempt(tmp_path)
    out = plan_launch(
        "claude-code",
        Path("/bin/claude"),
        a,
        model="kimi-k3",
        reasoning="high",
        key_var="ANTHROPIC_AUTH_TOKEN",
    ).write_files()
    argv = out.argv
    assert argv[:3] == ["/bin/claude", "-p", a.prompt]
    for flag, value in [
        ("--model", "kimi-k3"),
        ("--tools", "ToolSearch"),
        ("--allowedTools", "mcp__leanrig"),
        ("--output-format", "json"),
        ("--effort", "high"),
    ]:
        assert argv[argv.index(flag) + 1] == value
    # Its session log is kept, in the attempt's own home, for the transcript.
    assert "--strict-mcp-config" in argv and "--no-session-persistence" not in argv
    config = orjson.loads(Path(argv[argv.index("--mcp-config") + 1]).read_bytes())
    server = config["mcpServers"]["leanrig"]
    assert server["command"] == a.mcp_command[0] and server["args"] == a.mcp_command[1:]
    assert server["env"] == a.mcp_env
    env = out.env
    assert env["HOME"] == str(a.home) and env["CLAUDE_CONFIG_DIR"].startswith(str(a.home))
    assert env["ANTHROPIC_BASE_URL"] == a.model_url
    assert env["ANTHROPIC_AUTH_TOKEN"] == KEY_PLACEHOLDER and "ANTHROPIC_API_KEY" not in env
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


def test_claude_code_sends_an_api_key_header_when_the_key_is_an_api_key(tmp_path: Path) -> None:
    out = plan_launch(
        "claude-code",
        Path("/bin/claude"),
        attempt(tmp_path),
        model="m",
        reasoning=None,
        key_var="ANTHROPIC_API_KEY",
    ).write_files()
    assert out.env["ANTHROPIC_API_KEY"] == KEY_PLACEHOLDER
    assert "ANTHROPIC_AUTH_TOKEN" not in out.env and "--effort" not in out.argv


def test_codex_s_config_names_the_gateway_the_server_and_never_asks(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    out = plan_launch(
        "codex", Path("/bin/codex"), a, model="gpt-5.5", reasoning="xhigh", key_var="OPENAI_API_KEY"
    ).write_files()
    (path,) = out.files
    assert path == a.home / ".codex" / "config.toml" and path.exists()
    config = tomllib.loads(path.read_text())
    assert config["model"] == "gpt-5.5" and config["model_reasoning_effort"] == "xhigh"
    assert config["approval_policy"] == "never" and config["sandbox_mode"] == "read-only"
    assert config["web_search"] == "disabled" and config["analytics"]["enabled"] is False
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:4141/v1"
    assert provider["wire_api"] == "responses"
    assert out.env[provider["env_key"]] == KEY_PLACEHOLDER
    server = config["mcp_servers"]["leanrig"]
    assert [server["command"], *server["args"]] == a.mcp_command
    assert server["env"] == a.mcp_env and server["tool_timeout_sec"] >= 1800
    assert config["features"]["shell_tool"] is False and config["features"]["plugins"] is False
    assert out.env["CODEX_HOME"] == str(a.home / ".codex")
    assert out.argv[:3] == ["/bin/codex", "exec", "--json"] and out.argv[-1] == a.prompt


def test_codex_s_config_escapes_what_toml_would_misread(tmp_path: Path) -> None:
    a = attempt(tmp_path)
    tricky = dataclasses.replace(a, workspace=tmp_path / 'a "quoted" \\ path ∀')
    config = tomllib.loads(codex_config(tricky, model='m"x', reasoning=None))
    assert config["mcp_servers"]["leanrig"]["cwd"] == str(tricky.workspace)
    assert config["model"] == 'm"x'


CLAUDE_RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "num_turns": 4,
    "total_cost_usd": 0.0123,
    "usage": {
        "input_tokens": 120,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 400,
        "output_tokens": 77,
    },
}


def test_claude_code_s_own_usage_is_read_in_leanrig_s_convention() -> None:
    output = b"some stderr line\n" + orjson.dumps(CLAUDE_RESULT) + b"\n"
    usage = harness_usage("claude-code", output)
    assert usage == Usage(
        input_tokens=3520, cached_input_tokens=3000, output_tokens=77, cost_usd=0.0123
    )


def test_codex_s_turns_are_summed() -> None:
    usage = {
        "input_tokens": 1000,
        "cached_input_tokens": 600,
        "output_tokens": 50,
        "reasoning_output_tokens": 20,
    }
    turn = {"type": "turn.completed", "usage": usage}
    output = b"\n".join(
        [b'{"type":"thread.started"}', orjson.dumps(turn), b"not json", orjson.dumps(turn)]
    )
    assert harness_usage("codex", output) == Usage(
        input_tokens=2000, cached_input_tokens=1200, output_tokens=100, reasoning_tokens=40
    )


def test_a_harness_that_reported_nothing_has_no_usage_of_its_own() -> None:
    assert harness_usage("codex", b"error: something\n") is None
    assert harness_usage("claude-code", b"") is None


def test_a_count_that_differs_from_the_gateway_s_is_named() -> None:
    gateway = Usage(input_tokens=100, cached_input_tokens=10, output_tokens=5)
    assert (
        usage_mismatch(
            gateway, Usage(input_tokens=100, cached_input_tokens=10, output_tokens=5, cost_usd=1.0)
        )
        == []
    )
    assert usage_mismatch(gateway, Usage(input_tokens=90, output_tokens=5)) == [
        "input_tokens: gateway 100, harness 90"
    ]
    assert usage_mismatch(gateway, None) == []


def test_the_key_variable_is_the_one_given_else_the_harness_s_usual_ones_that_are_set() -> None:
    env = {"ANTHROPIC_AUTH_TOKEN": "t", "OPENAI_API_KEY": "o"}
    assert key_variable("claude-code", None, env) == "ANTHROPIC_AUTH_TOKEN"
    assert key_variable("claude-code", None, {**env, "ANTHROPIC_API_KEY": "k"}) == (
        "ANTHROPIC_API_KEY"
    )
    assert key_variable("codex", None, env) == "OPENAI_API_KEY"
    assert key_variable("codex", "MOONSHOT_KEY", env) == "MOONSHOT_KEY"
    assert key_variable("codex", None, {}) is None


def test_harness_bin_must_be_an_executable_file(tmp_path: Path) -> None:
    plain = tmp_path / "claude"
    plain.write_text("#!/bin/sh\n")
    with pytest.raises(HarnessError, match="not an executable"):
        find_harness("claude-code", plain)
    plain.chmod(0o755)
    assert find_harness("claude-code", plain) == plain


def test_a_harness_on_path_comes_before_the_pinned_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mine = bin_dir / "codex"
    mine.write_text("#!/bin/sh\n")
    mine.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert find_harness("codex") == mine


def test_a_missing_harness_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("LEANRIG_CACHE", str(tmp_path / "cache"))
    with pytest.raises(HarnessError) as info:
        find_harness("claude-code")
    assert "make harnesses" in info.value.hint


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"harness": "codex", "model": "m", "agent_network": "none"}, "no way to its model"),
        ({"agent_network": "model"}, "needs a model"),
        ({"model_endpoint": "ftp://x"}, "not an http"),
        ({"harness": "codex", "model": "m", "model_key_env": "NOT_SET_HERE"}, "not set"),
    ],
)
def test_settings_that_cannot_reach_a_model_are_refused(
    options: dict[str, object], message: str
) -> None:
    full = RunOptions(suite=DEMO_SUITE, agent="x", **options)  # type: ignore[arg-type]
    with pytest.raises(RunError, match=message):
        model_route(full, {})


def test_the_route_defaults_to_the_vendor_s_api_and_keeps_the_key_out_of_its_repr() -> None:
    options = RunOptions(
        suite=DEMO_SUITE,
        agent="--harness claude-code",
        harness="claude-code",
        model="claude-sonnet-5",
    )
    route = model_route(options, {"ANTHROPIC_API_KEY": "sk-secret"})
    assert route is not None and route.upstream == "https://api.anthropic.com"
    assert route.key == "sk-secret" and "sk-secret" not in repr(route)
    assert model_route(RunOptions(suite=DEMO_SUITE, agent="x"), {}) is None


async def test_a_harness_run_without_a_model_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    options = RunOptions(
        suite=DEMO_SUITE, agent="--harness codex", harness="codex", out=tmp_path / "run"
    )
    with pytest.raises(RunError, match="--model"):
        await run_benchmark(options)
    assert not (tmp_path / "run").exists()
