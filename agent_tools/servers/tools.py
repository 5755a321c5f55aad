"""The wires' side of the tool catalogue: validate a call's arguments, run it, dump its result.

MCP and JSON-RPC both go through here, so they accept, reject and answer alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..sessions import (
    InvalidArguments,
    ProofService,
    ToolDef,
    ToolError,
    ToolFailure,
    parse_input,
    tools_for,
)

ToolSpec = ToolDef


def service_tools(service: ProofService) -> list[ToolDef]:
    """The tools ``service`` serves: the library tools only in the LAD condition."""
    return tools_for(service.library is not None)


def service_tool(service: ProofService, name: str) -> ToolDef | None:
    """The tool ``name`` if ``service`` serves it (None: unknown here)."""
    return next((t for t in service_tools(service) if t.name == name), None)


def validate_params(spec: ToolDef, params: Any) -> dict[str, Any]:
    """Check JSON params against the tool's input model, or raise `InvalidArguments` on a field."""
    model = parse_input(spec, params)
    return {name: getattr(model, name) for name in type(model).model_fields}


def bind(service: ProofService, spec: ToolDef, client: str) -> Callable[..., Awaitable[Any]]:
    """The tool as a coroutine function over validated params, returning its JSON result."""
    method = getattr(service, spec.name)

    async def call(**kwargs: Any) -> dict[str, Any]:
        if spec.takes_client:
            kwargs["client"] = client
        result = await method(**kwargs)
        dumped: dict[str, Any] = result.model_dump(mode="json")
        return dumped

    return call


async def call_tool(
    service: ProofService, spec: ToolDef, arguments: Any, client: str
) -> dict[str, Any]:
    """Validate, run and dump one call; every failure is a `ToolError` (refusals ledgered first)."""
    try:
        params = validate_params(spec, arguments)
    except InvalidArguments as exc:
        service.record_invalid(spec.name, arguments, client, exc)
        raise
    result: dict[str, Any] = await bind(service, spec, client)(**params)
    return result


def failure(exc: ToolError) -> ToolFailure:
    """The one error shape both wires carry: ``{code, message, hint}``."""
    return ToolFailure(code=exc.code, message=exc.message, hint=exc.hint or "")


__all__ = [
    "ToolSpec",
    "bind",
    "call_tool",
    "failure",
    "service_tool",
    "service_tools",
    "validate_params",
]
