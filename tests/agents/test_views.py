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
from pipeline.rules.executor_output import parse_executor_output
from pipeline.rules.gatekeeper import gatekeep
from pipeline.rules.verifier_input import build_verifier_input
from pipeline.serialization import canonical_bytes
from pipeline.sources.scenario import ScenarioSource

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "samples" / "bundles").glob("*.json"))


def _scenario_bundles() -> list[tuple[str, RunBundle]]:
    """The offline investigation of every shipped diagnosis scenario, as a bundle."""
    from models.common import Intent
    from pipeline.agents.planner import classify_intent
    from pipeline.inprocess import run_in_process
    from pipeline.scenarios import default_scenarios_dir, list_scenarios, load_scenario
    from pipeline.tools import default_registry

    bundles = []
    for info in list_scenarios(default_scenarios_dir()):
        scenario = load_scenario(default_scenarios_dir() / info.name)
        if classify_intent(scenario.meta.question) is Intent.KNOWLEDGE_QUERY:
            continue  # one lookup, no Executor output
        loop = run_in_process(scenario.meta.question, source=ScenarioSource(scenario),
                              registry=default_registry(), known_services=scenario.services)
        bundles.append((info.name, RunBundle(query=scenario.meta.question, intent=loop.plan.intent,
                                             invocations=loop.invocations,
                                             executor_output_raw=loop.final_output)))
    return bundles


def _verifier_payloads() -> list[object]:
    params = []
    named = [(path.stem, RunBundle.model_validate_json(path.read_text())) for path in SAMPLES]
    for name, bundle in named + _scenario_bundles():
        document = parse_executor_output(bundle.executor_output_raw).document
        if document is None:
            continue
        outcome = gatekeep(document, bundle.invocations)
        if outcome.result.severity.ceiling is None:
            continue
        payload = canonical_bytes(build_verifier_input(outcome, query=bundle.query))
        params.append(pytest.param(payload, id=name))
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
    cited = 0
    for source in document["verified_evidence"]:
        assert {"invocation_id", "tool_name", "evidence_status", "scope"} <= set(source)
        seen = set()
        for excerpt in source["evidence"]:
            assert set(excerpt) in ({"path", "matched_text", "cited_by"}, {"path", "cited_by"})
            key = (excerpt["path"], excerpt.get("matched_text"))
            assert excerpt["cited_by"] and key not in seen
            seen.add(key)
            cited += len(excerpt["cited_by"])
    assert cited == len(canonical["verified_evidence"])  # every binding, once


def _binding(n: int, claim: str, path: str, text: str, source: str = "toolu_1") -> dict:
    return {"evidence_id": f"E{n}", "claim_id": claim, "invocation_id": source,
            "tool_name": "search_logs", "evidence_status": "NO_EVIDENCE", "path": path,
            "matched_text": text,
            "scope": {"service": "payment-db", "filter": None,
                      "window": {"start": "2026-11-30T13:00:00Z", "end": "2026-11-30T15:00:00Z"}}}


def test_verifier_view__an_excerpt_is_written_once_and_scope_values_are_not_repeated() -> None:
    canonical = {"verified_evidence": [
        _binding(1, "c1", "$.summary", "0 lines"),
        _binding(2, "c2", "$.summary", "0 lines"),  # the same excerpt, another claim
        _binding(3, "c2", "$.scope.service", "payment-db"),  # the scope's own value
        _binding(4, "c3", "$.scope.window.start", "2026-11-30T13:00"),  # not the scope's value
        _binding(5, "c3", "$.scope.service", "payment-db", source="toolu_2"),
    ]}
    view = json.loads(model_view("verifier", json.dumps(canonical).encode()))
    first, second = view["verified_evidence"]
    assert first["evidence"] == [
        {"path": "$.summary", "matched_text": "0 lines", "cited_by": {"E1": "c1", "E2": "c2"}},
        {"path": "$.scope.service", "cited_by": {"E3": "c2"}},
        {"path": "$.scope.window.start", "matched_text": "2026-11-30T13:00",
         "cited_by": {"E4": "c3"}},
    ]
    assert "filter" not in first["scope"]  # nulls are left out
    assert second["evidence"] == [{"path": "$.scope.service", "cited_by": {"E5": "c3"}}]


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
