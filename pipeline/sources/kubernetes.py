"""Events and rollout history from the Kubernetes API, read over plain HTTPS with httpx.

    kube = Kubernetes("prod", KubernetesBackend(url="https://kubernetes.default.svc",
                                                namespaces=("shop",)))
    kube.get_events(EventQuery(start=s, end=e, service="checkout-service"))
    kube.list_deployments(ChangeQuery(start=s, end=e, service="checkout-service"))

Why httpx and not the official `kubernetes` client: Verity reads four list endpoints and
`/version`; the official client brings a generated model for every API group, its own
urllib3 pool, kubeconfig and exec-plugin machinery, and errors that would have to be mapped
again. Through `BackendClient` this backend shares timeouts, the byte bound, TLS, and
credential-free one-line errors with Loki and Prometheus. No kubeconfig is parsed: the config
names the API server's URL, a bearer token (an environment variable, or in a pod the
service-account token file `/var/run/secrets/kubernetes.io/serviceaccount/token`) and the CA
(`tls.ca_file`, in a pod `.../serviceaccount/ca.crt`).

Events: `GET /api/v1/namespaces/{ns}/events` (core/v1, what `kubectl get events` reads) with
`fieldSelector` for reason and type, paged with `limit` and `continue`; kept when the involved
object is the service or starts with `service-` and the event's time (lastTimestamp, else
eventTime, else firstTimestamp) is in the window. Items in the `events.k8s.io/v1` shape
(`regarding`, `note`, `deprecatedLastTimestamp`, `series.count`) are read too.

Rollouts: the Deployments selected by `service_selector` and the ReplicaSets they own (owner
reference), ordered by `deployment.kubernetes.io/revision`; each revision is one record whose
version is the first container's image tag (or `version_annotation`), previous_version the
revision before's, deployed_at the ReplicaSet's creation time, change its
`kubernetes.io/change-cause`; the newest revision's status comes from the Deployment's
conditions, older ones `succeeded`. A rolled-back-to ReplicaSet keeps its creation time.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from pipeline.data.records import Deployment, KubeEvent, Timestamp
from pipeline.data.source import (
    BackendStatus,
    ChangeQuery,
    EventQuery,
    Fetched,
)
from pipeline.errors import SourceError
from pipeline.sources.config import KubernetesBackend
from pipeline.sources.http import BackendClient

REVISION = "deployment.kubernetes.io/revision"
CHANGE_CAUSE = "kubernetes.io/change-cause"
SERVICE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
"""A Kubernetes object name (RFC 1123 subdomain): what a service name must be here."""
_MAX_PAGES = 1000

_TIMES: TypeAdapter[datetime] = TypeAdapter(Timestamp)


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return _TIMES.validate_python(value)
    except ValidationError:
        return None


def escape_field_value(value: str) -> str:
    """A field-selector value with `\\`, `,` and `=` escaped (k8s fields.EscapeValue)."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def image_tag(image: str) -> str:
    """`registry/name:tag@sha256:...` → `tag` (`latest` when untagged; the digest's first
    12 hex digits when only a digest names it)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        return last.rsplit(":", 1)[1]
    if digest:
        return digest.split(":", 1)[-1][:12]
    return "latest"


class Kubernetes:
    """The Kubernetes backend of one source."""

    def __init__(self, source: str, config: KubernetesBackend,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self._client = BackendClient(source, "kubernetes", config, transport)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> Kubernetes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check(self) -> BackendStatus:
        """Probe `GET /version`: reachable, gitVersion, whether the credentials are taken."""
        return self._client.probe("/version", lambda body: body["gitVersion"])

    # -- events -----------------------------------------------------------------------------

    def get_events(self, query: EventQuery) -> Fetched[KubeEvent]:
        """Events of the service's objects in the window, oldest first."""
        service = self._service(query.service)
        selector = [f"{name}={escape_field_value(value)}" for name, value in
                    (("reason", query.reason), ("type", query.type)) if value]
        params = {"fieldSelector": ",".join(selector)} if selector else {}
        texts: list[str] = []
        size = 0
        events: list[KubeEvent] = []
        for namespace in (query.namespace,) if query.namespace else self.config.namespaces:
            path = f"/api/v1/namespaces/{_segment(namespace)}/events"
            for item, read in self._list(path, params, "EventList", texts):
                size += read
                event = _event(item, namespace)
                if event is None or not query.start <= event.ts <= query.end:
                    continue
                if service is None or event.object == service \
                        or event.object.startswith(service + "-"):
                    events.append(event)
        events.sort(key=lambda e: e.ts)
        return Fetched(items=events, total=len(events), queries=tuple(texts),
                       fetched_bytes=size)

    # -- deployments ------------------------------------------------------------------------

    def list_deployments(self, query: ChangeQuery) -> Fetched[Deployment]:
        """Every revision of the service's Deployments rolled out in the window, oldest first."""
        service = self._service(query.service)
        params = {"labelSelector": self.config.service_selector.replace("{service}", service)
                  } if service else {}
        texts: list[str] = []
        size = 0
        records: list[Deployment] = []
        for namespace in self.config.namespaces:
            base = f"/apis/apps/v1/namespaces/{_segment(namespace)}"
            deployments = []
            for item, read in self._list(f"{base}/deployments", params, "DeploymentList", texts):
                size += read
                deployments.append(item)
            for deployment in deployments:
                owned, read = self._replicasets(base, deployment, texts)
                size += read
                records += self._revisions(deployment, owned, service)
        kept = [r for r in records if query.start <= r.deployed_at <= query.end]
        kept.sort(key=lambda r: (r.deployed_at, r.service))
        return Fetched(items=kept, total=len(kept), queries=tuple(texts), fetched_bytes=size)

    def _replicasets(self, base: str, deployment: dict[str, Any], texts: list[str]
                     ) -> tuple[list[dict[str, Any]], int]:
        meta = _dict(deployment.get("metadata"))
        match = _dict(_dict(_dict(deployment.get("spec")).get("selector")).get("matchLabels"))
        params = {"labelSelector": ",".join(f"{k}={v}" for k, v in sorted(match.items()))
                  } if match else {}
        owned, size = [], 0
        for item, read in self._list(f"{base}/replicasets", params, "ReplicaSetList", texts):
            size += read
            owners = _dict(item.get("metadata")).get("ownerReferences") or []
            if any(isinstance(o, dict) and o.get("kind") == "Deployment"
                   and (o.get("uid") == meta.get("uid") if meta.get("uid")
                        else o.get("name") == meta.get("name")) for o in owners):
                owned.append(item)
        return owned, size

    def _revisions(self, deployment: dict[str, Any], owned: list[dict[str, Any]],
                   service: str | None) -> list[Deployment]:
        meta = _dict(deployment.get("metadata"))
        name = str(meta.get("name") or "")
        label = _selector_label(self.config.service_selector)
        service_name = service or (_dict(meta.get("labels")).get(label) if label else None) \
            or name
        ordered = sorted(owned, key=_revision)
        records: list[Deployment] = []
        previous: str | None = None
        for index, rs in enumerate(ordered):
            rs_meta = _dict(rs.get("metadata"))
            notes = _dict(rs_meta.get("annotations"))
            version = self._version(rs, notes)
            created = _parse_time(rs_meta.get("creationTimestamp"))
            if version is None or created is None:
                continue
            newest = index == len(ordered) - 1
            author = None
            if self.config.author_annotation:
                author = notes.get(self.config.author_annotation) or \
                    _dict(meta.get("annotations")).get(self.config.author_annotation)
            try:
                records.append(Deployment(
                    service=str(service_name), version=version, previous_version=previous,
                    deployed_at=created, author=str(author) if author else None,
                    change=str(notes.get(CHANGE_CAUSE) or ""), kind="deploy",
                    status=_rollout_status(deployment) if newest else "succeeded"))
            except ValidationError:
                continue
            previous = version
        return records

    def _version(self, rs: dict[str, Any], notes: dict[str, Any]) -> str | None:
        if self.config.version_annotation and notes.get(self.config.version_annotation):
            return str(notes[self.config.version_annotation])
        template = _dict(_dict(rs.get("spec")).get("template"))
        containers = _dict(template.get("spec")).get("containers") or []
        first = containers[0] if containers and isinstance(containers[0], dict) else {}
        image = first.get("image")
        return image_tag(image) if isinstance(image, str) and image else None

    # -- lists ------------------------------------------------------------------------------

    def _list(self, path: str, params: dict[str, str], kind: str, texts: list[str]
              ) -> Iterator[tuple[dict[str, Any], int]]:
        """The items of a list endpoint, page by page (`limit`, `continue`), with the bytes
        of the page each came in (counted on its first item)."""
        token: str | None = None
        for _ in range(_MAX_PAGES):
            page = {**params, "limit": str(self.config.page_size)}
            if token:
                page["continue"] = token
            texts.append(self._client.query_text(path, page))
            body, size = self._client.get_json(path, page)
            if not isinstance(body, dict) or not isinstance(body.get("items"), list) \
                    or body.get("kind") not in (kind, None):
                raise self._client.error(f"answered {path} with something that is not a {kind}")
            for item in body["items"]:
                if isinstance(item, dict):
                    yield item, size
                    size = 0
            token = _dict(body.get("metadata")).get("continue") or None
            if not token:
                return
        raise self._client.error(f"answered more than {_MAX_PAGES} pages for {path}")

    def _service(self, service: str | None) -> str | None:
        if service is not None and not SERVICE_NAME.match(service):
            raise SourceError(f"service name {service!r} is not a Kubernetes object name")
        return service


