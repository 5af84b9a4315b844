"""The runtime's model-calling nodes under the node lease, on both databases: a second copy is
refused while the first holds it; a copy whose token is set while its model answers (the run
cancelled, or its lease lost) commits nothing, and its attempt is still a row."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from models.common import RunStatus
from models.verifier import VerifierInput
from pipeline.agents.offline_verifier import verify
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime, resolve_scenario
from pipeline.run.attempts import Retrying
from pipeline.run.cancellation import current_token
from pipeline.run.runtime import NodeOutcome, Runtime
from pipeline.scenarios import load_scenario
from pipeline.store import RunStore
from tests.doubles import Scripted, function_model

TENANT = "team-a"
"""The owner of this module's runs."""


def _verifier(during: Callable[[], object]) -> Scripted:
    """The offline Verifier, running `during` while its call is in flight."""

    def answer(payload: bytes) -> str:
        during()
        return verify(VerifierInput.model_validate_json(payload)).model_dump_json()

    return function_model(answer, model="test-verifier")


def _remote(runtime: Runtime, verifier: Scripted) -> Scripted:
    """`verifier` as the runtime's, standing in for a remote model (as Claude's is built)."""
    runtime.agents.verifier = Retrying(verifier, remote=True)
    runtime.agents.remote = True
    return verifier


@pytest.fixture
def runtime(store: RunStore) -> Iterator[Runtime]:
    built = build_runtime(VeritySettings(provider="offline"), store=store)
    yield built
    if built.leases is not None:
        built.leases.close()


def _to_verify(runtime: Runtime) -> tuple[str, NodeOutcome]:
    path = resolve_scenario("checkout-pool-exhaustion", None)
    run_id = runtime.submit(load_scenario(Path(path)).meta.question, source=path,
                            tenant_id=TENANT)
    outcome = runtime.coordinate(run_id, 0)
    while outcome.next is not None and outcome.next.node != "verify":
        for tool_call_id in outcome.next.tool_call_ids:
            runtime.run_tool_call(run_id, tool_call_id)
        outcome = runtime.run_node(run_id, outcome.next.node, outcome.version)
    assert outcome.kind == "committed"
    return run_id, outcome


def test_lease__a_second_copy_of_a_running_node_is_refused(runtime: Runtime) -> None:
    run_id, at_verify = _to_verify(runtime)
    seen: list[NodeOutcome] = []
    _remote(runtime, _verifier(
        lambda: seen.append(runtime.run_node(run_id, "verify", at_verify.version))))
    first = runtime.run_node(run_id, "verify", at_verify.version)
    assert [o.kind for o in seen] == ["leased"]
    assert first.kind == "committed" and first.next is not None
    assert runtime.store.get_run(run_id, tenant_id=TENANT).node == "verify"


def test_lease__a_copy_cancelled_mid_call_commits_nothing_and_keeps_its_attempt(
    runtime: Runtime,
) -> None:
    run_id, at_verify = _to_verify(runtime)

    def cancel_now() -> None:
        runtime.cancel(run_id, tenant_id=TENANT)
        token = current_token()
        assert token is not None
        token.cancel("its run was cancelled")  # what the keeper's next renewal does

    _remote(runtime, _verifier(cancel_now))
    outcome = runtime.run_node(run_id, "verify", at_verify.version)
    assert outcome.kind == "terminal"
    record = runtime.store.get_run(run_id, tenant_id=TENANT)
    assert record.status is RunStatus.CANCELLED and record.final_answer is None
    assert [e for e in runtime.store.events_since(run_id,
                                                  tenant_id=TENANT) if e.node == "verify"] == []
    assert [a.role for a in runtime.store.list_attempts(run_id)].count("verifier") == 1


def test_lease__a_copy_that_lost_its_lease_mid_call_leaves_the_run_to_the_other(
    runtime: Runtime,
) -> None:
    run_id, at_verify = _to_verify(runtime)

    def lose() -> None:
        token = current_token()
        assert token is not None
        token.cancel("its node lease was taken over")

    _remote(runtime, _verifier(lose))
    outcome = runtime.run_node(run_id, "verify", at_verify.version)
    assert outcome.kind == "leased"
    head = runtime.store.get_run(run_id, tenant_id=TENANT)
    assert (head.status, head.version) == (RunStatus.RUNNING, at_verify.version)
    # the attempt of the copy that lost is a row with its answer: the next copy reuses that
    # answer (same input bytes) instead of calling the model again
    second = _remote(runtime, _verifier(lambda: None))
    assert runtime.run_node(run_id, "verify", at_verify.version).kind == "committed"
    assert second.calls == []
    numbers = [a.attempt_number for a in runtime.store.list_attempts(run_id)
               if a.role == "verifier"]
    assert numbers == [1]
    assert runtime.store.get_run(run_id, tenant_id=TENANT).version > at_verify.version

