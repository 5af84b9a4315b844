"""The post-check by kind: each claim fact against the facts of its kind and shape in its own
evidence, matched by whole token; a differing value is contradicted whatever the model said,
and a contradicted claim is neither an allowed claim nor a possible direction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spec.helpers import evidence, verified_claim

from models.common import Verdict
from models.executor import ClaimKind, ExecutorEvidenceV2
from models.gatekeeper import (
    GatekeeperOutcome,
    GatekeeperResult,
    Severity,
    VerifiedExecutorOutput,
)
from models.verifier import ClaimCheck, Verification, VerifierInput, VerifierOutput
from pipeline.agents.template_composer import TemplateComposer
from pipeline.rules.composer_input import build_composition
from pipeline.rules.facts import FactSet, extract_facts
from pipeline.rules.guards import post_check
from pipeline.rules.verifier_input import build_verifier_input
from pipeline.verification import load_bundle, verify_bundle
from tests.doubles import Scripted, function_model

BUNDLES = Path(__file__).resolve().parents[2] / "samples" / "bundles"


def _lenient(payload: bytes) -> str:
    """PASS, and direct_observation for every claim shown."""
    verifier_input = VerifierInput.model_validate_json(payload)
    checks = [ClaimCheck(claim_id=c.claim_id, verification=Verification.DIRECT_OBSERVATION)
              for c in verifier_input.verified_executor_output.claims]
    return VerifierOutput(verdict=Verdict.PASS, groundedness_score=1.0, rationale="ok",
                          claim_checks=checks, evidence_gaps=[]).model_dump_json()


def lenient_verifier() -> Scripted:
    """Says PASS and direct_observation to every claim it is shown."""
    return function_model(_lenient, model="lenient-test-verifier")


# --- the lenient Verifier on the contradiction sample --------------------------------

def test_a_lenient_verifier_cannot_pass_a_misquoted_number() -> None:
    bundle = load_bundle((BUNDLES / "contradiction.json").read_text(encoding="utf-8"))
    result = verify_bundle(bundle, verifier=lenient_verifier(), composer=TemplateComposer()).result
    evaluation = result.self_evaluation.verifier_evaluation
    checks = {c.claim_id: c.verification for c in evaluation.claim_checks}
    # "reached 45%" against evidence of 1.1% and 12.3%: contradicted, overriding the model
    assert checks["c2"] is Verification.CONTRADICTED
    assert any(d.startswith("c2: direct_observation -> contradicted") and "45%" in d
               for d in evaluation.downgrades)
    assert (result.status, result.verdict) == ("FALLBACK", Verdict.REJECT)
    assert "45%" not in result.final_answer.model_dump_json()
    # the faithful claims are left as the model said
    assert checks["c1"] is checks["c3"] is Verification.DIRECT_OBSERVATION


# --- extraction: every common shape, with its kind -------------------------------------------

@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("session 0x24edfaa8717001a closed", [("0x24edfaa8717001a", "identifier/hex")]),
        ("address 1438f9e0 parity", [("1438f9e0", "identifier/hex")]),
        ("WWID 6005-08b4-0001-00c6-0006-3000-003d-0000",
         [("6005-08b4-0001-00c6-0006-3000-003d-0000", "identifier/hex")]),
        ("req-38101a0b-2096-447d-96ea-a692162415ae done",
         [("38101a0b-2096-447d-96ea-a692162415ae", "identifier/uuid")]),
        ("block blk_-5852844080027817147 terminating",
         [("blk_-5852844080027817147", "identifier/block")]),
        ("mounted storage12311", [("storage12311", "identifier/id")]),
        ("node R02-M1-N0-C", [("R02-M1-N0-C", "identifier/id")]),
        ("from 10.251.73.220:50010", [("10.251.73.220:50010", "identifier/ip")]),
        ("peer fe80::1ff:fe23:4567:890a up", [("fe80::1ff:fe23:4567:890a", "identifier/ip")]),
        ("logname= uid=0 rhost=5.188.10.180", [("0", "quantity"),
                                               ("5.188.10.180", "identifier/ip")]),
        ("user=root", [("root", "identifier/kv")]),
        ("ciod: program /home/germann2/BGL-demo/SPaSM_mpi",
         [("/home/germann2/BGL-demo/SPaSM_mpi", "identifier/path")]),
        ("reverse mapping for ns.marryaldkfaczcz.com failed",
         [("ns.marryaldkfaczcz.com", "identifier/host")]),
        ("took 16 ms", [("16 ms", "quantity/duration")]),
        ("estimated size 8.8 KB", [("8.8 KB", "quantity/bytes")]),
        ("Dec 10 07:28:16 sshd", [("Dec 10 07:28:16", "timestamp")]),
        ("2015-10-18 18:01:47,978 INFO", [("2015-10-18 18:01:47,978", "timestamp")]),
        ("at 2005-06-03-15.42.50.675872", [("2005-06-03-15.42.50.675872", "timestamp")]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_extract_facts_knows_every_common_shape(text: str,
                                                expected: list[tuple[str, str]]) -> None:
    found = [(f.text, f.sort) for f in extract_facts(text, single_digits=True)]
    assert sorted(found) == sorted(expected)


def test_a_url_keeps_its_host_and_path_as_facts_too() -> None:
    facts = extract_facts("POST https://ledger-api.internal:8443/v1/entries failed")
    sorts = {f.sort for f in facts}
    assert "identifier/url" in sorts and "service" in sorts  # ledger-api, as before


# --- matching by whole token ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("claim", "evidence_text"),
    [
        ("session 0x24edfaa8717001a", "Expiring session 0x24edfaa8717000c, timeout of 10000ms"),
        ("storage1231 is full", "disk storage12311 is full"),
        ("mask 0x41", "CE sym 29, at 0x0ea9fd60, mask 0x40"),
        ("host 62-192-102-95.dsl.easynet.nl", "rhost=62-192-102-94.dsl.easynet.nl"),
        ("slot 9", "Found child 5494 in scoreboard slot 8"),
        ("at 1131241564", "action start 1131241563 1 wait"),
        ("took 16 s", "took 16 ms"),
        ("took 16 MB", "took 16 ms"),
    ],
    ids=["neighbouring-hex-session", "id-not-a-substring", "hex-not-another-tokens-digits",
         "host-by-whole-name", "single-digit", "epoch-seconds-exact", "unit-within-dimension",
         "unit-of-another-dimension"],
)
def test_a_neighbouring_value_is_a_conflict(claim: str, evidence_text: str) -> None:
    known = FactSet.from_texts([evidence_text])
    facts = extract_facts(claim, single_digits=True)
    assert facts and any(known.conflicts(f) for f in facts)


@pytest.mark.parametrize(
    ("claim", "evidence_text"),
    [
        ("remote host 5.188.10.180", "authentication failure; rhost=5.188.10.180 user=root"),
        ("host 10.251.73.220 port 50010", "10.251.73.220:50010 is added to blk_71283702"),
        ("10.251.73.220:50010", "host 10.251.73.220 port 50010"),
        ("session 24edfaa8717001a", "session 0x24edfaa8717001a"),
        ("the value 16", "took 16 ms"),
        ("16 ms", "took 16"),
        ("tenant 54fadb412c4e40cdbaed9335e4c35a9e",
         "GET /v2/54fadb412c4e40cdbaed9335e4c35a9e/servers/detail"),
        ("node 246", "node-246 unix.hw state_change"),
        ("at 07:28:16", "Dec 10 07:28:16 LabSZ sshd[24255]"),
    ],
    ids=["key-value-restated", "host-port-restated-apart", "host-port-stated-apart",
         "hex-without-0x", "value-without-its-unit", "bare-number-given-its-unit",
         "id-inside-a-path", "number-inside-an-id", "time-of-a-syslog-stamp"],
)
def test_a_faithful_restatement_is_supported(claim: str, evidence_text: str) -> None:
    known = FactSet.from_texts([evidence_text])
    facts = extract_facts(claim, single_digits=True)
    assert facts
    assert all(known.supports(f) for f in facts), [f for f in facts if not known.supports(f)]


# --- the post-check ---------------------------------------------------------------------------

def _input(claim_text: str, evidence_text: str) -> VerifierInput:
    outcome = GatekeeperOutcome(
        result=GatekeeperResult(status="pass", severity=Severity.PASS, rules=[],
                                failed_rules=[], checked_bindings=[]),
        verified_output=VerifiedExecutorOutput(claims=[verified_claim("c1", claim_text)]),
        verified_evidence=[evidence("c1", evidence_text)],
    )
    return build_verifier_input(outcome, query="q")


def _checked(claim_text: str, evidence_text: str, given: Verification) -> tuple[Verification,
                                                                                 list[str]]:
    output = VerifierOutput(verdict=Verdict.PASS, groundedness_score=1.0, rationale="r",
                            claim_checks=[ClaimCheck(claim_id="c1", verification=given)])
    checked = post_check(output, _input(claim_text, evidence_text))
    return checked.claim_checks[0].verification, checked.downgrades


@pytest.mark.parametrize(
    ("claim", "evidence_text", "given", "expected"),
    [
        ("Expiring session 0x24edfaa8717001a", "Expiring session 0x24edfaa8717000c",
         Verification.DIRECT_OBSERVATION, Verification.CONTRADICTED),
        ("CPU throttling reached 45%", "baseline 1.1% peak 12.3%",
         Verification.DIRECT_OBSERVATION, Verification.CONTRADICTED),
        ("CPU throttling reached 45%", "baseline 1.1% peak 12.3%",
         Verification.REASONABLE_INFERENCE, Verification.CONTRADICTED),
        ("deployed v2.3.2", "checkout-service v2.3.1 deployed",
         Verification.OVERSTATED, Verification.CONTRADICTED),
        ("peak 12.3%", "baseline 1.1% peak 12.3%",
         Verification.DIRECT_OBSERVATION, Verification.DIRECT_OBSERVATION),
        ("payment-db v9.9.9 degraded", "payment-db pool exhausted",
         Verification.DIRECT_OBSERVATION, Verification.CONTRADICTED),
        ("peak 12.3%", "baseline 1.1% peak 12.3%",
         Verification.UNSUPPORTED, Verification.UNSUPPORTED),
    ],
    ids=["differing-hex-overrides-the-model", "differing-percent",
         "differing-value-in-an-inference", "differing-version-of-an-overstated-claim",
         "same-value-kept", "absent-key-fact-is-fabricated", "the-model-may-be-stricter"],
)
def test_post_check_by_kind(claim: str, evidence_text: str, given: Verification,
                            expected: Verification) -> None:
    verification, downgrades = _checked(claim, evidence_text, given)
    assert verification is expected
    assert bool(downgrades) is (verification is not given)
    if expected is Verification.CONTRADICTED and given is not expected:
        assert downgrades[0].startswith(f"c1: {given.value} -> contradicted")


# --- contradicted claims reach the Composer in no form -----------------------------------------

_VERIFICATIONS = st.sampled_from(list(Verification))


@settings(max_examples=150, deadline=None)
@given(verifications=st.lists(_VERIFICATIONS, min_size=1, max_size=5),
       verdict=st.sampled_from(list(Verdict)), cited=st.lists(st.integers(0, 4), max_size=3))
def test_contradicted_claims_are_never_allowed_nor_possible_directions(
    verifications: list[Verification], verdict: Verdict, cited: list[int]
) -> None:
    ids = [f"c{i}" for i in range(len(verifications))]
    claims = [verified_claim(i, f"claim {i} about checkout-service",
                             kind=ClaimKind.ROOT_CAUSE if n == 0 else ClaimKind.FINDING)
              for n, i in enumerate(ids)]
    checks = [ClaimCheck(claim_id=i, verification=v)
              for i, v in zip(ids, verifications, strict=True)]
    hypothesis_ids = sorted({ids[n % len(ids)] for n in cited})
    executor_output = ExecutorEvidenceV2.model_validate({
        "claims": [{"claim_id": i, "text": f"claim {i} about checkout-service",
                    "kind": "FINDING", "critical": True, "status": "CONFIRMED",
                    "evidence_bindings": [{"invocation_id": "toolu_x", "tool_name": "t",
                                           "path": "$.a", "matched_text": "x"}]}
                   for i in ids],
        "hypotheses": [{"text": "checkout-service may be saturated",
                        "claim_ids": hypothesis_ids}] if hypothesis_ids else [],
    })
    composer_input = build_composition(
        query="q", verdict=verdict, claims=claims, checks=checks, gaps=[],
        executor_output=executor_output, rationale="r").composer_input
    contradicted = {c.claim_id for c in checks if c.verification is Verification.CONTRADICTED}
    assert not contradicted & {c.claim_id for c in composer_input.allowed_claims}
    assert not contradicted & {i for h in composer_input.allowed_hypotheses for i in h.claim_ids}
    texts = [c.text for c in composer_input.allowed_claims]
    texts += [h.text for h in composer_input.allowed_hypotheses]
    assert not any(f"claim {i} " in t for i in contradicted for t in texts)


def test_the_shipped_claim_set_is_valid_json() -> None:
    path = Path(__file__).resolve().parents[2] / "bench" / "data" / "grounding_claims.json"
    assert json.loads(path.read_text())["claims"]


# --- properties: a value is supported by itself and conflicts with its neighbours -------------

_SHAPES = {
    "hex": st.from_regex(r"0x[0-9a-f]{6,15}[a-f][0-9]", fullmatch=True),
    "id": st.from_regex(r"[a-z]{3,8}[0-9]{2,6}", fullmatch=True),
    "ip": st.from_regex(r"(1[0-9]{2}|2[0-4][0-9])(\.[1-9][0-9]){3}(:[1-9][0-9]{3})?",
                        fullmatch=True),
    "block": st.from_regex(r"blk_-?[1-9][0-9]{8,18}", fullmatch=True),
    "number": st.integers(10, 10**12).map(str),
}


@settings(max_examples=60, deadline=None)
@given(data=st.data(), shape=st.sampled_from(sorted(_SHAPES)))
def test_a_value_supports_itself_and_conflicts_with_a_neighbour(data: st.DataObject,
                                                                 shape: str) -> None:
    value = data.draw(_SHAPES[shape])
    skip = 2 if value.startswith("0x") else 0  # the 0 of 0x is the shape, not the value
    digits = [i for i, c in enumerate(value) if c.isdigit() and i >= skip]
    i = data.draw(st.sampled_from(digits))
    neighbour = value[:i] + str((int(value[i]) + data.draw(st.integers(1, 9))) % 10) + value[i + 1:]
    known = FactSet.from_texts([f"worker reported {value} during recovery"])
    (same,) = extract_facts(f"the log names {value}")
    assert known.supports(same) and not known.conflicts(same)
    other = extract_facts(f"the log names {neighbour}", single_digits=True)
    assert other and any(known.conflicts(f) for f in other), (value, neighbour)


def test_a_contradicted_claim_is_not_a_possible_direction_when_the_run_goes_on() -> None:
    # the misquoted claim made non-critical: the run is not rejected, and the claim must still
    # appear nowhere, neither as a confirmed fact nor under "Possible directions"
    bundle = load_bundle((BUNDLES / "contradiction.json").read_text(encoding="utf-8"))
    document = json.loads(bundle.executor_output_raw)
    for claim in document["claims"]:
        if claim["claim_id"] == "c2":
            claim["critical"] = False
    bundle = bundle.model_copy(update={"executor_output_raw": json.dumps(document)})
    result = verify_bundle(bundle, verifier=lenient_verifier(), composer=TemplateComposer()).result
    checks = {c.claim_id: c.verification
              for c in result.self_evaluation.verifier_evaluation.claim_checks}
    assert checks["c2"] is Verification.CONTRADICTED
    assert result.status == "SUCCESS" and result.verdict is not Verdict.REJECT
    answer = result.final_answer.model_dump_json()
    assert "45%" not in answer and "reached 45" not in answer


_VACUUMS = ("2026-11-30T13:59:09Z automatic vacuum of table ledger\n"
            "2026-11-30T14:02:16Z automatic vacuum of table ledger")


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        pytest.param("Autovacuum of ledger ran between 13:59 and 14:03.",
                     Verification.DIRECT_OBSERVATION, id="between-and-frames-its-evidence"),
        pytest.param("Autovacuum of ledger ran in the 13:59–14:03 window.",
                     Verification.DIRECT_OBSERVATION, id="a-dashed-window"),
        pytest.param("Autovacuum of ledger ran between 14:05 and 14:09.",
                     Verification.CONTRADICTED, id="a-window-its-evidence-lies-outside"),
        pytest.param("Autovacuum of ledger ran at 13:59 and 14:03.",
                     Verification.CONTRADICTED, id="two-times-are-no-window"),
    ],
)
def test_post_check__a_window_is_no_time_its_evidence_must_state(
        claim: str, expected: Verification) -> None:
    verification, _ = _checked(claim, _VACUUMS, Verification.DIRECT_OBSERVATION)
    assert verification is expected
