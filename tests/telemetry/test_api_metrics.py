"""`/metrics` and the trace link in this process: the page asks for a token unless
VERITY_API_METRICS_PUBLIC allows it; `GET /runs/{id}` links a traced run only when
VERITY_TRACE_URL names where traces are shown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from api import ApiSettings, create_app
from client import VerityClient
from pipeline.config import VeritySettings
from pipeline.factory import build_runtime
from pipeline.run.runtime import Runtime
from pipeline.tokens import hash_secret, new_secret
from tests.api.test_api_inprocess import Served

TENANT = "team-a"
TRACE = "ab" * 16


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    built = build_runtime(VeritySettings(database_url=f"sqlite:///{tmp_path / 'api.db'}"))
    yield built
    built.close()


def serve(runtime: Runtime, settings: ApiSettings) -> tuple[Served, str]:
    secret = new_secret()
    runtime.store.create_token(token_id=new_secret()[:16], tenant_id=TENANT, name="test",
                               secret_sha256=hash_secret(secret))
    app = create_app(lambda tenant: VerityClient(runtime, tenant=tenant), settings)
    return Served(app), secret


@pytest.mark.parametrize(("public", "status"), [(False, 401), (True, 200)])
def test_metrics_without_a_token__only_when_public(runtime: Runtime, public: bool,
                                                   status: int) -> None:
    served, secret = serve(runtime, ApiSettings(metrics_public=public))
    with served:
        assert httpx.get(f"{served.url}/metrics").status_code == status
        page = httpx.get(f"{served.url}/metrics", headers={"authorization": f"Bearer {secret}"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/plain")


@pytest.mark.parametrize(("template", "link"), [
    (None, None),
    ("https://tempo.example/trace/{trace_id}", f"https://tempo.example/trace/{TRACE}"),
])
def test_a_traced_run__links_its_trace_when_a_template_is_set(
        runtime: Runtime, template: str | None, link: str | None) -> None:
    run_id = runtime.store.create_run(tenant_id=TENANT, query="q",
                                      intent=runtime.agents.classify_intent("why 500s?"),
                                      trace_id=TRACE)
    untraced = runtime.store.create_run(tenant_id=TENANT, query="q",
                                        intent=runtime.agents.classify_intent("why 500s?"))
    served, secret = serve(runtime, ApiSettings(trace_url=template))
    with served:
        headers = {"authorization": f"Bearer {secret}"}
        record: dict[str, Any] = httpx.get(f"{served.url}/runs/{run_id}", headers=headers).json()
        plain: dict[str, Any] = httpx.get(f"{served.url}/runs/{untraced}",
                                          headers=headers).json()
    assert (record["trace_id"], record["trace_url"]) == (TRACE, link)
    assert (plain["trace_id"], plain["trace_url"]) == (None, None)