def _event(item: dict[str, Any], namespace: str) -> KubeEvent | None:
    """A core/v1 Event (or events.k8s.io/v1 Event) as a KubeEvent; None if unusable."""
    meta = _dict(item.get("metadata"))
    involved = _dict(item.get("involvedObject") or item.get("regarding"))
    when = next((t for t in (_parse_time(item.get(k)) for k in (
        "lastTimestamp", "deprecatedLastTimestamp", "eventTime", "firstTimestamp",
        "deprecatedFirstTimestamp")) if t is not None), None)
    when = when or _parse_time(meta.get("creationTimestamp"))
    series = _dict(item.get("series"))
    count = item.get("count") or item.get("deprecatedCount") or series.get("count") or 1
    try:
        return KubeEvent(
            ts=when, namespace=str(meta.get("namespace") or involved.get("namespace")
                                   or namespace),
            kind=str(involved.get("kind") or ""), object=str(involved.get("name") or ""),
            reason=str(item.get("reason") or ""),
            message=str(item.get("message") or item.get("note") or ""),
            count=int(count), type=item.get("type") or "Normal")
    except (ValidationError, TypeError, ValueError):
        return None


def _rollout_status(deployment: dict[str, Any]) -> str:
    conditions = _dict(deployment.get("status")).get("conditions") or []
    by_type = {c.get("type"): c for c in conditions if isinstance(c, dict)}
    progressing = by_type.get("Progressing", {})
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return "failed"
    if progressing.get("status") == "True" and progressing.get("reason") != \
            "NewReplicaSetAvailable":
        return "in_progress"
    if by_type.get("Available", {}).get("status") == "False":
        return "degraded"
    return "succeeded"


def _revision(rs: dict[str, Any]) -> int:
    notes = _dict(_dict(rs.get("metadata")).get("annotations"))
    try:
        return int(notes.get(REVISION, 0))
    except (TypeError, ValueError):
        return 0


def _selector_label(selector: str) -> str | None:
    match = re.fullmatch(r"\s*([A-Za-z0-9./_-]+)\s*==?\s*\{service\}\s*", selector)
    return match.group(1) if match else None


def _segment(name: str) -> str:
    if not SERVICE_NAME.match(name):
        raise SourceError(f"namespace {name!r} is not a Kubernetes name")
    return name


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


__all__ = ["Kubernetes", "escape_field_value", "image_tag"]
