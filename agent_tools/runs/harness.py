"""Harness presets (`leanrig run --harness claude-code|codex`, docs/agents.md).

Must not hold an API key (harnesses get a placeholder) or run anything but ``--version``."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import orjson
import tomli_w

from lsp_bridge import LeanrigError, cache_root, find_program

from .attempt_dir import HOME_VARS, home_env
from .results import Usage

HarnessName = Literal["claude-code", "codex"]
HARNESSES: Final[tuple[HarnessName, ...]] = ("claude-code", "codex")
PROGRAM: Final[dict[HarnessName, str]] = {"claude-code": "claude", "codex": "codex"}
# Where each harness sends its model calls when no --model-endpoint is given.
VENDOR_ENDPOINT: Final[dict[HarnessName, str]] = {
    "claude-code": "https://api.anthropic.com",
    "codex": "https://api.openai.com/v1",
}
# The runner's environment variables a key is read from, in order.
KEY_VARS: Final[dict[HarnessName, tuple[str, ...]]] = {
    "claude-code": ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
    "codex": ("OPENAI_API_KEY",),
}
# No process but the gateway's may hold these.
KEY_NAMES: Final = frozenset(v for names in KEY_VARS.values() for v in names)
# The gateway swaps it for the real key.
KEY_PLACEHOLDER: Final = "leanrig-gateway-key"
MCP_SERVER: Final = "leanrig"
# Codex features off (`codex features list`): every tool but MCP's, and every call home.
CODEX_FEATURES_OFF: Final = (
    "plugins",
    "shell_tool",
    "unified_exec",
    "goals",
    "view_image",
    "image_generation",
    "apps",
    "browser_use",
    "computer_use",
    "in_app_browser",
    "sleep_tool",
    "shell_snapshot",
    "tool_suggest",
    "skill_search",
    "memories",
)


class HarnessError(LeanrigError):
    hint = "install the pinned harnesses with `make harnesses`, or pass --harness-bin PATH"


@dataclass(frozen=True, slots=True)
class Launch:
    """One attempt's harness: command, added environment, and files (path → text; no secrets)."""

    argv: list[str]
    env: dict[str, str]
    files: dict[Path, str] = field(default_factory=dict)

    def write_files(self) -> Launch:
        for path, text in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return self


@dataclass(frozen=True, slots=True)
class PresetInputs:
    prompt: str
    workspace: Path
    home: Path  # fresh per attempt: HOME and every harness state directory
    mcp_command: list[str]  # the attempt's MCP server (the relay to its socket)
    mcp_env: dict[str, str]
    model_url: str  # the gateway, as the harness reaches it
    time_limit: float


def installed_harness(name: HarnessName) -> Path | None:
    """The pinned install `make harnesses` made (scripts/install-harnesses.sh), if any."""
    program = PROGRAM[name]
    for root in sorted((cache_root() / "harnesses").glob("*/node_modules/.bin")):
        candidate = root / program
        if candidate.exists() and (root.parent.parent / ".installed").exists():
            return candidate
    return None


def find_harness(name: HarnessName, explicit: Path | None = None) -> Path:
    """``--harness-bin``, else the harness's program on PATH, else the pinned install."""
    if explicit is not None:
        path = Path(os.path.abspath(explicit))
        if not path.is_file() or not os.access(path, os.X_OK):
            raise HarnessError(f"--harness-bin: {explicit} is not an executable file")
        return path
    on_path = find_program(PROGRAM[name])
    if on_path is not None:
        return on_path
    pinned = installed_harness(name)
    if pinned is None:
        raise HarnessError(f"cannot find {PROGRAM[name]!r} ({name}) on PATH or in leanrig's cache")
    return pinned


def withdraw_keys(environ: MutableMapping[str, str], also: str | None = None) -> None:
    """Remove every model key variable (``KEY_NAMES`` and ``also``) once the gateway holds it."""
    for name in {*KEY_NAMES, *([also] if also else [])}:
        environ.pop(name, None)


