"""Fact extraction and comparison: what counts as a concrete fact, and when two facts agree."""

from __future__ import annotations

import pytest

from pipeline.rules.facts import IDENTIFYING_KINDS, FactKind, FactSet, extract_facts

T, V, E, Q, ID, S = (FactKind.TIMESTAMP, FactKind.VERSION, FactKind.ERROR_CODE,
                    FactKind.QUANTITY, FactKind.IDENTIFIER, FactKind.SERVICE)


def kinds_and_keys(text: str) -> list[tuple[FactKind, str]]:
    return [(f.kind, f.key) for f in extract_facts(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # timestamps
        ("at 2026-11-30T14:07:00Z", [(T, "2026-11-30T14:07:00")]),
        ("at 2026-11-30T14:07:00+02:00", [(T, "2026-11-30T12:07:00")]),  # offsets become UTC
        ("at 2026-11-30 14:07", [(T, "2026-11-30T14:07")]),
        ("on 2026-11-30", [(T, "2026-11-30")]),
        ("between 14:00 and 15:00", [(T, "14:00"), (T, "15:00")]),
        ("at 14:07:05.123", [(T, "14:07:05.123")]),
        # versions
        ("deployed v2.3.1", [(V, "2.3.1")]),
        ("deployed 2.3.1", [(V, "2.3.1")]),
        ("release 1.2.3-rc.1", [(V, "1.2.3-rc.1")]),
        ("api v2", [(V, "2")]),
        # HTTP codes, only in an HTTP context
        ("returning HTTP 500", [(E, "500")]),
        ("status=502", [(E, "502")]),
        ("upstream returned 503", [(E, "503")]),
        ("504 Gateway Timeout", [(E, "504")]),
        ("a burst of 500s", [(E, "500")]),
        ("429 errors", [(E, "429")]),
        # named error codes
        ("pod was OOMKilled", [(E, "oomkilled")]),
        ("in CrashLoopBackOff", [(E, "crashloopbackoff")]),
        ("connect ECONNREFUSED", [(E, "econnrefused")]),
        ("CONNECTION_RESET by peer", [(E, "connection_reset")]),
        ("a NullPointerException", [(E, "nullpointerexception")]),
        ("SQLSTATE 40001", [(E, "sqlstate 40001")]),
        ("killed by the OOM killer", [(E, "oom")]),
        # quantities with units
        ("peak 41.8%", [(Q, "41.8percent")]),
        ("after 5000ms", [(Q, "5000duration")]),
        ("after 5 s", [(Q, "5000duration")]),
        ("for 3 minutes", [(Q, "180000duration")]),
        ("limit 512MiB", [(Q, f"{512 * 1024**2:g}bytes")]),
        ("used 1.5 GB", [(Q, "1.5e+09bytes")]),
        ("120 rps", [(Q, "120rate")]),
        ("3 pods", [(Q, "3pod")]),
        ("1,432 errors", [(Q, "1432error")]),
        ("1432 errors", [(Q, "1432error")]),
        ("pool size 20", [(Q, "20")]),
        ("a 2x increase", [(Q, "2factor")]),
        # identifiers
        ("req 123e4567-e89b-12d3-a456-426614174000",
         [(ID, "123e4567-e89b-12d3-a456-426614174000")]),
        ("host 10.0.3.17:5432", [(ID, "10.0.3.17:5432")]),
        ("pod checkout-7f9c-x2", [(ID, "checkout-7f9c-x2")]),
        ("commit 9f8e7d6c5b", [(ID, "9f8e7d6c5b")]),
        # service names
        ("checkout-service and payment-db", [(S, "checkout-service"), (S, "payment-db")]),
        ("the api-gateway", [(S, "api-gateway")]),
        ("redis_cache", [(S, "redis_cache")]),
        # not facts
        ("a state-of-the-art design", []),
        ("retry 3 times? no: 7", [(Q, "3time")]),
        ("the pool is exhausted", []),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_extract_facts(text: str, expected: list[tuple[FactKind, str]]) -> None:
    assert sorted(kinds_and_keys(text)) == sorted(expected)


def test_extract_facts_keeps_text_and_claims_each_span_once() -> None:
    facts = extract_facts("checkout-service v2.3.1 returned HTTP 500 at 14:07 for 41.8% of calls")
    assert [f.text for f in facts] == ["14:07", "v2.3.1", "500", "41.8%", "checkout-service"]
    spans = "".join(f.text for f in facts)
    assert len(spans) == sum(len(f.text) for f in facts)


def test_quantity_rounding_tolerance_follows_the_stated_precision() -> None:
    (whole,) = extract_facts("42%")
    (tenth,) = extract_facts("41.8%")
    (seconds,) = extract_facts("5 s")
    assert whole.tolerance == 0.5 and tenth.tolerance == pytest.approx(0.05)
    assert seconds.value == 5000 and seconds.tolerance == 500  # ±0.5 s, in ms


def test_identifying_kinds() -> None:
    assert IDENTIFYING_KINDS == {V, E, ID}


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("42%", "peak 41.8%"),
        ("41.8%", "peak 41.8%"),
        ("42%", "ratio 0.42"),
        ("5 s", "after 5000ms"),
        ("5.0s", "after 5000ms"),
        ("1.5 GB", "used 1500 MB"),
        ("1,432 errors", "logged 1432 errors"),
        ("1432 errors", "1432"),
        ("14:07", "at 2026-11-30T14:07:00Z"),
        ("2026-11-30", "at 2026-11-30T14:07:00Z"),
        ("2026-11-30T14:07", "at 2026-11-30T14:07:00Z"),
        ("v2.3.1", "deployed 2.3.1"),
        ("HTTP 500", "500 Internal Server Error"),
        ("HTTP 500", '{"status": 500}'),
        ("OOMKilled", "reason: OOMKilled"),
        ("checkout-7f9c-x2", "pod checkout-7f9c-x2 restarted"),
        ("payment-db", "the payment-db pool"),
        ("payment-db", "service: payment-db"),
    ],
    ids=["rounded-percent", "exact-percent", "percent-vs-ratio", "seconds-vs-ms",
         "decimal-seconds-vs-ms", "gb-vs-mb", "thousands-separator", "count-vs-bare-number",
         "time-of-day-vs-timestamp", "date-vs-timestamp", "minute-vs-second-precision",
         "v-prefix", "http-code-in-status-line", "http-code-as-json-number",
         "named-error-code", "identifier", "service-in-text", "service-in-field"],
)
def test_evidence_supports_the_same_fact(claim: str, evidence: str) -> None:
    known = FactSet.from_texts([evidence])
    facts = extract_facts(claim)
    assert facts
    assert all(known.supports(f) for f in facts)
    assert not any(known.conflicts(f) for f in facts)


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("41.9%", "peak 41.8%"),
        ("41.8%", "peak 42%"),
        ("45%", "peak 41.8%"),
        ("6 s", "after 5000ms"),
        ("1500 errors", "logged 1432 errors"),
        ("3 GB", "used 1500 MB"),
        ("14:08", "at 2026-11-30T14:07:00Z"),
        ("2026-11-29", "at 2026-11-30T14:07:00Z"),
        ("v2.3.2", "deployed v2.3.1"),
        ("HTTP 502", "500 Internal Server Error"),
        ("ECONNRESET", "connect ECONNREFUSED"),
        ("checkout-7f9c-x3", "pod checkout-7f9c-x2"),
        ("10.0.3.18:5432", "host 10.0.3.17:5432"),
    ],
    ids=["more-precise-percent", "precision-beyond-evidence", "different-percent",
         "different-duration", "different-count", "different-size", "different-time",
         "different-date", "different-version", "different-http-code",
         "different-error-name", "different-pod", "different-address"],
)
def test_a_number_or_value_that_differs_is_a_conflict(claim: str, evidence: str) -> None:
    known = FactSet.from_texts([evidence])
    (fact,) = extract_facts(claim)
    assert not known.supports(fact)
    assert known.conflicts(fact)


