"""How an attempt's agent reaches its model: network policy, gateway route, socket, URL, usage.

Must not hold a key anywhere but the route and the gateway, or decide the verdict."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson

from ..models import MODEL_IO_FILE, ModelGateway
from ..servers import listen_local, socket_url
from .attempt_dir import ATTEMPT_TOKEN_VAR, AttemptDir, relay_command
from .harness import (
    KEY_PLACEHOLDER,
    KEY_VARS,
    VENDOR_ENDPOINT,
    HarnessName,
    Launch,
    PresetInputs,
    key_variable,
    plan_launch,
)
from .options import NetworkPolicy, RunError, RunOptions, records_model_io
from .results import HarnessInfo, Usage

MODEL_SOCKET_FILE: Final = "model.sock"


MODEL_PORT: Final = 4141  # the gateway's port on the sandbox's own loopback


FORWARD_SCRIPT: Final = Path(__file__).resolve().with_name("port_forward.py")


MODEL_CALLS_FILE: Final = "model_calls.jsonl"


@dataclass(frozen=True, slots=True)
class ModelRoute:
    """A gateway per attempt forwards to ``upstream``, adding the runner's key on the way out."""

    upstream: str
    key_var: str | None
    key: str | None = field(default=None, repr=False)
    record_io: bool = False  # each call's request and answer kept (`--record-model-io`)


@dataclass(frozen=True, slots=True)
class HarnessSetup:
    name: HarnessName
    program: Path
    version: str


def network_policy(options: RunOptions) -> NetworkPolicy:
    """The agent's network: as given, else its model only when it has one, else none."""
    if options.agent_network is not None:
        return options.agent_network
    return "model" if options.harness or options.model_endpoint else "none"


def model_route(options: RunOptions, env: dict[str, str]) -> ModelRoute | None:
    """Where the gateway forwards (None: no gateway), refusing settings that cannot work."""
    policy = network_policy(options)
    if options.harness is not None and policy == "none":
        raise RunError(
            "--agent-network none leaves a harness no way to its model",
            hint="leave --agent-network out (model: the gateway only), or give all",
        )
    endpoint = options.model_endpoint
    if endpoint is None and options.harness is not None:
        endpoint = VENDOR_ENDPOINT[options.harness]
    if endpoint is None:
        if policy == "model":
            raise RunError("--agent-network model needs a model: give --model-endpoint URL")
        return None
    if policy == "none":
        raise RunError("--model-endpoint with --agent-network none: the agent could not reach it")
    if not endpoint.startswith(("http://", "https://")):
        raise RunError(f"--model-endpoint {endpoint!r} is not an http(s) URL")
    var = (
        key_variable(options.harness, options.model_key_env, env)
        if options.harness is not None
        else options.model_key_env
    )
    key = env.get(var) if var else None
    if var is not None and not key:
        raise RunError(f"--model-key-env {var}: the variable is not set (or empty)")
    return ModelRoute(upstream=endpoint, key_var=var, key=key, record_io=records_model_io(options))


def gateway_usage(gateway: ModelGateway) -> Usage:
    """The attempt's tokens summed over the gateway's answered model calls; None where unknown."""
    answered = [
        c.usage
        for c in gateway.calls
        if c.kind == "model" and c.status is not None and 200 <= c.status < 300
    ]

    def total(key: str) -> int | None:
        values = [getattr(u, key) for u in answered]
        return None if any(v is None for v in values) else sum(values)  # no call: 0

    return Usage(
        input_tokens=total("input_tokens"),
        cached_input_tokens=total("cached_input_tokens"),
        output_tokens=total("output_tokens"),
        reasoning_tokens=total("reasoning_tokens"),
    )


def read_capped(path: Path, cap: int = 16 * 2**20) -> bytes:
    try:
        with path.open("rb") as f:
            return f.read(cap)
    except OSError:
        return b""


