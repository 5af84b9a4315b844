"""Default responders: what answers a request when its role has no scripted reply left.

A responder is a callable `(request_json) -> reply` (a reply in any form `replies` accepts) or
None to say "no reply", which the server turns into a 500 api_error naming the role. Spawned
servers name theirs by dotted path, `package.module:function`, or `minimal` for the built-in
`minimal_responder`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from fake_anthropic.tokens import JSON

Responder = Callable[[JSON], object]

_FORMAT_EXAMPLES = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00Z",
    "uri": "https://example.invalid/",
    "email": "a@example.invalid",
    "uuid": "00000000-0000-0000-0000-000000000000",
}


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target[part]
    return _resolve(target, root)


def _first_type(schema: Mapping[str, Any]) -> object:
    declared = schema.get("type")
    if isinstance(declared, list):
        return next((t for t in declared if t != "null"), "null")
    if declared is None and "properties" in schema:
        return "object"
    return declared


def _minimal_number(schema: Mapping[str, Any], declared: object) -> int | float:
    if "minimum" in schema:
        value = schema["minimum"]
    elif "exclusiveMinimum" in schema:
        value = schema["exclusiveMinimum"] + 1
    else:
        value = 0
    return int(value) if declared == "integer" else float(value)


def minimal_instance(schema: Mapping[str, Any], root: Mapping[str, Any] | None = None) -> object:
    """A small instance that validates against `schema` (the subset pydantic emits)."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    for key in ("const", "default"):
        if key in schema:
            return schema[key]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0], root)
    declared = _first_type(schema)
    if declared == "object":
        properties = schema.get("properties") or {}
        return {
            name: minimal_instance(properties.get(name, {}), root)
            for name in schema.get("required") or []
        }
    if declared == "array":
        item = minimal_instance(schema.get("items") or {}, root)
        return [item] * int(schema.get("minItems", 0))
    if declared == "string":
        example = _FORMAT_EXAMPLES.get(str(schema.get("format")), "")
        return example or "x" * int(schema.get("minLength", 0))
    if declared in ("integer", "number"):
        return _minimal_number(schema, declared)
    if declared == "boolean":
        return False
    return None


def minimal_responder(request: JSON) -> object:
    """Answers a forced tool (or `any`: the first tool) with a minimal valid input; else "ok"."""
    tools = [t for t in request.get("tools") or [] if isinstance(t, Mapping)]
    choice = request.get("tool_choice") or {}
    tool = None
    if choice.get("type") == "tool":
        tool = next((t for t in tools if t.get("name") == choice.get("name")), None)
    elif choice.get("type") == "any" and tools:
        tool = tools[0]
    if tool is None:
        return {"text": "ok"}
    return {"tool_use": {"name": tool["name"], "input": minimal_instance(tool["input_schema"])}}


def load_responder(spec: str | None) -> Responder | None:
    """The responder a dotted path names (`module:function`, or `minimal`); None for none."""
    if not spec or spec == "none":
        return None
    if spec == "minimal":
        return minimal_responder
    module_name, _, attribute = spec.partition(":")
    if not attribute:
        raise ValueError(f"a responder is 'module:function' or 'minimal', not {spec!r}")
    responder = getattr(importlib.import_module(module_name), attribute)
    if not callable(responder):
        raise ValueError(f"{spec} is not callable")
    return responder  # type: ignore[no-any-return]