@pytest.mark.parametrize(
    ("claim", "evidence"),
    [
        ("redis-cache", "the payment-db pool"),
        ("12 pods", "logged 1432 errors"),
        ("v2.3.1", "no versions here"),
        ("5 s", "41.8%"),
    ],
    ids=["services-never-conflict", "different-unit", "no-fact-of-that-kind",
         "different-dimension"],
)
def test_absent_but_not_conflicting(claim: str, evidence: str) -> None:
    known = FactSet.from_texts([evidence])
    (fact,) = extract_facts(claim)
    assert not known.supports(fact)
    assert not known.conflicts(fact)


def test_service_match_is_a_whole_word() -> None:
    known = FactSet.from_texts(["the payment-db-replica lagged"])
    (fact,) = extract_facts("payment-db")
    assert not known.supports(fact)


def test_has_kind() -> None:
    known = FactSet.from_texts(["deployed v2.3.1 at 14:02"])
    assert known.has_kind(V) and known.has_kind(T)
    assert not known.has_kind(E) and not known.has_kind(Q)


@pytest.mark.parametrize(
    ("claim", "evidence", "supported", "conflict"),
    [
        pytest.param("4 times", "count: 4", True, False, id="single-digit-evidence-supports"),
        pytest.param("5 attempts", "dropping email after 3 attempts", False, True,
                     id="count-noun-differs"),
        pytest.param("1.2M messages", "lag 1,204,332", True, False, id="magnitude-suffix"),
        pytest.param("10k requests", "9,960 requests", True, False, id="thousands-suffix"),
        pytest.param("pod orders-worker-6b7c9d8f4-h2lzq", "pod orders-worker-6b7c9d8f4-h2lzq_prod",
                     True, False, id="pod-name-before-namespace"),
        pytest.param("KubePodCrashLooping", "alert KubeContainerWaiting firing", False, True,
                     id="camelcase-name-differs"),
        pytest.param("KubePodCrashLooping", "alertname=KubePodCrashLooping", True, False,
                     id="camelcase-name-matches"),
        pytest.param("2026-11-30T14:02:11-05:00", "at 2026-11-30T19:02:11Z", True, False,
                     id="offsets-compare-in-utc"),
    ],
)
def test_factset_supports_and_conflicts(
    claim: str, evidence: str, supported: bool, conflict: bool
) -> None:
    fact = extract_facts(claim)[0]
    known = FactSet.from_texts([evidence])
    assert (known.supports(fact), known.conflicts(fact)) == (supported, conflict)