def open_gateway(
    route: ModelRoute | None, client: object, ws: AttemptDir, *, forwarded: bool
) -> tuple[ModelGateway | None, socket.socket | None, str | None]:
    """The attempt's gateway, listener and URL (``forwarded``: via ``MODEL_PORT``), or Nones."""
    if route is None:
        return None, None, None
    io_path = ws.root / MODEL_IO_FILE if route.record_io else None
    gateway = ModelGateway(
        upstream=route.upstream,
        client=client,  # type: ignore[arg-type]
        calls_path=ws.root / MODEL_CALLS_FILE,
        placeholder=KEY_PLACEHOLDER,
        key=route.key,
        io_path=io_path,
    )
    if forwarded:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(ws.socket.parent / MODEL_SOCKET_FILE))
        listener.listen(64)
        listener.setblocking(False)
        return gateway, listener, f"http://127.0.0.1:{MODEL_PORT}"
    listener = listen_local(0)
    return gateway, listener, socket_url(listener)


def forwarder(ws: AttemptDir, python: str) -> list[str]:
    """The command prefix serving the gateway on the sandbox's loopback, then running the agent."""
    return [
        python,
        "-I",
        "-S",
        str(FORWARD_SCRIPT),
        str(MODEL_PORT),
        str(ws.socket.parent / MODEL_SOCKET_FILE),
        "--",
    ]


def harness_attempt(ws: AttemptDir, home: Path, model_url: str, time_limit: float) -> PresetInputs:
    return PresetInputs(
        prompt=ws.prompt.read_text(encoding="utf-8"),
        workspace=ws.workspace,
        home=home,
        mcp_command=relay_command(ws.socket),
        mcp_env={ATTEMPT_TOKEN_VAR: ws.token},
        model_url=model_url,
        time_limit=time_limit,
    )


def launch_harness(
    harness: HarnessSetup,
    route: ModelRoute | None,
    options: RunOptions,
    ws: AttemptDir,
    home: Path,
    model_url: str,
) -> Launch:
    """The harness's command; its configuration written into ``home`` and to ``harness.json``."""
    home.mkdir(parents=True, exist_ok=True)
    started = plan_launch(
        harness.name,
        harness.program,
        harness_attempt(ws, home, model_url, options.time_limit),
        model=options.model or "",
        reasoning=options.reasoning,
        key_var=route.key_var if route else None,
    ).write_files()
    record = {
        "argv": started.argv,
        "env": started.env,
        "files": {str(p): t for p, t in started.files.items()},
    }
    (ws.root / "harness.json").write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))
    return started


def model_env(env: dict[str, str], route: ModelRoute | None, model_url: str | None) -> None:
    """Replaces the model keys in ``env`` with the gateway's URL and placeholder key."""
    if route is None or model_url is None:
        return
    for var in {*(v for vs in KEY_VARS.values() for v in vs), route.key_var}:
        if var is not None:
            env.pop(var, None)
    env["LEANRIG_MODEL_URL"] = model_url
    env["LEANRIG_MODEL_KEY"] = KEY_PLACEHOLDER


def harness_record(
    harness: HarnessSetup | None, route: ModelRoute | None, options: RunOptions
) -> HarnessInfo | None:
    """run.json's harness: what ran, with its command and configuration as ``{…}`` templates."""
    if harness is None:
        return None
    template = PresetInputs(
        prompt="{prompt}",
        workspace=Path("{workspace}"),
        home=Path("{home}"),
        mcp_command=relay_command(Path("{mcp_socket}")),
        mcp_env={ATTEMPT_TOKEN_VAR: "{token}"},
        model_url="{model_url}",
        time_limit=options.time_limit,
    )
    shown = plan_launch(
        harness.name,
        harness.program,
        template,
        model=options.model or "",
        reasoning=options.reasoning,
        key_var=route.key_var if route else None,
    )
    return HarnessInfo(
        name=harness.name,
        version=harness.version,
        program=str(harness.program),
        model=options.model or "",
        reasoning=options.reasoning,
        command=shown.argv,
        env=shown.env,
        files={str(p): t for p, t in shown.files.items()},
    )
