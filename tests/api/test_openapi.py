"""schemathesis against the app's own OpenAPI, over real HTTP (the module's world: `verity
serve`, real workers, Redis and PostgreSQL), with a valid token: no 5xx, and every status
code, content type, header and body as the schema documents them. Bounded: a few examples per
operation, well under two minutes in all.

Each operation is driven through its hypothesis strategy (schemathesis's pytest plugin does
not load under pytest 9), and every operation's failure is reported, not just the first."""

from __future__ import annotations

import time
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.config import SchemathesisConfig

from tests.api.conftest import World

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

EXAMPLES = 30
BUDGET_S = 110.0


def _check(operation: Any) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        # a cursor is opaque: one the API did not give is 422 by design, however well formed;
        # and a transcript or answer is another agent's text: one that is not a transcript of
        # its format, or states nothing to check, is 422 by design (no schema can say which)
        forged = bool(case.query and case.query.get("cursor"))
        foreign = case.path == "/checks" and case.method.upper() == "POST"
        response = case.call(timeout=30)
        # an alert notification takes fields the schema does not name (Grafana's own), so a
        # schema-valid one may be larger than the body limit: a 413 (documented) by design
        oversized = case.path == "/hooks/alertmanager" and response.status_code == 413
        case.validate_response(response, excluded_checks=[
            checks.positive_data_acceptance] if forged or foreign or oversized else None)

    run()


def test_the_api_keeps_its_openapi_contract(world: World) -> None:
    secret = world.token()
    # the token as the schema's HTTPBearer scheme: the ignored-auth check can take it away.
    # NUL in any text is a 422 by design (no store column holds one), which JSON Schema's
    # strings do not say: not generated (test_nul_is_422_not_500 covers it)
    config = SchemathesisConfig.from_dict(
        {"auth": {"openapi": {"HTTPBearer": {"bearer": secret}}},
         "generation": {"allow-x00": False}})
    schema = schemathesis.openapi.from_url(f"{world.base_url}/openapi.json", config=config)
    started = time.monotonic()
    failures: list[str] = []
    operations = [found.ok() for found in schema.get_all_operations()]
    assert len(operations) >= 14, [op.label for op in operations]
    for operation in operations:
        try:
            _check(operation)
        except (Exception, BaseExceptionGroup) as exc:  # collected, reported together below
            failures.append(f"{operation.label}: {str(exc).strip()[:1500]}")
        assert time.monotonic() - started < BUDGET_S, "over the time budget"
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize(("method", "path", "body"), [
    pytest.param("POST", "/runs", {"question": "a\x00b", "source": "scenario:x"}, id="body"),
    pytest.param("POST", "/batches", {"selection": {"session_id": "\x00"}}, id="nested-body"),
    pytest.param("GET", "/runs?session=%00", None, id="query"),
    pytest.param("GET", "/runs/a%00b", None, id="path"),
])
def test_nul_is_422_not_500(world: World, method: str, path: str, body: Any) -> None:
    with world.http(world.token()) as http:
        answer = http.request(method, path, json=body)
    assert answer.status_code == 422, answer.text
    assert "NUL" in answer.json()["error"]