def test_a_memo_extracts_each_evidence_text_once() -> None:
    window = "2026-11-30T14:00:00Z"
    memo: dict[str, list] = {}
    first = FactSet.from_texts(["checkout-service", window, "checkout-service"], memo=memo)
    assert set(memo) == {"checkout-service", window}
    assert memo[window] == extract_facts(window, single_digits=True)
    # a later claim's evidence reuses what is in the memo instead of extracting it again
    memo[window] = extract_facts("2026-11-30T15:00:00Z", single_digits=True)
    second = FactSet.from_texts([window], memo=memo)
    (at_three,) = extract_facts("at 2026-11-30T15:00:00Z")
    assert second.supports(at_three) and not first.supports(at_three)


def test_repeated_evidence_texts_index_the_same_facts_as_distinct_ones() -> None:
    texts = ["payment-db p99 1.2 s at 14:03", "deployed v2.3.1", "payment-db p99 1.2 s at 14:03"]
    once, repeated = FactSet.from_texts(texts[:2]), FactSet.from_texts(texts)
    for claim in ("payment-db p99 was 1.2 s", "v2.3.1 at 14:03", "p99 1.5 s on orders-db"):
        for fact in extract_facts(claim):
            assert once.supports(fact) == repeated.supports(fact)
            assert once.conflicts(fact) == repeated.conflicts(fact)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("roughly 4.0 to 4.6 seconds", ["4000duration", "4600duration"],
                     id="a-range-names-its-unit-once"),
        pytest.param("retrying after 40–60 ms", ["40duration", "60duration"], id="en-dash"),
        pytest.param("between 49 and 64 requests", ["49request", "64request"],
                     id="between-and-a-count"),
        pytest.param("on ports 9000 and 8030", ["9000", "8030"], id="and-without-between"),
        pytest.param("from 1024Mi to 512Mi", ["1.07374e+09bytes", "5.36871e+08bytes"],
                     id="both-ends-with-units"),
    ],
)
def test_a_range_start_takes_the_unit_of_its_end(text: str, expected: list[str]) -> None:
    assert [f.key for f in extract_facts(text)] == expected


def test_a_range_start_is_stated_by_a_value_of_its_unit() -> None:
    known = FactSet.from_texts(["acquirer response slow: 4006 ms", "slowest 4565 ms"])
    assert all(known.supports(f) for f in extract_facts("from 4.0 to 4.6 seconds"))


def test_an_ordinal_is_no_identifier() -> None:
    assert kinds_and_keys("renewal fails for the 35th time") == []


@pytest.mark.parametrize(
    ("claim", "evidence", "supported", "conflict"),
    [
        pytest.param("attempt m_000001_0", "TaskAttempt attempt_1445144423722_0020_m_000001_0",
                     True, False, id="the-last-parts-of-an-identifier"),
        pytest.param("attempt m_000002_0", "TaskAttempt attempt_1445144423722_0020_m_000001_0",
                     False, False, id="another-form-is-an-absence"),
        pytest.param("block rdd_30_0", "Found block rdd_21_4 locally", False, True,
                     id="one-form-differs"),
        pytest.param("read hdfs://10.10.34.11:9000/logs/a.log",
                     "Input split: hdfs://10.10.34.11:9000/logs/a.log:160424+7292", True, False,
                     id="a-url-with-a-split-after-it"),
        pytest.param("read hdfs://10.10.34.11:9000/logs/b.log",
                     "Input split: hdfs://10.10.34.11:9000/logs/a.log:160424+7292", False, True,
                     id="another-url-differs"),
        pytest.param("OOM", "Container was OOMKilled", True, False,
                     id="a-code-that-begins-another"),
        pytest.param("ResourceManager", "impl.TaskImpl: task transitioned", False, False,
                     id="names-of-another-word-are-an-absence"),
    ],
)
def test_identifiers_and_names_are_compared_with_their_own_form(
    claim: str, evidence: str, supported: bool, conflict: bool
) -> None:
    fact = next(f for f in extract_facts(claim) if f.kind is not S)
    known = FactSet.from_texts([evidence])
    assert (known.supports(fact), known.conflicts(fact)) == (supported, conflict)
