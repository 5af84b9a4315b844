"""The model's view of the Verifier input is lossless, stable and smaller; answer schemas are
trimmed, never loosened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_anthropic import estimate_tokens
from models.agent import KnowledgeAnswer, Plan
from models.bundle import RunBundle
from models.composer import ComposerOutput
from models.executor import ExecutorEvidenceV2
from models.verifier import VerifierOutput
from pipeline.agents.views import answer_schema, model_view, verifier_input_from_view
from pipeline.executor_output import parse_executor_output
from pipeline.gatekeeper import gatekeep
from pipeline.serialization import canonical_bytes
from pipeline.verifier_input import build_verifier_input

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples" / "bundles").glob("*.json"))


def _verifier_payloads() -> list[object]:
    params = []
    for path in SAMPLES:
        bundle = RunBundle.model_validate_json(path.read_text())
        document = parse_executor_output(bundle.executor_output_raw).document
        if document is None:
            continue
        outcome = gatekeep(document, bundle.invocations)
        if outcome.result.severity.ceiling is None:
            continue
        payload = canonical_bytes(build_verifier_input(outcome, query=bundle.query))
        params.append(pytest.param(payload, id=path.stem))
    return params


@pytest.mark.parametrize("payload", _verifier_payloads())
def test_verifier_view__rebuilds_the_canonical_bytes_exactly(payload: bytes) -> None:
    view = model_view("verifier", payload)
    assert verifier_input_from_view(view) == payload
    assert model_view("verifier", payload) == view  # the same bytes, the same text
    assert estimate_tokens(view) < estimate_tokens(payload.decode())
    document = json.loads(view)
    canonical = json.loads(payload)
    assert set(document) == set(canonical) - {k for k, v in canonical.items() if v is None}
    for source in document["verified_evidence"]:
        assert {"invocation_id", "tool_name", "evidence_status", "scope"} <= set(source)
        for item in source["evidence"]:
            assert set(item) == {"evidence_id", "claim_id", "path", "matched_text"}


def test_other_roles_read_the_canonical_bytes() -> None:
    payload = b'{"verdict":"PASS","allowed_claims":[]}'
    assert model_view("composer", payload) == payload.decode()


@pytest.mark.parametrize("contract", [VerifierOutput, ComposerOutput, Plan, KnowledgeAnswer,
                                      ExecutorEvidenceV2])
def test_answer_schema__drops_titles_and_null_defaults_only(contract: type) -> None:
    full = contract.model_json_schema()
    trimmed = answer_schema(contract)
    text = json.dumps(trimmed)
    assert '"title":' not in text.replace('"title": {', "")  # no title keyword left
    assert '"default": null' not in text
    assert trimmed["required"] == [r for r in full["required"] if r != "facts_checked"]
    assert trimmed.get("additionalProperties") == full.get("additionalProperties")
    assert set(trimmed["properties"]) == set(full["properties"]) - {"facts_checked"}


def test_answer_schema__the_verifier_is_not_asked_for_derived_fields() -> None:
    schema = answer_schema(VerifierOutput)
    assert "facts_checked" not in schema["properties"]
    assert "FactCheck" not in schema.get("$defs", {})
    assert "Verification" in schema["$defs"]
