"""The Kubernetes connector against the replay API server serving the shipped scenarios:
events and rollout history equal to the folder's records, paging with `continue`, field and
label selectors, and the faults."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from pipeline.data.records import Deployment, KubeEvent
from pipeline.data.source import ChangeQuery, EventQuery
from pipeline.errors import SourceError
from pipeline.scenarios import load_scenario, scenario_path
from pipeline.sources.config import BearerAuth, KubernetesBackend
from pipeline.sources.kubernetes import Kubernetes, escape_field_value, image_tag
from tests.sources.replay import KubernetesReplay, free_port

SCENARIOS = ["checkout-pool-exhaustion", "inventory-oom-crashloop",
             "orders-latency-payment-gateway"]
TOKEN_ENV = "VERITY_TEST_KUBE_TOKEN"
TOKEN = "kube-s3cret-41d2e8"


def _config(url: str, **extra: object) -> KubernetesBackend:
    return KubernetesBackend.model_validate({
        "url": url, "namespaces": ["shop"], "page_size": 500,
        "author_annotation": KubernetesReplay.author_annotation, **extra})


def _event_key(e: KubeEvent) -> tuple[object, ...]:
    return (e.ts, e.namespace, e.kind, e.object, e.reason, e.message, e.count, e.type)


def _deploy_key(d: Deployment) -> tuple[object, ...]:
    return (d.service, d.version, d.previous_version, d.deployed_at, d.change, d.author,
            d.kind, d.status)


def _event_cases(name: str) -> Iterator[tuple[str, EventQuery]]:
    scenario = load_scenario(scenario_path(name))
    now, service = scenario.now, scenario.meta.service
    day = now.replace(hour=0, minute=0, second=0)
    yield "all-day", EventQuery(start=day, end=now)
    yield "service", EventQuery(start=day, end=now, service=service)
    kind = "Warning" if any(e.type == "Warning" for e in scenario.event_list) else "Normal"
    yield "type", EventQuery(start=day, end=now, type=kind)
    last = [e for e in scenario.event_list if e.type == kind][-1]
    yield "type-and-reason-2h", EventQuery(start=last.ts - timedelta(hours=2), end=last.ts,
                                           type=kind, reason=last.reason)
    reasons = sorted({e.reason for e in scenario.event_list})
    yield "reason", EventQuery(start=day, end=now, reason=reasons[len(reasons) // 2])
    events = scenario.event_list
    yield "edges", EventQuery(start=events[1].ts, end=events[-2].ts, namespace="shop")


EVENT_CASES = [(n, c) for n in SCENARIOS for c, _ in _event_cases(n)]


def _folder_events(name: str, q: EventQuery) -> list[KubeEvent]:
    return [e for e in load_scenario(scenario_path(name)).event_list
            if q.start <= e.ts <= q.end
            and (q.service is None or e.object == q.service
                 or e.object.startswith(q.service + "-"))
            and (q.namespace is None or e.namespace == q.namespace)
            and (q.reason is None or e.reason == q.reason)
            and (q.type is None or e.type == q.type)]


@pytest.mark.parametrize(("name", "case_id"), EVENT_CASES,
                         ids=[f"{n}-{c}" for n, c in EVENT_CASES])
@pytest.mark.parametrize("page_cap", [None, 7], ids=["one-page", "pages-of-7"])
def test_get_events__match_the_folder(name: str, case_id: str, page_cap: int | None) -> None:
    q = dict(_event_cases(name))[case_id]
    with KubernetesReplay(scenario_path(name), page_cap=page_cap) as replay, \
            Kubernetes("t", _config(replay.url)) as kube:
        fetched = kube.get_events(q)
    expected = _folder_events(name, q)
    assert expected, "a case that matches nothing proves little"
    assert [_event_key(e) for e in fetched.items] == [_event_key(e) for e in expected]
    assert fetched.total == len(expected) and not fetched.truncated
    sent = [parse_qs(urlsplit(text).query) for text in fetched.queries]
    assert len(sent) == len(replay.requests)
    assert all(urlsplit(t.removeprefix("GET ")).path == "/api/v1/namespaces/shop/events"
               for t in fetched.queries)
    selector = [f"{k}={v}" for k, v in (("reason", q.reason), ("type", q.type)) if v]
    assert all(s.get("fieldSelector", [""]) == [",".join(selector)] for s in sent)
    if page_cap and not (q.reason or q.type):  # the whole namespace's events: several pages
        assert sum("continue" in s for s in sent) == len(sent) - 1 >= 2


@pytest.mark.parametrize("name", SCENARIOS)
@pytest.mark.parametrize("service", ["focus", "all", "other"])
@pytest.mark.parametrize("page_cap", [None, 1], ids=["one-page", "pages-of-1"])
def test_list_deployments__match_the_folder(name: str, service: str,
                                            page_cap: int | None) -> None:
    scenario = load_scenario(scenario_path(name))
    records = scenario.deployment_list
    chosen = {"focus": scenario.meta.service, "all": None,
              "other": next(d.service for d in records
                            if d.service != scenario.meta.service)}[service]
    q = ChangeQuery(start=scenario.now - timedelta(hours=12), end=scenario.now, service=chosen)
    with KubernetesReplay(scenario_path(name), page_cap=page_cap) as replay, \
            Kubernetes("t", _config(replay.url)) as kube:
        fetched = kube.list_deployments(q)
    expected = [d for d in records if q.start <= d.deployed_at <= q.end
                and (chosen is None or d.service == chosen)]
    assert expected
    assert [_deploy_key(d) for d in fetched.items] == [_deploy_key(d) for d in expected]
    paths = [urlsplit(t.removeprefix("GET ")).path for t in fetched.queries]
    assert "/apis/apps/v1/namespaces/shop/deployments" in paths
    assert "/apis/apps/v1/namespaces/shop/replicasets" in paths
    if chosen:
        assert f"labelSelector=app={chosen}" in fetched.queries[0]


def test_list_deployments__older_revisions_outside_the_window_name_the_previous_version(
        ) -> None:
    name = "checkout-pool-exhaustion"
    scenario = load_scenario(scenario_path(name))
    q = ChangeQuery(start=scenario.now - timedelta(days=30), end=scenario.now,
                    service="checkout-service")
    with KubernetesReplay(scenario_path(name)) as replay, \
            Kubernetes("t", _config(replay.url)) as kube:
        fetched = kube.list_deployments(q)
    assert [(d.version, d.previous_version) for d in fetched.items] == [
        ("v2.3.0", None), ("v2.3.1", "v2.3.0")]
    assert fetched.items[0].deployed_at == fetched.items[1].deployed_at - timedelta(days=7)


def test_list_deployments__version_annotation_and_failed_rollout() -> None:
    name = "inventory-oom-crashloop"
    scenario = load_scenario(scenario_path(name))
    with KubernetesReplay(scenario_path(name)) as replay:
        for rs in replay.replicasets:
            rs["metadata"]["annotations"]["app.example/version"] = "build-" + \
                rs["spec"]["template"]["spec"]["containers"][0]["image"].rsplit(":", 1)[1]
        for deployment in replay.deployments:
            deployment["status"]["conditions"][1].update(
                status="False", reason="ProgressDeadlineExceeded")
        config = _config(replay.url, version_annotation="app.example/version")
        with Kubernetes("t", config) as kube:
            fetched = kube.list_deployments(ChangeQuery(
                start=scenario.now - timedelta(hours=12), end=scenario.now,
                service="inventory-service"))
    assert [(d.version, d.previous_version, d.status) for d in fetched.items] == [
        ("build-v5.1.0", "build-v5.0.3", "failed")]


def test_replay__rejects_selectors_kubernetes_rejects() -> None:
    with KubernetesReplay(scenario_path(SCENARIOS[0])) as replay:
        field = httpx.get(f"{replay.url}/api/v1/namespaces/shop/events",
                          params={"fieldSelector": "message=x"})
        label = httpx.get(f"{replay.url}/apis/apps/v1/namespaces/shop/deployments",
                          params={"labelSelector": "app=(x"})
        stale = httpx.get(f"{replay.url}/api/v1/namespaces/shop/events", params={
            "limit": "2"})
        replay.resource_version += 1
        expired = httpx.get(f"{replay.url}/api/v1/namespaces/shop/events", params={
            "limit": "2", "continue": stale.json()["metadata"]["continue"]})
    assert (field.status_code, field.json()["kind"], field.json()["reason"]) == \
        (400, "Status", "BadRequest")
    assert label.status_code == 400
    assert (expired.status_code, expired.json()["reason"]) == (410, "Expired")


def test_expired_continue__is_a_source_error() -> None:
    with KubernetesReplay(scenario_path(SCENARIOS[1]), page_cap=5) as replay:
        original = replay.route

        def bump(request):  # type: ignore[no-untyped-def]
            if "continue" in request.params:
                replay.resource_version += 1
            return original(request)

        replay.route = bump  # type: ignore[method-assign]
        scenario = load_scenario(scenario_path(SCENARIOS[1]))
        with Kubernetes("t", _config(replay.url)) as kube, pytest.raises(SourceError) as caught:
            kube.get_events(EventQuery(start=scenario.now - timedelta(days=1), end=scenario.now))
    assert str(caught.value).startswith("t/kubernetes answered HTTP 410: The provided continue")


def test_helpers__image_tags_and_field_escapes() -> None:
    assert image_tag("registry.local/orders-api:v7.8.0") == "v7.8.0"
    assert image_tag("registry.local:5000/team/orders-api") == "latest"
    assert image_tag("r:5000/a/b:1.2@sha256:" + "ab" * 32) == "1.2"
    assert image_tag("r/a@sha256:" + "cd" * 32) == "cd" * 6
    assert escape_field_value("a,b=c\\d") == "a\\,b\\=c\\\\d"


def test_service_names__are_checked_before_any_request() -> None:
    with KubernetesReplay(scenario_path(SCENARIOS[0])) as replay, \
            Kubernetes("t", _config(replay.url)) as kube:
        scenario = load_scenario(scenario_path(SCENARIOS[0]))
        for bad in ["x,app!=y", "A_B", "x=y"]:
            with pytest.raises(SourceError, match="not a Kubernetes object name"):
                kube.list_deployments(ChangeQuery(start=scenario.now, end=scenario.now,
                                                  service=bad))
    assert replay.requests == []


def test_check__git_version_and_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    auth = {"type": "bearer", "token_env": TOKEN_ENV}
    with KubernetesReplay(scenario_path(SCENARIOS[0]), token=TOKEN) as replay, \
            Kubernetes("t", _config(replay.url, auth=auth)) as kube:
        good = kube.check()
        replay.token = "another"
        refused = kube.check()
    assert (good.reachable, good.auth_ok, good.version) == (
        True, True, KubernetesReplay.git_version)
    assert (refused.reachable, refused.auth_ok) == (True, False)
    with Kubernetes("t", _config(f"http://127.0.0.1:{free_port()}")) as kube:
        down = kube.check()
    assert (down.reachable, down.auth_ok) == (False, None)


def test_token_file__in_cluster_style(tmp_path: object) -> None:
    from pathlib import Path
    token_file = Path(str(tmp_path)) / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    scenario = load_scenario(scenario_path(SCENARIOS[0]))
    auth = BearerAuth(type="bearer", token_file=str(token_file))
    with KubernetesReplay(scenario_path(SCENARIOS[0]), token=TOKEN) as replay, \
            Kubernetes("t", _config(replay.url, auth=auth)) as kube:
        fetched = kube.get_events(EventQuery(start=scenario.now - timedelta(days=1),
                                             end=scenario.now))
    assert len(fetched.items) == len(scenario.event_list)


FAULTS = ["unreachable", "401", "500", "timeout", "big", "malformed"]
REASONS = {
    "unreachable": "t/kubernetes unreachable: ",
    "401": "t/kubernetes refused the credentials (HTTP 401)",
    "500": "t/kubernetes answered HTTP 500: Internal error occurred: etcdserver: request "
           "timed out",
    "timeout": "t/kubernetes timed out after 0.5 s",
    "big": "t/kubernetes answered more than 1048576 bytes (the bound)",
    "malformed": "t/kubernetes answered something that is not JSON",
}


@pytest.mark.parametrize("call", ["events", "deployments"])
@pytest.mark.parametrize("fault", FAULTS)
def test_faults__one_line_reason_without_the_credential(
        fault: str, call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    scenario = load_scenario(scenario_path(SCENARIOS[0]))
    with KubernetesReplay(scenario_path(SCENARIOS[0]), token=TOKEN) as replay:
        replay.fault = fault if fault not in ("unreachable", "401") else None
        if fault == "401":
            replay.token = "the-server-wants-another"
        url = f"http://127.0.0.1:{free_port()}" if fault == "unreachable" else replay.url
        config = _config(url, timeout_s=0.5, max_bytes=1024 * 1024,
                         auth={"type": "bearer", "token_env": TOKEN_ENV})
        with Kubernetes("t", config) as kube, pytest.raises(SourceError) as caught:
            if call == "events":
                kube.get_events(EventQuery(start=scenario.now - timedelta(hours=1),
                                           end=scenario.now))
            else:
                kube.list_deployments(ChangeQuery(start=scenario.now - timedelta(hours=1),
                                                  end=scenario.now))
    message = str(caught.value)
    assert message.startswith(REASONS[fault])
    assert "\n" not in message and len(message) <= 220
    assert TOKEN not in message
