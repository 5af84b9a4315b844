"""`POST /checks` and `GET /checks/{id}` over real HTTP (the module's world: `verity serve`,
real workers, PostgreSQL): another agent's answer checked claim by claim, stored as the
tenant's run, unseen by other tenants, and bad input a 422 that stores nothing."""

from __future__ import annotations

import json

import pytest

from tests.api.conftest import World

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

ANSWER = ("checkout-service logged 512 ERROR lines about the payment-db pool.\n"
          "It logged 521 ERROR lines about the pool at 14:03.\n"
          "The DNS resolver dns-7.internal dropped packets.\n")
EVIDENCE = [{"name": "search_logs.json", "content": json.dumps({"top_messages": [
    {"count": 512, "level": "ERROR", "service": "checkout-service",
     "message": "payment-db connection pool exhausted (max 20)",
     "first": "2026-11-30T14:03:12Z"}]})}]


def _check(world: World, secret: str, **body: object) -> tuple[int, dict[str, object]]:
    with world.http(secret) as http:
        response = http.post("/checks", json={
            "format": "files", "answer": ANSWER, "evidence": EVIDENCE, "provider": "offline",
            "question": "Why is checkout-service returning 500s?", **body})
    return response.status_code, response.json()


def test_a_check_is_stored_as_the_tenants_run(world: World) -> None:
    secret = world.token()
    status, report = _check(world, secret)
    assert status == 201, report
    verifications = [c["verification"] for c in report["claims"]]  # type: ignore[index]
    assert verifications == ["direct_observation", "contradicted", "unsupported"]
    run_id = report["run_id"]
    with world.http(secret) as http:
        assert http.get(f"/checks/{run_id}").json() == report
        record = http.get(f"/runs/{run_id}").json()
        assert record["source"] == "import" and record["imported"]["answer"] == ANSWER
        assert record["verdict"] == report["verdict"]
    with world.http(world.token()) as other:  # another tenant: not there
        assert other.get(f"/checks/{run_id}").status_code == 404
        assert other.get(f"/runs/{run_id}").status_code == 404


def test_bad_checks_are_422_and_store_nothing(world: World) -> None:
    tenant = f"t-bad-{id(world)}"
    bodies: list[dict[str, object]] = [
        {"format": "anthropic", "answer": None, "evidence": [], "transcript": "{not json"},
        {"format": "openai", "answer": None, "evidence": [], "transcript": {"messages": []}},
        {"answer": "## Title\n\nWhy?\n"},
        {"evidence": [{"name": "pods.json", "content": "{"}]},
        {"format": "files", "answer": None},
    ]
    for body in bodies:  # a token each: every request counts against its runs per minute
        status, error = _check(world, world.token(tenant), **body)
        assert status == 422, (body, error)
        assert "\n" not in json.dumps(error)
    assert world.query("SELECT count(*) FROM diagnosis_run WHERE tenant_id = :t",
                       t=tenant)[0][0] == 0


def test_a_run_that_is_not_a_check_has_no_check_report(world: World) -> None:
    secret = world.token()
    with world.http(secret) as http:
        created = http.post("/runs", json={"question": "Why is checkout-service returning 500s?",
                                           "source": "scenario:checkout-pool-exhaustion"})
        assert created.status_code == 202, created.text
        run_id = created.json()["run_id"]
        refused = http.get(f"/checks/{run_id}")
        assert refused.status_code == 422
        assert "is not an imported answer's check" in refused.text
        assert http.get("/checks/no-such-run").status_code == 404
