"""Backends for the registry and CLI tests: fakes that record what they were asked, and a
probe that asks a real HTTP server for Prometheus's build info through `BackendClient`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.data.source import BackendStatus, Fetched
from pipeline.errors import SourceError
from pipeline.sources.config import Backend
from pipeline.sources.http import BackendClient


@dataclass
class Made:
    """Every backend a factory table made, in order."""

    backends: list[FakeBackend] = field(default_factory=list)

    def factories(self, *kinds: str) -> dict[str, Any]:
        """A factory per table name, each making a FakeBackend of that kind."""
        return {kind: self._factory(kind) for kind in kinds}

    def _factory(self, kind: str) -> Any:
        def make(source: str, config: Backend) -> FakeBackend:
            backend = FakeBackend(kind, source, config)
            self.backends.append(backend)
            return backend
        return make

    def kinds(self) -> list[str]:
        """The kinds made, in order."""
        return [b.kind for b in self.backends]


@dataclass
class FakeBackend:
    """Answers every query with nothing but the query it was asked (as its `queries`)."""

    kind: str
    source: str
    config: Backend
    asked: list[Any] = field(default_factory=list)
    closed: bool = False

    def _answer(self, query: Any) -> Fetched[Any]:
        self.asked.append(query)
        return Fetched(items=[], total=0, queries=(f"{self.kind}: {query.start.isoformat()}",))

    search_logs = query_metrics = list_alerts = list_deployments = get_events = _answer

    def check(self) -> BackendStatus:
        return BackendStatus(source=self.source, backend=self.kind, url=self.config.url,
                             reachable=True, version="9.9.9", auth_ok=True)

    def close(self) -> None:
        self.closed = True


class BuildinfoProbe:
    """A Prometheus probe over real HTTP: GET /api/v1/status/buildinfo."""

    def __init__(self, source: str, config: Backend) -> None:
        self.client = BackendClient(source, "prometheus", config)

    def check(self) -> BackendStatus:
        url = self.client.config.url
        try:
            body, _ = self.client.get_json("/api/v1/status/buildinfo")
        except SourceError as exc:
            refused = "refused the credentials" in str(exc)
            return BackendStatus(source=self.client.source, backend="prometheus", url=url,
                                 reachable=refused, auth_ok=False if refused else None,
                                 detail=str(exc))
        return BackendStatus(source=self.client.source, backend="prometheus", url=url,
                             reachable=True, version=body["data"]["version"], auth_ok=True)

    def close(self) -> None:
        self.client.close()
