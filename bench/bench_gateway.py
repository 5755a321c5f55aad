"""What the run's model gateway adds to a model call: the replay model's streamed answers
(Anthropic Messages and OpenAI Responses, as Claude Code and Codex ask them) read directly and
through a `ModelGateway` on a Unix socket, interleaved call by call in one run. Medians and
p95 of the time to the first token (the first server-sent event with output) and of the whole
call, beside the direct reference; and the gateway's own CPU per call.

    python -m bench gateway      (in `make bench`; --quick: fewer calls)
"""

from __future__ import annotations

import socket
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx

from agent_tools.models import (
    ModelGateway,
    ReplayPlan,
    gateway_client,
    replay_app,
)
from agent_tools.servers import listen_local, serve_asgi

from .common import print_table, summarize, write_result

PLAN = {"calls": [{"tool": "open_task", "args": {"task_id": "{task}"}}, {"say": "done"}]}
PROMPT = "# Prove `main` (task `and_swap` of suite `demo`)\n" + "context " * 2000
REQUESTS = {
    "anthropic": ("/v1/messages?beta=true", {
        "model": "replay", "stream": True, "max_tokens": 1000,
        "messages": [{"role": "user", "content": PROMPT}],
    }),
    "responses": ("/v1/responses", {
        "model": "replay", "stream": True,
        "input": [{"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": PROMPT}]}],
    }),
}  # fmt: skip


async def _call(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[float, float]:
    """(ms to the first event with output, ms to the end) of one streamed call."""
    t0 = time.perf_counter()
    first = None
    async with client.stream("POST", path, json=body) as response:
        async for chunk in response.aiter_raw():
            if first is None and (b"delta" in chunk or b"output_item.added" in chunk):
                first = time.perf_counter()
    end = time.perf_counter()
    return ((first or end) - t0) * 1000, (end - t0) * 1000


async def measure(calls: int) -> dict[str, Any]:
    plan = ReplayPlan.from_json(PLAN)
    model_listener = listen_local(0)
    model_url = f"http://127.0.0.1:{model_listener.getsockname()[1]}"
    rows: dict[str, dict[str, list[float]]] = {
        api: {
            f"{api} {how} {what}": [] for how in ("direct", "gateway") for what in ("ttft", "call")
        }
        for api in REQUESTS
    }
    cpu_per_call = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        sock_path = Path(tmp) / "model.sock"
        gateway_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        gateway_listener.bind(str(sock_path))
        gateway_listener.listen(16)
        gateway_listener.setblocking(False)
        stop = anyio.Event()
        async with gateway_client() as upstream, anyio.create_task_group() as tg:
            gateway = ModelGateway(upstream=model_url, client=upstream,
                                   calls_path=Path(tmp) / "calls.jsonl", placeholder="k")  # fmt: skip
            up, gw = anyio.Event(), anyio.Event()
            tg.start_soon(serve_asgi, replay_app(plan), model_listener, stop, up.set)
            tg.start_soon(serve_asgi, gateway, gateway_listener, stop, gw.set)
            await up.wait()
            await gw.wait()
            transport = httpx.AsyncHTTPTransport(uds=str(sock_path))
            async with (
                httpx.AsyncClient(base_url=model_url, timeout=30) as direct,
                httpx.AsyncClient(transport=transport, base_url="http://gw", timeout=30) as via,
            ):
                for path, body in REQUESTS.values():  # warm both paths
                    await _call(direct, path, body)
                    await _call(via, path, body)
                cpu0 = time.process_time()
                for _ in range(calls):
                    for api, (path, body) in REQUESTS.items():
                        for how, client in (("direct", direct), ("gateway", via)):
                            ttft, total = await _call(client, path, body)
                            rows[api][f"{api} {how} ttft"].append(ttft)
                            rows[api][f"{api} {how} call"].append(total)
                # (this process hosts the client, the replay model and the gateway: the extra
                # CPU of the gateway rows is the gateway's and its client's)
                cpu_per_call = (time.process_time() - cpu0) * 1000 / (calls * len(REQUESTS) * 2)
            stop.set()
    out: dict[str, Any] = {}
    for api, variants in rows.items():
        for what in ("ttft", "call"):
            table = {name: summarize(s) for name, s in variants.items() if name.endswith(what)}
            print_table(f"{api}: {what}", table, reference=f"{api} direct {what}")
            out[f"{api} {what}"] = table
    added = {
        f"{api} call": round(
            out[f"{api} call"][f"{api} gateway call"]["median_ms"]
            - out[f"{api} call"][f"{api} direct call"]["median_ms"], 3)
        for api in REQUESTS
    }  # fmt: skip
    out["notes"] = {"gateway_adds_ms_median": added,
                    "process_cpu_ms_per_call_all_parties": round(cpu_per_call, 3),
                    "request_bytes": len(PROMPT)}  # fmt: skip
    print(f"\nthe gateway adds (median): {added}")
    return out


def run(quick: bool = False) -> dict[str, Any]:
    result = anyio.run(measure, 20 if quick else 200)
    write_result("gateway", result)
    return result