def harness_version(program: Path, timeout: float = 60.0, sandbox: Sequence[str] = ()) -> str:
    """The first line of ``program --version``, untrusted: under ``sandbox``, with no model key."""
    base = {k: v for k, v in os.environ.items() if k not in KEY_NAMES and k not in HOME_VARS}
    with tempfile.TemporaryDirectory(prefix="leanrig-probe-") as scratch:
        home = Path("/tmp") if sandbox else Path(scratch)
        env = {**base, **home_env(home), "NO_COLOR": "1"}
        try:
            done = subprocess.run(
                [*sandbox, str(program), "--version"],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
                env=env,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HarnessError(f"{program} --version failed: {exc}") from exc
    line = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0 or not line:
        raise HarnessError(f"{program} --version failed (exit {done.returncode})")
    return line[0].strip()


def claude_code(
    program: Path, a: PresetInputs, *, model: str, reasoning: str | None, key_var: str | None
) -> Launch:
    """``claude -p`` with only leanrig's MCP tools and tool search; JSON output with its usage."""
    config_dir = a.home / ".claude"
    mcp = a.home / "leanrig-mcp.json"
    server = {
        "type": "stdio",
        "command": a.mcp_command[0],
        "args": a.mcp_command[1:],
        "env": a.mcp_env,
    }
    config = {"mcpServers": {MCP_SERVER: server}}
    argv = [
        str(program),
        "-p",
        a.prompt,
        "--model",
        model,
        "--mcp-config",
        str(mcp),
        "--strict-mcp-config",
        "--tools",
        "ToolSearch",
        "--allowedTools",
        f"mcp__{MCP_SERVER}",
        "--output-format",
        "json",
        *(["--effort", reasoning] if reasoning else []),
    ]
    # The variable picks the header: x-api-key (ANTHROPIC_API_KEY) or a bearer token.
    key_env = "ANTHROPIC_API_KEY" if key_var == "ANTHROPIC_API_KEY" else "ANTHROPIC_AUTH_TOKEN"
    env = {
        **home_env(a.home),
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "ANTHROPIC_BASE_URL": a.model_url,
        key_env: KEY_PLACEHOLDER,
        # Small-model calls go to the same model (a vendor endpoint has no Haiku); no telemetry.
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "MCP_TIMEOUT": "60000",
        "MCP_TOOL_TIMEOUT": str(int(a.time_limit * 1000)),
    }
    text = orjson.dumps(config, option=orjson.OPT_INDENT_2).decode()
    return Launch(argv, env, {mcp: text, config_dir / ".keep": ""})


def codex_config(a: PresetInputs, *, model: str, reasoning: str | None) -> str:
    """``CODEX_HOME/config.toml``: the model via the gateway, MCP the only tool, no analytics."""
    top: dict[str, object] = {
        "model": model,
        "model_provider": "leanrig",
        "approval_policy": "never",
        "sandbox_mode": "read-only",
        "web_search": "disabled",
        "check_for_update_on_startup": False,
    }
    if reasoning:
        top["model_reasoning_effort"] = reasoning
    provider = {
        "name": "leanrig gateway",
        "base_url": f"{a.model_url}/v1",
        "wire_api": "responses",
        "env_key": "LEANRIG_MODEL_KEY",
        "request_max_retries": 4,
        "stream_max_retries": 4,
    }
    # `required`: Codex waits for the server before its first model request, or finds no tools.
    server = {
        "command": a.mcp_command[0],
        "args": a.mcp_command[1:],
        "env": a.mcp_env,
        "cwd": str(a.workspace),
        "required": True,
        "startup_timeout_sec": 60,
        "tool_timeout_sec": max(60, int(a.time_limit)),
    }
    return tomli_w.dumps(
        {
            **top,
            "analytics": {"enabled": False},
            "agents": {"enabled": False},
            "features": {f: False for f in CODEX_FEATURES_OFF},
            "model_providers": {"leanrig": provider},
            "mcp_servers": {MCP_SERVER: server},
        }
    )


def codex(program: Path, a: PresetInputs, *, model: str, reasoning: str | None) -> Launch:
    """``codex exec --json`` in the workspace with a per-attempt ``CODEX_HOME``."""
    codex_home = a.home / ".codex"
    argv = [
        str(program),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--cd",
        str(a.workspace),
        a.prompt,
    ]
    env = {**home_env(a.home), "CODEX_HOME": str(codex_home), "LEANRIG_MODEL_KEY": KEY_PLACEHOLDER}
    return Launch(
        argv, env, {codex_home / "config.toml": codex_config(a, model=model, reasoning=reasoning)}
    )


def plan_launch(
    name: HarnessName,
    program: Path,
    attempt: PresetInputs,
    *,
    model: str,
    reasoning: str | None,
    key_var: str | None,
) -> Launch:
    """The attempt's harness command, environment and configuration files (none written)."""
    if name == "claude-code":
        return claude_code(program, attempt, model=model, reasoning=reasoning, key_var=key_var)
    return codex(program, attempt, model=model, reasoning=reasoning)


def key_variable(name: HarnessName, explicit: str | None, env: Mapping[str, str]) -> str | None:
    """The variable holding the model's key: ``--model-key-env``, else the harness's; None: none."""
    if explicit is not None:
        return explicit
    return next((v for v in KEY_VARS[name] if env.get(v)), None)


def _ints(obj: object, *keys: str) -> int | None:
    if not isinstance(obj, dict):
        return None
    total, seen = 0, False
    for key in keys:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            total, seen = total + value, True
    return total if seen else None


def harness_usage(name: HarnessName, output: bytes) -> Usage | None:
    """The harness's own usage report from its stdout, in leanrig's convention; None if none."""
    totals: dict[str, int] = {}
    cost: float | None = None
    found = False
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        if name == "claude-code" and event.get("type") == "result":
            u = event.get("usage")
            parts = {
                "input_tokens": _ints(
                    u, "input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"
                ),
                "cached_input_tokens": _ints(u, "cache_read_input_tokens"),
                "output_tokens": _ints(u, "output_tokens"),
            }
            totals = {k: v for k, v in parts.items() if v is not None}  # the last one wins
            c = event.get("total_cost_usd")
            cost = float(c) if isinstance(c, int | float) and c >= 0 else None
            found = True
        elif name == "codex" and event.get("type") == "turn.completed":
            u = event.get("usage")
            for key, source in (
                ("input_tokens", "input_tokens"),
                ("cached_input_tokens", "cached_input_tokens"),
                ("output_tokens", "output_tokens"),
                ("reasoning_tokens", "reasoning_output_tokens"),
            ):
                value = _ints(u, source)
                if value is not None:
                    totals[key] = totals.get(key, 0) + value
            found = True
    if not found:
        return None
    try:
        return Usage(**totals, cost_usd=cost)
    except ValueError:
        return None


def usage_mismatch(gateway: Usage, harness: Usage | None) -> list[str]:
    """Where the harness's own count differs from the gateway's, one line each."""
    if harness is None:
        return []
    out = []
    for key in ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens"):
        mine, theirs = getattr(gateway, key), getattr(harness, key)
        if mine is not None and theirs is not None and mine != theirs:
            out.append(f"{key}: gateway {mine}, harness {theirs}")
    return out


__all__ = [
    "HARNESSES",
    "KEY_PLACEHOLDER",
    "VENDOR_ENDPOINT",
    "HarnessError",
    "HarnessName",
    "Launch",
    "PresetInputs",
    "codex_config",
    "find_harness",
    "harness_usage",
    "harness_version",
    "installed_harness",
    "key_variable",
    "plan_launch",
    "usage_mismatch",
]
