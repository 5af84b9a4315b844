"""Tenants through the producer API, with real workers on real Redis and PostgreSQL: a session
is its tenant's own, and another tenant's run cannot be read, followed or cancelled."""

from __future__ import annotations

import json

from models.common import RunStatus
from pipeline.scenarios import default_scenarios_dir
from pipeline.store import RunStore
from tests.integration.conftest import TENANT, Workers, produce

CHECKOUT = str(default_scenarios_dir() / "checkout-pool-exhaustion")
QUESTION = "Why is checkout-service returning 500s?"
OTHER = "team-b"

_SUBMIT_AND_WAIT = (
    "import json\n"
    f"run_id = client.submit({QUESTION!r}, session_id='sre-42', data_source={CHECKOUT!r})\n"
    "record = client.wait(run_id, timeout=60)\n"
    "print(json.dumps({'run_id': run_id, 'status': record.status.value,"
    " 'tenant': record.tenant_id}))\n"
)


def _probe(run_id: str) -> str:
    """Producer code: try get, events and cancel on `run_id` and on an unknown id."""
    return (
        "import json\nfrom pipeline.errors import RunNotFoundError\n"
        "out = {}\n"
        f"for target in ({run_id!r}, 'no-such-run'):\n"
        "    for name, call in (('get', client.get), ('events', client.events),\n"
        "                       ('cancel', client.cancel)):\n"
        "        try:\n"
        "            call(target)\n"
        "            out[name + ':' + target] = 'allowed'\n"
        "        except RunNotFoundError as exc:\n"
        "            out[name + ':' + target] = type(exc).__name__ + ': ' + str(exc)\n"
        "print(json.dumps(out))\n"
    )


def _previous_turn(store: RunStore, run_id: str, tenant: str) -> object:
    plan = next(e for e in store.events_since(run_id, tenant_id=tenant)
                if (e.node, e.kind) == ("plan", "completed"))
    return plan.payload["previous_turn"]


def test_a_session_and_its_runs_belong_to_their_tenant(
    workers: Workers, runtime_env: dict[str, str], run_store: RunStore
) -> None:
    other_env = {**runtime_env, "VERITY_TENANT": OTHER}
    workers.start()
    first = json.loads(produce(runtime_env, _SUBMIT_AND_WAIT))
    assert (first["status"], first["tenant"]) == ("SUCCESS", TENANT)

    # the other tenant's "sre-42" is another session: no previous turn
    theirs = json.loads(produce(other_env, _SUBMIT_AND_WAIT))
    assert (theirs["status"], theirs["tenant"]) == ("SUCCESS", OTHER)
    assert _previous_turn(run_store, theirs["run_id"], OTHER) is None

    # and the first tenant's own follow-up does get its previous turn
    second = json.loads(produce(runtime_env, _SUBMIT_AND_WAIT))
    assert _previous_turn(run_store, second["run_id"], TENANT) == first["run_id"]

    # the other tenant cannot read, follow or cancel the first run, nor tell it exists
    out = json.loads(produce(other_env, _probe(first["run_id"])))
    for name in ("get", "events", "cancel"):
        unknown = out[f"{name}:no-such-run"]
        assert unknown == "RunNotFoundError: no run with id 'no-such-run'"
        assert out[f"{name}:{first['run_id']}"] == unknown.replace(
            "no-such-run", first["run_id"])
    record = run_store.get_run(first["run_id"], tenant_id=TENANT)
    assert (record.status, record.cancel_requested) == (RunStatus.SUCCESS, False)
    assert [r.run_id for r in run_store.list_runs(tenant_id=OTHER)] == [theirs["run_id"]]
