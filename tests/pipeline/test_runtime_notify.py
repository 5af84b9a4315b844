"""The runtime enqueues notification deliveries with the run's release, on both databases:
only the targets whose rule matches, the "alert" rule reading the run's origin, and the ids in
the outcome for the task layer to send; a redelivered finalize enqueues nothing more."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from pipeline.config import VeritySettings
from pipeline.factory import build_runtime, resolve_scenario
from pipeline.run.runtime import NodeOutcome, Runtime
from pipeline.scenarios import load_scenario
from pipeline.sources.config import SlackTarget, WebhookTarget
from pipeline.store import RunStore

TENANT = "team-a"
ON_PASS = SlackTarget(type="slack", url_env="SLACK_URL", when=("PASS", "LOW_CONFID"))
ON_REJECT = SlackTarget(type="slack", url_env="SLACK_URL", when=("REJECT",))
ON_ALERT = WebhookTarget(type="webhook", url="https://h.example/x", secret_env="S",
                         when="alert")


@pytest.fixture
def runtime(store: RunStore) -> Iterator[Runtime]:
    built = build_runtime(VeritySettings(provider="offline"), store=store)
    built.notify_targets = lambda tenant: (ON_PASS, ON_REJECT, ON_ALERT) \
        if tenant == TENANT else ()
    yield built
    if built.leases is not None:
        built.leases.close()


def _to_finalize(runtime: Runtime, *, origin: str = "run") -> tuple[str, NodeOutcome]:
    path = resolve_scenario("checkout-pool-exhaustion", None)
    run_id = runtime.submit(load_scenario(Path(path)).meta.question, source=path,
                            tenant_id=TENANT)
    if origin != "run":  # what the alert intake will store; submit has no origin yet
        with runtime.store.engine.begin() as connection:  # type: ignore[attr-defined]
            connection.execute(text("UPDATE diagnosis_run SET source = :o WHERE run_id = :r"),
                               {"o": origin, "r": run_id})
    outcome = runtime.coordinate(run_id, 0)
    while outcome.next is not None and outcome.next.node != "finalize":
        for tool_call_id in outcome.next.tool_call_ids:
            runtime.run_tool_call(run_id, tool_call_id)
        outcome = runtime.run_node(run_id, outcome.next.node, outcome.version)
    assert outcome.next is not None
    return run_id, outcome


def test_the_release_enqueues_the_matching_targets(runtime: Runtime) -> None:
    run_id, before = _to_finalize(runtime)
    done = runtime.run_node(run_id, "finalize", before.version)
    record = runtime.store.get_run(run_id, tenant_id=TENANT)
    assert record.verdict is not None and record.verdict.value in ("PASS", "LOW_CONFID")
    stored = runtime.store.list_deliveries(run_id, tenant_id=TENANT)
    assert [d.kind for d in stored] == ["slack"]  # not REJECT's, not the alert rule's
    assert done.deliveries == (stored[0].delivery_id,)
    again = runtime.run_node(run_id, "finalize", before.version)  # a redelivered message
    assert again.deliveries == () and len(runtime.store.list_deliveries(
        run_id, tenant_id=TENANT)) == 1


def test_a_run_an_alert_started_also_goes_to_the_alert_targets(runtime: Runtime) -> None:
    run_id, before = _to_finalize(runtime, origin="alert")
    runtime.run_node(run_id, "finalize", before.version)
    kinds = sorted(d.kind for d in runtime.store.list_deliveries(run_id, tenant_id=TENANT))
    assert kinds == ["slack", "webhook"]
