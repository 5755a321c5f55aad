"""The tool catalogue without Lean: closed strict inputs, schemas OpenAI strict mode, Gemini and
MCP accept, and docs/agent-tools.md's table (regenerate: ``python -m tests.test_catalogue``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from agent_tools.sessions import (
    ALL_TOOLS,
    LIBRARY_TOOLS,
    MAX_CANDIDATES,
    TOOLS,
    InvalidArguments,
    ToolDef,
    input_schema,
    output_schema,
    parse_input,
    tools_for,
)
from agent_tools.sessions.tool_inputs import MAX_BODY_CHARS, MAX_LIBRARY_RESULTS

DOCS = Path(__file__).resolve().parent.parent / "docs" / "agent-tools.md"
BEGIN, END = "<!-- tools:begin (generated from the catalogue models) -->", "<!-- tools:end -->"

# OpenAI strict function calling: objects list every property in `required` and close with
# `additionalProperties: false`; the root is an object; only these keywords are supported.
OPENAI_KEYWORDS = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "title",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
}
# Gemini FunctionDeclaration.parameters (OpenAPI 3.0 subset): every node has a `type`, objects
# non-empty `properties`; no `$ref`, `additionalProperties` or type arrays.
GEMINI_KEYWORDS = {
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
}
MCP_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _nodes(schema: Any, path: str = "$") -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(schema, dict):
        return []
    out = [(path, schema)]
    for name, sub in (schema.get("properties") or {}).items():
        out += _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        out += _nodes(schema["items"], f"{path}[]")
    for i, sub in enumerate(schema.get("anyOf") or []):
        out += _nodes(sub, f"{path}|{i}")
    return out


def openai_strict_problems(schema: dict[str, Any]) -> list[str]:
    problems = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: root must be an object, not anyOf")
    for path, node in _nodes(schema):
        problems += [f"{path}: keyword {k} not supported" for k in set(node) - OPENAI_KEYWORDS]
        if node.get("type") == "object":
            if "properties" not in node:
                problems.append(f"{path}: object schema missing properties")
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: additionalProperties must be false")
            if set(node.get("required", [])) != set(node.get("properties", {})):
                problems.append(f"{path}: every property must be required")
    return problems


def gemini_problems(schema: dict[str, Any]) -> list[str]:
    problems = []
    for path, node in _nodes(schema):
        problems += [f"{path}: keyword {k} not supported" for k in set(node) - GEMINI_KEYWORDS]
        if not isinstance(node.get("type"), str):
            problems.append(f"{path}: missing type (one type name)")
        if node.get("type") == "object" and not node.get("properties"):
            problems.append(f"{path}: properties should be non-empty for OBJECT type")
        if "enum" in node and node.get("type") != "string":
            problems.append(f"{path}: enum only allowed for STRING type")
    return problems


def mcp_problems(name: str, schema: dict[str, Any], output: dict[str, Any]) -> list[str]:
    problems = []
    if not MCP_TOOL_NAME.match(name):
        problems.append("tool name outside [A-Za-z0-9_.-]{1,128}")
    for kind, s in (("inputSchema", schema), ("outputSchema", output)):
        if s.get("type") != "object":
            problems.append(f"{kind}: type must be object")
        try:
            jsonschema.Draft202012Validator.check_schema(s)
        except jsonschema.SchemaError as exc:
            problems.append(f"{kind}: not a valid JSON Schema: {exc.message}")
    if "$ref" in str(schema) or "anyOf" in str(schema):
        problems.append("inputSchema: not plain (uses $ref or anyOf)")
    return problems


# Where the rules conflict, the choices docs/agent-tools.md documents: closed objects over
# Gemini's subset, no empty `properties`, and the 1 MB limit declared as maxLength.
NO_ARGUMENTS = {"list_tasks", "server_status"}
BODY_FIELDS = {"set_proof": ["body"], "replace_in_proof": ["old", "new"], "try_proofs": []}


def expected_openai(tool: ToolDef) -> set[str]:
    if tool.name in NO_ARGUMENTS:
        return {"$: object schema missing properties"}
    fields = [f"$.{f}" for f in BODY_FIELDS.get(tool.name, [])]
    out = {f"{p}: keyword maxLength not supported" for p in fields}
    if tool.name == "replace_in_proof":
        out.add("$.old: keyword minLength not supported")
    if tool.name == "set_statement":
        out |= {f"$.statement: keyword {k} not supported" for k in ("maxLength", "minLength")}
    if tool.name == "try_proofs":
        out.add("$.bodies[]: keyword maxLength not supported")
    return out


NULLABLE_FIELDS = {"get_completions": ["line", "column", "prefix"]}


def expected_gemini(tool: ToolDef) -> set[str]:
    out = {"$: keyword additionalProperties not supported"}
    out |= {f"$.{f}: missing type (one type name)" for f in NULLABLE_FIELDS.get(tool.name, [])}
    if tool.name in NO_ARGUMENTS:
        out.add("$: properties should be non-empty for OBJECT type")
    return out


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_input_schemas_meet_openai_strict_rules_but_the_documented_choices(tool: ToolDef) -> None:
    assert set(openai_strict_problems(input_schema(tool))) == expected_openai(tool)


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_input_schemas_meet_gemini_rules_but_the_documented_choices(tool: ToolDef) -> None:
    assert set(gemini_problems(input_schema(tool))) == expected_gemini(tool)


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_tools_meet_the_mcp_rules(tool: ToolDef) -> None:
    assert mcp_problems(tool.name, input_schema(tool), output_schema(tool)) == []


def test_the_checkers_see_violations() -> None:
    loose = {"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}]}}}
    assert "$: additionalProperties must be false" in openai_strict_problems(loose)
    assert "$: every property must be required" in openai_strict_problems(loose)
    assert "$.a: missing type (one type name)" in gemini_problems(loose)
    assert "$: properties should be non-empty for OBJECT type" in gemini_problems(
        {"type": "object", "properties": {}}
    )
    assert mcp_problems("bad name", {"type": "string"}, {"type": "object"})


def test_no_tool_publishes_an_empty_properties_object() -> None:
    for tool in ALL_TOOLS:
        assert input_schema(tool).get("properties", None) != {}, tool.name


def test_limits_are_declared_in_the_schemas() -> None:
    by_name = {t.name: input_schema(t) for t in TOOLS}
    bodies = by_name["try_proofs"]["properties"]["bodies"]
    assert (bodies["minItems"], bodies["maxItems"]) == (1, MAX_CANDIDATES)
    assert by_name["get_goals"]["properties"]["line"]["minimum"] == 1
    assert by_name["get_goals"]["properties"]["column"]["minimum"] == 1
    assert by_name["set_proof"]["properties"]["body"]["maxLength"] == MAX_BODY_CHARS
    search = input_schema(next(t for t in LIBRARY_TOOLS if t.name == "search_library"))
    assert search["properties"]["limit"]["minimum"] == 1
    assert search["properties"]["limit"]["maximum"] == MAX_LIBRARY_RESULTS
    assert search["required"] == ["query", "limit"]


def test_the_library_tools_exist_only_in_the_lad_condition() -> None:
    """Baseline serves TOOLS; LAD adds exactly search_library and read_library."""
    assert {t.name for t in tools_for(False)} == {t.name for t in TOOLS}
    assert [t.name for t in tools_for(True) if t not in TOOLS] == [
        "search_library",
        "read_library",
    ]
    assert all(t.library and t.read_only and not t.takes_client for t in LIBRARY_TOOLS)
    assert not any(t.library for t in TOOLS)
    hit = output_schema(LIBRARY_TOOLS[0])["properties"]["results"]["items"]
    assert list(hit["properties"]) == ["name", "kind", "statement", "file", "line", "docstring"]
    assert "source" in output_schema(LIBRARY_TOOLS[1])["properties"]


def _tool(name: str) -> ToolDef:
    return next(t for t in ALL_TOOLS if t.name == name)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("get_goals", {"session_id": "s", "line": "8", "column": 1}, "`line` must be an integer"),
        (
            "get_goals",
            {"session_id": "s", "line": 0, "column": 1},
            "`line` must be an integer >= 1",
        ),
        ("get_goals", {"session_id": "s", "line": 1.0, "column": 1}, "`line` must be an integer"),
        ("set_proof", {"session_id": "s", "body": "x", "force": True}, "unknown argument `force`"),
        ("set_proof", {"session_id": "s"}, "missing argument `body`"),
        ("try_proofs", {"session_id": "s", "bodies": []}, "`bodies` needs 1 to 16 items (0 given)"),
        ("try_proofs", {"session_id": "s", "bodies": ["x"] * 17}, "(17 given)"),
        ("try_proofs", {"session_id": "s", "bodies": '["x"]'}, "`bodies` must be a list"),
        ("set_proof", {"session_id": "s", "body": "a" * (MAX_BODY_CHARS + 1)}, "over 1 MB"),
        ("list_tasks", {"verbose": True}, "unknown argument `verbose`"),
        ("list_tasks", [1], "must be a JSON object"),
        ("search_library", {"query": "x"}, "missing argument `limit`"),
        ("search_library", {"query": "x", "limit": 0}, "`limit` must be an integer >= 1"),
        ("search_library", {"query": "x", "limit": 51}, "`limit` must be an integer <= 50"),
        ("search_library", {"query": "x", "limit": "3"}, "`limit` must be an integer"),
        ("read_library", {"name": 3}, "`name` must be a string"),
    ],
)
def test_bad_arguments_are_refused_with_a_message_naming_the_field(
    tool: str, arguments: Any, message: str
) -> None:
    with pytest.raises(InvalidArguments) as info:
        parse_input(_tool(tool), arguments)
    assert message in info.value.message
    assert info.value.code == "invalid_argument" and isinstance(info.value, ValueError)


def test_good_arguments_pass_unchanged() -> None:
    args = parse_input(_tool("get_goals"), {"session_id": "s", "line": 3, "column": 7})
    assert args.model_dump() == {"session_id": "s", "line": 3, "column": 7}
    assert parse_input(_tool("list_tasks"), None).model_dump() == {}


def _constraint(name: str, prop: dict[str, Any]) -> str:
    if prop.get("type") == "array":
        return f"`{name}[]` ({prop['minItems']}–{prop['maxItems']})"
    notes = []
    if "minimum" in prop and "maximum" in prop:
        notes.append(f"{prop['minimum']}–{prop['maximum']}")
    elif "minimum" in prop:
        notes.append(f"≥ {prop['minimum']}")
    if prop.get("minLength") == 1:
        notes.append("non-empty")
    if prop.get("maxLength") == MAX_BODY_CHARS:
        notes.append("≤ 1 MB")
    return f"`{name}`" + (f" ({', '.join(notes)})" if notes else "")


def _shape(schema: dict[str, Any], depth: int = 0) -> str:
    parts = []
    for name, prop in schema.get("properties", {}).items():
        inner = prop.get("items") if prop.get("type") == "array" else prop
        nested = isinstance(inner, dict) and "properties" in inner and depth < 1
        if nested and inner is not None:
            shape = _shape(inner, depth + 1)
            parts.append(f"{name}: [{shape}]" if inner is not prop else f"{name}: {shape}")
        else:
            parts.append(name)
    return "{" + ", ".join(parts) + "}"


def tools_table() -> str:
    rows = ["| tool | arguments | result | read-only |", "|---|---|---|---|"]
    for tool in ALL_TOOLS:
        props = input_schema(tool).get("properties", {})
        args = ", ".join(_constraint(n, p) for n, p in props.items()) or "—"
        shape = _shape(output_schema(tool)).replace("|", "\\|")
        name = f"`{tool.name}`" + (" (LAD only)" if tool.library else "")
        rows.append(f"| {name} | {args} | `{shape}` | {'yes' if tool.read_only else ''} |")
    return "\n".join(rows)


def test_docs_list_every_tool_as_the_models_define_it() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert BEGIN in text and END in text, "docs/agent-tools.md lost its generated-table markers"
    current = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert current == tools_table(), "regenerate: .venv/bin/python -m tests.test_catalogue"


if __name__ == "__main__":
    text = DOCS.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    DOCS.write_text(f"{head}{BEGIN}\n{tools_table()}\n{END}{rest.split(END, 1)[1]}", "utf-8")
    sys.exit(0)


def test_counts_of_tools_in_the_docs_are_the_catalogues() -> None:
    """Every "N tools" or "leanrig's N (or M with LAD)" in README.md and docs/ is a count the
    catalogue serves."""
    import re

    from agent_tools.sessions import LIBRARY_TOOLS, TOOLS

    counts = {len(TOOLS), len(TOOLS) + len(LIBRARY_TOOLS)}
    root = DOCS.parents[1]
    pattern = re.compile(r"leanrig's (\d+) \(or (\d+) with LAD\)|\b(\d+) (?:MCP )?tools\b")
    found = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for match in pattern.finditer(page.read_text(encoding="utf-8")):
            found += [(page.name, int(n)) for n in match.groups() if n is not None]
    assert found, "no tool count in the docs any more: drop this test"
    assert all(n in counts for _, n in found), (found, counts)
