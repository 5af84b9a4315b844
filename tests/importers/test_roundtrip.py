"""The round trip: a diagnosis run on the Claude agents (over the fake Messages API server, as
`tests/providers/test_fake_runs.py` drives one), exported as an Anthropic Messages transcript,
imported back and checked by the same Claude Verifier and Composer, must state the same claims
(the Executor's texts, in order) and reach the same verdict as the run itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_anthropic import FakeAnthropic
from models.bundle import RunBundle
from models.check import CheckReport
from models.executor import ExecutorEvidenceV2
from models.run import RunRecord
from pipeline.agents.claude import ClaudeVerifier
from pipeline.checks import check
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.importers.anthropic import parse
from pipeline.importers.messages_export import anthropic_transcript
from pipeline.run.attempts import Retrying
from pipeline.run.runtime import Runtime
from tests.providers.claude_like import answer_like_claude
from tests.providers.test_fake_runs import TENANT, drive, settings

MODEL = "claude-sonnet-4-5"


SCENARIOS = [
    "checkout-pool-exhaustion",
    "inventory-oom-crashloop",
    "billing-no-evidence",
    "checkout-injected-instructions",
    "orders-latency-payment-gateway",
    "catalog-pricing-rate-limit",
    "search-unexplained-errors",
    "settlement-tls-expiry",
]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as running:
        answer_like_claude(running)
        yield running


@pytest.fixture
def claude(fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
           ) -> Iterator[tuple[Runtime, VeritySettings]]:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    chosen = settings(tmp_path, "claude", provider="anthropic", anthropic_api_key="sk-test",
                      anthropic_base_url=fake.base_url)
    runtime = build_runtime(chosen)
    yield runtime, chosen
    runtime.store.close()


def _differences(run: RunRecord, bundle: RunBundle, report: CheckReport) -> str:
    """Where the check parts from the run, claim by claim, for the failure message."""
    stated = ExecutorEvidenceV2.model_validate_json(bundle.executor_output_raw).claims
    checks = {c.claim_id: c for c in run.self_evaluation.verifier_evaluation.claim_checks
              } if run.self_evaluation else {}
    read = [c for c in report.claims if not c.action]
    lines = [f"run {run.verdict} vs check {report.verdict} ({report.status})"]
    for index in range(max(len(stated), len(read))):
        mine = stated[index] if index < len(stated) else None
        theirs = read[index] if index < len(read) else None
        judged = checks.get(mine.claim_id) if mine else None
        run_side = (f"{mine.claim_id} {mine.kind} critical={mine.critical} "
                    f"{judged.verification if judged else None}") if mine else "-"
        check_side = (f"{theirs.claim_id} {theirs.kind} critical={theirs.critical} "
                      f"{theirs.verification} ({theirs.note})") if theirs else "-"
        text = (mine.text if mine else theirs.text if theirs else "")[:70]
        lines.append(f"  {run_side} | {check_side} | {text}")
    return "\n".join(lines)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_roundtrip__the_exported_run_checks_to_the_same_claims_and_verdict(
    fake: FakeAnthropic, claude: tuple[Runtime, VeritySettings], scenario: str
) -> None:
    runtime, chosen = claude
    assert isinstance(runtime.agents.verifier, Retrying)
    assert isinstance(runtime.agents.verifier.inner, ClaudeVerifier)
    run = runtime.store.get_run(drive(runtime, scenario), tenant_id=TENANT)
    bundle = runtime.store.to_bundle(run.run_id, tenant_id=TENANT)
    transcript = json.dumps(anthropic_transcript(bundle, model=MODEL), ensure_ascii=False)
    imported = parse(transcript)
    assert imported.question == bundle.query and imported.agent == MODEL
    assert [c.call_id for c in imported.calls] == [i.tool_call_id for i in bundle.invocations]

    asked = len(fake.requests)
    report = check(imported, verifier=runtime.agents.verifier,
                   composer=runtime.agents.composer, settings=chosen).report
    assert {r["role"] for r in fake.requests[asked:]} <= {"verifier", "composer"}
    assert "verifier" in {r["role"] for r in fake.requests[asked:]}  # judged by Claude

    stated = ExecutorEvidenceV2.model_validate_json(bundle.executor_output_raw).claims
    why = _differences(run, bundle, report)
    assert [c.text for c in report.claims if not c.action] == [c.text for c in stated], why
    assert report.verdict == run.verdict, why
