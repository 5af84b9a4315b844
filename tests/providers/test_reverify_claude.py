"""Re-verification of stored runs by Claude over the fake server's real HTTP: through normal
Messages calls and through the Message Batches API the results are the same (and the batched
ones cost half); a 429 on batch create, an expired batch request and a schema-breaking reply
end as retries, each an attempt row tied to the batch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from models.batch import BatchStatus, ItemRecord, ItemStatus, Selection
from pipeline.config import VeritySettings
from pipeline.factory import batch_judges, build_runtime
from pipeline.reverify import judge_chunk
from pipeline.run.runtime import Runtime
from tests.providers.claude_like import answer_like_claude
from tests.providers.test_fake_runs import TENANT, drive
from tests.store_rows import batch_attempts

SCENARIOS = ("checkout-pool-exhaustion", "inventory-oom-crashloop", "billing-no-evidence",
             "settlement-tls-expiry")


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(batch_delay=0.05) as running:
        answer_like_claude(running)
        yield running


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """A store of real offline runs: 2 of each scenario."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    built = build_runtime(VeritySettings(database_url=f"sqlite:///{tmp_path}/runs.db",
                                         provider="offline"))
    for scenario in SCENARIOS * 2:
        drive(built, scenario)
    yield built
    built.store.close()


def _claude(fake: FakeAnthropic) -> VeritySettings:
    return VeritySettings(provider="anthropic", anthropic_api_key="sk-test",  # type: ignore[arg-type]
                          anthropic_base_url=fake.base_url, message_batch_poll_s=0.05)


def _rejudge(runtime: Runtime, settings: VeritySettings, batch_id: str, *,
             message_batches: bool) -> list[ItemRecord]:
    store = runtime.store
    store.create_batch(batch_id=batch_id, tenant_id=TENANT, selection=Selection(),
                       provider="anthropic", message_batches=message_batches, chunk_size=50)
    store.start_batch(batch_id)
    judges = batch_judges(settings, "anthropic", message_batches=message_batches, max_batch=50)
    judge_chunk(store, batch_id, start=0, end=50, judges=lambda _batch: judges,
                settings=settings, concurrent=message_batches)
    assert store.get_batch(batch_id).status is BatchStatus.COMPLETED
    return list(store.iter_items(batch_id, tenant_id=TENANT))


def _outcomes(items: list[ItemRecord]) -> dict[str, Any]:
    return {i.run_id: (i.status, i.new_status, i.new_verdict, i.new_fallback_type,
                       [(c.claim_id, c.new) for c in (i.detail.claims if i.detail else [])])
            for i in items}


def test_message_batches_and_normal_calls_give_the_same_results(
    fake: FakeAnthropic, runtime: Runtime
) -> None:
    settings = _claude(fake)
    normal = _rejudge(runtime, settings, "normal", message_batches=False)
    calls = len(fake.requests)
    batched = _rejudge(runtime, settings, "batched", message_batches=True)
    assert len(normal) == len(batched) == 2 * len(SCENARIOS)
    assert all(i.status is ItemStatus.DONE for i in normal + batched)
    assert _outcomes(normal) == _outcomes(batched)
    # the batched items went out as Message Batches: the Verifier's in one, then the Composer's
    roles = [{r["role"] for r in b["requests"]} for b in fake.batches]
    assert {"verifier"} in roles and {"composer"} in roles
    # one Verifier request per item, all batched (a batch may also carry other items'
    # Composer requests when their judging overlaps: count by role, not by batch)
    assert sum(r["role"] == "verifier" for b in fake.batches for r in b["requests"]) == len(
        batched)
    assert not any(r["role"] in ("verifier", "composer") for r in fake.requests[calls:])
    # every model attempt is a row of its batch, at half the price when batched
    normal_cost = sum(a.cost_usd for a in batch_attempts(runtime.store, "normal"))
    batched_cost = sum(a.cost_usd for a in batch_attempts(runtime.store, "batched"))
    # (not exactly half: the batched run reads the prompt cache the normal run wrote)
    assert normal_cost > 0 and 0.45 < batched_cost / normal_cost < 0.55
    assert sum(i.cost_usd for i in batched) == pytest.approx(batched_cost, rel=1e-6)


@pytest.mark.parametrize(("role", "fault"), [
    ("batch", "429"), ("verifier", "expired"), ("composer", "schema_break"),
])
def test_batch_faults_end_as_retries_each_recorded(
    fake: FakeAnthropic, runtime: Runtime, role: str, fault: str
) -> None:
    settings = _claude(fake)
    clean = _outcomes(_rejudge(runtime, settings, "clean", message_batches=True))
    fake.fault(role, fault, retry_after=0.05 if fault == "429" else None)
    before = len(fake.requests)
    items = _rejudge(runtime, settings, "faulty", message_batches=True)
    assert _outcomes(items) == clean  # retried to the same outcome
    attempts = batch_attempts(runtime.store, "faulty")
    if fault == "expired":
        # the expired request is sent once more as a normal call: one full-price attempt
        resent = [r for r in fake.requests[before:] if r["role"] == "verifier"]
        assert len(resent) == 1
        assert len(attempts) == len(batch_attempts(runtime.store, "clean"))
        return
    failed = [a for a in attempts if a.outcome != "ok"]
    assert failed, "the fault left no attempt row"
    assert all(a.error_type for a in failed)
    assert len(attempts) == len(batch_attempts(runtime.store, "clean")) + len(failed)
