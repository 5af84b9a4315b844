"""`verity verify` records an evidence retry it cannot run: a bundle has no tools."""

from __future__ import annotations

import json
from pathlib import Path

from models.common import Verdict
from models.verifier import EvidenceGap, VerifierInput
from pipeline.agents.offline_verifier import verify
from pipeline.agents.template_composer import TemplateComposer
from pipeline.verification import load_bundle, verify_bundle
from tests.doubles import function_model

PASS_BUNDLE = Path(__file__).resolve().parents[2] / "samples" / "bundles" / "pass.json"


def _asking(payload: bytes) -> str:
    verifier_input = VerifierInput.model_validate_json(payload)
    output = verify(verifier_input)
    gap = EvidenceGap(claim_id=verifier_input.verified_executor_output.claims[0].claim_id,
                      description="Pool utilization metrics are needed.", critical=True,
                      suggested_tool="query_metrics")
    return output.model_copy(update={"verdict": Verdict.LOW_CONFID,
                                     "evidence_gaps": [gap]}).model_dump_json()


def test_verify__eligible_evidence_retry_is_recorded_then_composed() -> None:
    bundle = load_bundle(PASS_BUNDLE.read_text())
    run = verify_bundle(bundle, verifier=function_model(_asking), composer=TemplateComposer())
    kinds = [(node, kind) for node, kind, _ in run.events]
    assert ("verify", "evidence_retry_unavailable") in kinds
    assert kinds[-1] == ("compose", "completed")
    assert (run.result.status, run.result.verdict) == ("SUCCESS", Verdict.LOW_CONFID)


def test_verify__no_retry_event_when_not_eligible() -> None:
    bundle = load_bundle(PASS_BUNDLE.read_text())
    run = verify_bundle(bundle, verifier=function_model(lambda p: verify(
        VerifierInput.model_validate_json(p)).model_dump_json()), composer=TemplateComposer())
    assert all(kind != "evidence_retry_unavailable" for _, kind, _ in run.events)
    assert json.loads(run.result.model_dump_json())["verdict"] == "PASS"
