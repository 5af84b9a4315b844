"""What a model reads: compact, lossless views of the canonical payloads and contracts.

The canonical Verifier input (`canonical_bytes(VerifierInput)`) is what is hashed, stored and
audited; it repeats, on every evidence item, the source invocation's tool name, evidence status
and query scope, and an excerpt bound to several claims once per claim. The model reads a view
of the same bytes in which each source invocation is written once with its excerpts
underneath, each excerpt once with the evidence ids and claims it is bound to:

    "verified_evidence": [{"invocation_id", "tool_name", "evidence_status", "scope",
                           "evidence": [{"path", "matched_text", "untrusted",
                                         "cited_by": {evidence_id: claim_id, ...}}]}]

An excerpt of the source's own scope (a `$.scope.…` path whose matched text is the scope's
value there, as NO_EVIDENCE bindings are) leaves `matched_text` out: it is in `scope`. Every
evidence item still carries, through its source and excerpt, its evidence id, claim id, source
invocation id, tool name, raw path and matched text; nothing is dropped
(`verifier_input_from_view` rebuilds the canonical bytes exactly), and the view of the same
bytes is always the same text, so a technical retry sends byte-identical input. Null fields
are left out of the view.

Answer-tool schemas are the contracts' JSON Schemas without the keywords a model does not need
(`title`, null defaults) and without fields the pipeline derives itself (the Verifier's
`facts_checked`).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import BaseModel

JSON = dict[str, Any]

_EVIDENCE_SOURCE = ("invocation_id", "tool_name", "evidence_status", "scope")
_SCOPE_PATH = "$.scope."
_DERIVED_FIELDS = {"VerifierOutput": ("facts_checked",)}
"""Output fields the pipeline computes itself: not asked of the model."""


def dumps(value: Any) -> str:
    """Compact, key-sorted JSON (stable bytes for stable requests)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def model_view(role: str, payload: bytes) -> str:
    """The text `role` reads for the canonical `payload`."""
    if role != "verifier":
        return payload.decode("utf-8")
    document = json.loads(payload)
    sources: dict[str, JSON] = {}
    excerpts: dict[tuple[str, str, str], JSON] = {}
    for item in document.get("verified_evidence") or []:
        source = sources.get(item["invocation_id"])
        if source is None:
            source = {key: item[key] for key in _EVIDENCE_SOURCE}
            source["evidence"] = []
            sources[item["invocation_id"]] = source
        key = (item["invocation_id"], item["path"], item["matched_text"])
        excerpt = excerpts.get(key)
        if excerpt is None:
            excerpt = {"path": item["path"]}
            if _in_scope(source["scope"], item["path"]) != item["matched_text"]:
                excerpt["matched_text"] = item["matched_text"]
            if item.get("untrusted"):
                excerpt["untrusted"] = item["untrusted"]
            excerpt["cited_by"] = {}
            excerpts[key] = excerpt
            source["evidence"].append(excerpt)
        excerpt["cited_by"][item["evidence_id"]] = item["claim_id"]
    document["verified_evidence"] = list(sources.values())
    return dumps(_without_nulls(document))


def verifier_input_from_view(text: str) -> bytes:
    """The canonical Verifier input bytes a view was made from (the inverse of `model_view`)."""
    from models.verifier import VerifierInput
    from pipeline.serialization import canonical_bytes

    document = json.loads(text)
    items = [
        {**{key: source.get(key) for key in _EVIDENCE_SOURCE},
         "evidence_id": evidence_id, "claim_id": claim_id, "path": excerpt["path"],
         "matched_text": excerpt["matched_text"] if "matched_text" in excerpt
         else _in_scope(source.get("scope"), excerpt["path"]),
         "untrusted": excerpt.get("untrusted")}
        for source in document.get("verified_evidence") or []
        for excerpt in source["evidence"]
        for evidence_id, claim_id in excerpt["cited_by"].items()
    ]
    items.sort(key=lambda item: _evidence_number(item["evidence_id"]))
    document["verified_evidence"] = items
    return canonical_bytes(VerifierInput.model_validate(document))


def _in_scope(scope: Any, path: str) -> str | None:
    """The string at a `$.scope.a.b` path of a source's scope, or None."""
    if not path.startswith(_SCOPE_PATH):
        return None
    value = scope
    for part in path[len(_SCOPE_PATH):].split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value if isinstance(value, str) else None


def _evidence_number(evidence_id: str) -> tuple[int, str]:
    digits = evidence_id.lstrip("E")
    return (int(digits), evidence_id) if digits.isdigit() else (1 << 30, evidence_id)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@cache
def answer_schema(contract: type[BaseModel]) -> JSON:
    """The contract's JSON Schema as an answer tool's `input_schema`, trimmed for the model."""
    schema = contract.model_json_schema()
    for name in _DERIVED_FIELDS.get(contract.__name__, ()):
        schema["properties"].pop(name, None)
        if name in schema.get("required", []):
            schema["required"].remove(name)
    trimmed: JSON = _trim(schema)
    _drop_unused_defs(trimmed)
    return trimmed


def _trim(node: Any, *, in_properties: bool = False) -> Any:
    """Drop `title` and null `default` keywords; property names (which may be "title") stay."""
    if isinstance(node, list):
        return [_trim(item) for item in node]
    if not isinstance(node, dict):
        return node
    if in_properties:  # a map of property name -> schema
        return {name: _trim(schema) for name, schema in node.items()}
    out = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        out[key] = _trim(value, in_properties=key in ("properties", "$defs"))
    return out


def _drop_unused_defs(schema: JSON) -> None:
    defs = schema.get("$defs")
    if not defs:
        return
    while True:
        text = json.dumps({k: v for k, v in schema.items() if k != "$defs"}) + json.dumps(
            defs)
        unused = [name for name in defs if f'"#/$defs/{name}"' not in text]
        if not unused:
            break
        for name in unused:
            del defs[name]
    if not defs:
        del schema["$defs"]
