"""Prometheus: metrics through PromQL `query_range`, alert history through the `ALERTS` series.

    prom = Prometheus("prod", config)
    prom.query_metrics(MetricQuery(start, end, service="checkout", metric="latency"))
    #   GET /api/v1/query_range?query={__name__=~"(?i).*latency.*",job="checkout"}&...

Metrics. One `query_range` per query, evaluated every `step_s` seconds from the first step at or
after the window's start to the last at or before its end (a window too long for
`MAX_POINTS` steps gets a coarser multiple of the step). The selector is the configured
`service_selector` with `{service}` replaced (a service name must match `SERVICE_NAME`, so it
cannot inject PromQL) and, for a metric filter, a case-insensitive RE2 match on the name; the
`ALERTS`/`ALERTS_FOR_STATE` series are never metrics. Each returned series becomes one
`MetricSeries`: its service is the `service_label` label (else the queried service, else the
target the labels name, `pipeline.sources.labels`), its unit `config.units[name]` or the
name's suffix (`UNIT_SUFFIXES`; `_total`/`_sum` are looked through, `_rate` says nothing: it may
be a per-second rate or a fraction). Series sharing a name and service (several instances)
are told apart by appending the labels that differ: `up{instance="a:9100"}`. NaN and
infinite values are dropped (Prometheus answers NaN for a stale or undefined point), and
series left empty are left out. At most `MAX_SERIES` series are returned, by service then
name; `total` counts them all.

Counters are rates (`pipeline.sources.counters`): series whose name says they are cumulative
are never returned as levels. Each `_total`/`_count`/`_sum` name the query matched becomes
one more `query_range` of `rate(...[4 steps])`, shown as `rate(NAME[Ws])`; each histogram's
`_bucket` name one of `histogram_quantile(0.95, rate(...))`; `_created` timestamps are left
out. At most `MAX_DERIVED` such names per query (the others' series count in `total`).

Alerts. `ALERTS{alertstate="firing"}` over the window (the same steps) is the rule evaluator's
own record: every contiguous run of steps in which one label set fires is one `Alert`. A run
still present at the window's last step is `firing`; otherwise `resolved`, with `ends_at` the
last step it was seen (the real end lies within one step after). A run already present at the
first step started at or before it: its `starts_at` is clipped to the window. The severity is
the `severity` label. The summary is the first of `summary_annotations` of the matching active
alert in `/api/v1/alerts` (only asked when a run fires at the window's end), else of the rule
of that name in `/api/v1/rules` when the annotation is literal text (a templated one, with
`{{`, names no value here and is left out).

`Fetched.queries` holds every request as `BackendClient.query_text` records it, the PromQL
readable in it. Prometheus's `warnings` (partial answers) are appended to that request's
text (`... # warnings: ...`) and logged; error bodies (`status: error`) are SourceErrors naming
`errorType` and `error`.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from pipeline.data.records import Alert, MetricSeries
from pipeline.data.source import AlertQuery, BackendStatus, Fetched, MetricQuery
from pipeline.errors import SourceError
from pipeline.sources.config import PrometheusBackend
from pipeline.sources.conventions import STATUS_LABELS, error_ratio, saturation, select
from pipeline.sources.counters import MAX_DERIVED, derived, kind_of, rate_window_s
from pipeline.sources.http import BackendClient
from pipeline.sources.labels import SERVICE_LABELS, target_name

log = logging.getLogger(__name__)

MAX_SERIES = 500
"""Series returned per metrics query; `total` says how many matched."""
MAX_POINTS = 11_000
"""Steps per query: Prometheus refuses more than 11,000 points per series."""
MAX_ALERTS = 500
"""Alerts returned per alerts query."""
SERVICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,199}$")
"""What a service name may be: no quotes, braces, commas, backslashes or spaces."""
UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_milliseconds", "ms"), ("_ms", "ms"), ("_seconds", "s"), ("_bytes", "bytes"),
    ("_mib", "MiB"), ("_ratio", "ratio"), ("_percent", "%"), ("_per_second", "rps"),
    ("_cores", "cores"), ("_count", "count"), ("_bucket", "count"),
)
"""Unit guessed from a metric name's suffix, first match wins; `_total` counts alone."""
NOT_METRICS = "ALERTS|ALERTS_FOR_STATE"
KNOWN_SHOWN = 12
"""Services named when the one asked for matched nothing."""
MAX_NAMED = 200
"""Gauges selected by their exact names in one query; more (a whole server's) by a pattern."""
_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Envelope(_Wire):
    status: Literal["success", "error"]
    data: Any = None
    errorType: str | None = None  # noqa: N815 - the wire's name
    error: str | None = None
    warnings: list[str] = []


class _Series(_Wire):
    metric: dict[str, str]
    values: list[tuple[float, str]] = []


class _Matrix(_Wire):
    resultType: Literal["matrix"]  # noqa: N815
    result: list[_Series]


class _ActiveAlert(_Wire):
    labels: dict[str, str]
    annotations: dict[str, str] = {}
    state: str = ""


class _ActiveAlerts(_Wire):
    alerts: list[_ActiveAlert]


class _Rule(_Wire):
    name: str
    type: str = ""
    annotations: dict[str, str] = {}


class _Group(_Wire):
    rules: list[_Rule] = []


class _Groups(_Wire):
    groups: list[_Group]


@dataclass(frozen=True, slots=True)
class _Steps:
    start: int
    end: int
    step: int

    def params(self, promql: str) -> dict[str, str]:
        return {"query": promql, "start": str(self.start), "end": str(self.end),
                "step": str(self.step)}


class Prometheus:
    """The Prometheus backend of one source."""

    def __init__(self, source: str, config: PrometheusBackend,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self.client = BackendClient(source, "prometheus", config, transport)

    def query_metrics(self, q: MetricQuery) -> Fetched[MetricSeries]:
        """The service's signals in the window (`pipeline.sources.conventions`): its gauges
        as levels, its counters as rates, its histograms as quantiles, its request counters
        as error ratios and its gauges beside a limit as saturations; with `q.metric`, the
        names containing it and what the conventions say of that symptom."""
        steps = self._steps(q.start, q.end)
        if steps is None:
            return Fetched(items=[], total=0)
        queries: list[str] = []
        target = self._target(q.service, steps, queries)
        if target is None:
            note = self._unmatched(q.service, steps, queries)
            return Fetched(items=[], total=0, queries=tuple(queries), note=note)
        coded, status_label = self._status_coded(target, steps, queries)
        signals = select(target.names, metric=q.metric, status_named=coded)
        selector = ",".join(target.matchers)
        window, by = rate_window_s(steps.step), self.config.service_label
        size, pairs = 0, []
        if signals.gauges:
            names = (_names_matcher(signals.gauges) if len(signals.gauges) <= MAX_NAMED
                     else f'{self._name_matcher(q.metric)},__name__!~"{NOT_METRICS}"')
            matrix, text, size = self._query_range(
                "{" + ",".join([names, *target.matchers]) + "}", steps)
            queries.append(text)
            pairs += [(self._series(raw, q.service), raw.metric) for raw in matrix.result
                      if kind_of(raw.metric.get("__name__", "")) == "gauge"]
        wanted = [error_ratio(name, status_label, selector, window, by)
                  for name in signals.error_ratios]
        wanted += [saturation(gauge, limit, selector, by)
                   for gauge, limit in signals.saturations]
        for name in signals.cumulative:
            stem = name.removesuffix("_bucket") if kind_of(name) == "bucket" else name
            wanted.append(derived(name, selector, window, base_unit=guess_unit(stem)))
        for query in wanted[:MAX_DERIVED]:
            rated, text, more = self._query_range(query.promql, steps)
            queries.append(text)
            size += more
            pairs += [(self._series(raw, q.service, metric=query.metric, unit=query.unit),
                       raw.metric) for raw in rated.result]
        series = _distinguish([(s, labels) for s, labels in pairs if s.times],
                              self.config.service_label)
        series.sort(key=lambda s: (s.service, s.metric))
        left_out = len(wanted[MAX_DERIVED:])
        return Fetched(items=series[:MAX_SERIES], total=len(series) + left_out,
                       queries=tuple(queries), fetched_bytes=size,
                       note=_matched_note(q.service, target))

    def list_alerts(self, q: AlertQuery) -> Fetched[Alert]:
        """Alerts that fired in the window, from the `ALERTS` history, by start then name."""
        steps = self._steps(q.start, q.end)
        if steps is None:
            return Fetched(items=[], total=0)
        queries: list[str] = []
        promql = self._selector(['__name__="ALERTS"', 'alertstate="firing"'], q.service)
        matrix, text, size = self._query_range(promql, steps)
        queries.append(text)
        note = ""
        if not matrix.result and q.service is not None:
            target = self._target(q.service, steps, queries)
            if target is not None and target.matched:
                matrix, text, more = self._query_range("{" + ",".join(
                    ['__name__="ALERTS"', 'alertstate="firing"', *target.matchers]) + "}", steps)
                queries.append(text)
                size += more
                note = _matched_note(q.service, target)
        runs = [run for raw in matrix.result for run in self._runs(raw, steps, q.service)]
        if q.state != "any":
            runs = [run for run in runs if run.alert.state == q.state]
        summaries = _Summaries()
        if any(run.alert.state == "firing" for run in runs):
            size += self._active_summaries(summaries, queries)
        if any(not summaries.find(run.labels) for run in runs):
            size += self._rule_summaries(summaries, queries)
        alerts = sorted((run.alert.model_copy(update={"summary": summaries.find(run.labels)})
                         for run in runs), key=lambda a: (a.starts_at, a.name))
        return Fetched(items=alerts[:MAX_ALERTS], total=len(alerts), queries=tuple(queries),
                       fetched_bytes=size, note=note)

    def check(self) -> BackendStatus:
        """Reachable, version (`/api/v1/status/buildinfo`), credentials accepted."""
        return self.client.probe("/api/v1/status/buildinfo", lambda body: body["data"]["version"])

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()

    # -- queries ---------------------------------------------------------------------------

    def _steps(self, start: datetime, end: datetime) -> _Steps | None:
        step = self.config.step_s
        first, last = _ceil(start.timestamp(), step), _floor(end.timestamp(), step)
        if last < first:
            return None
        count = (last - first) // step + 1
        if count > MAX_POINTS:
            step *= math.ceil(count / MAX_POINTS)
            first, last = _ceil(start.timestamp(), step), _floor(end.timestamp(), step)
        return _Steps(first, last, step)

    def _target(self, service: str | None, steps: _Steps,
                queries: list[str]) -> _Target | None:
        """The service's series as the source labels them: the configured selector when it
        matches anything in the window, else the first of the labels people name services
        by (`SERVICE_LABELS`, `namespace`) with a value equal to the name, ignoring case, or
        to the name without a `-service`-like suffix; None when nothing matches."""
        if service is None:
            return _Target([], self._names([], steps, queries), "")
        configured = self._service_matchers(service)
        names = self._names(configured, steps, queries)
        if names:
            return _Target(configured, names, "")
        present = set(self._labels([], steps, queries))
        pattern = "(?i)" + "|".join(_RE2_SPECIAL.sub(r"\\\1", name)
                                    for name in _spellings(service))
        for label in _service_label_names(self.config.service_label):
            if label not in present:
                continue
            values = self._values(label, [f'{label}=~"{_promql_string(pattern)}"'], steps,
                                  queries)
            if not values:
                continue
            value = next((v for v in values if v.lower() == service.lower()), values[0])
            matchers = [f'{label}="{_promql_string(value)}"']
            names = self._names(matchers, steps, queries)
            if names:
                return _Target(matchers, names, matchers[0])
        return None

    def _unmatched(self, service: str | None, steps: _Steps, queries: list[str]) -> str:
        """Says that `service` matched no series, and which services the configured label
        names, so a reader sees the name was not found, not that all is quiet."""
        label = self.config.service_label
        known = self._values(label, [], steps, queries) if _LABEL.match(label) else []
        shown = ", ".join(known[:KNOWN_SHOWN]) + (", ..." if len(known) > KNOWN_SHOWN else "")
        have = f"; the {label} label has {shown}" if known else ""
        return (f"no series matched {service} through the labels "
                f"{', '.join(_service_label_names(label))}{have}")

    def _status_coded(self, target: _Target, steps: _Steps,
                      queries: list[str]) -> tuple[list[str], str]:
        """The counters of the target whose series carry an HTTP status label, and that
        label (the first of STATUS_LABELS the series have); nothing without counters."""
        if not any(kind_of(n) == "counter" for n in target.names):
            return [], ""
        present = self._labels(target.matchers, steps, queries)
        label = next((name for name in STATUS_LABELS if name in present), None)
        if label is None:
            return [], ""
        coded = self._names([*target.matchers, f'{label}=~"[1-5].."'], steps, queries)
        return coded, label

    def _names(self, matchers: list[str], steps: _Steps, queries: list[str]) -> list[str]:
        """Metric names of the series `matchers` select in the window (every name without
        matchers), the alert series left out."""
        return [n for n in self._values("__name__", matchers, steps, queries)
                if n not in NOT_METRICS.split("|")]

    def _values(self, label: str, matchers: list[str], steps: _Steps,
                queries: list[str]) -> list[str]:
        return self._strings(f"/api/v1/label/{label}/values", matchers, steps, queries)

    def _labels(self, matchers: list[str], steps: _Steps, queries: list[str]) -> list[str]:
        return self._strings("/api/v1/labels", matchers, steps, queries)

    def _strings(self, path: str, matchers: list[str], steps: _Steps,
                 queries: list[str]) -> list[str]:
        params = {"start": str(steps.start), "end": str(steps.end)}
        if matchers:
            params = {"match[]": "{" + ",".join(matchers) + "}", **params}
        data, text, _ = self._get(path, params)
        queries.append(text)
        if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
            raise self.client.error(f"answered {path} with something not a list of names")
        return sorted(data)

    def _selector(self, matchers: list[str], service: str | None) -> str:
        return "{" + ",".join(matchers + self._service_matchers(service)) + "}"

    def _service_matchers(self, service: str | None) -> list[str]:
        if service is None:
            return []
        if not SERVICE_NAME.match(service):
            raise self.client.error(f"cannot select service {service[:60]!r}: a service "
                                    "name is letters, digits and . _ : / @ -")
        return [self.config.service_selector.replace("{service}", service)]

    @staticmethod
    def _name_matcher(metric: str | None) -> str:
        if not metric:
            return '__name__=~".+"'
        literal = _RE2_SPECIAL.sub(r"\\\1", "".join(c for c in metric if c >= " "))
        return f'__name__=~"(?i).*{_promql_string(literal)}.*"'

    def _query_range(self, promql: str, steps: _Steps) -> tuple[_Matrix, str, int]:
        path, params = "/api/v1/query_range", steps.params(promql)
        data, text, size = self._get(path, params)
        try:
            return _Matrix.model_validate(data), text, size
        except ValidationError:
            raise self.client.error("answered a query_range result that is not a matrix"
                                    ) from None

    def _get(self, path: str, params: Mapping[str, str] | None = None) -> tuple[Any, str, int]:
        """The `data` of a success envelope, the request's text (with any warnings), bytes."""
        body, size = self.client.get_json(path, params)
        try:
            envelope = _Envelope.model_validate(body)
        except ValidationError:
            raise self.client.error(f"answered JSON that is not a Prometheus API response "
                                    f"({path})") from None
        if envelope.status == "error":
            raise self.client.error(f"answered an error ({envelope.errorType or 'unknown'}): "
                                    f"{envelope.error or 'no message'}")
        text = self.client.query_text(path, params)
        if envelope.warnings:
            log.warning("%s warns: %s", self.client.label, "; ".join(envelope.warnings))
            text += " # warnings: " + "; ".join(" ".join(w.split()) for w in envelope.warnings)
        return envelope.data, text, size

    # -- mapping ---------------------------------------------------------------------------

    def _series(self, raw: _Series, service: str | None, *, metric: str | None = None,
                unit: str | None = None) -> MetricSeries:
        name = metric or raw.metric.get("__name__", "")
        one = MetricSeries(
            service=raw.metric.get(self.config.service_label) or service
            or target_name(raw.metric, self.config.service_label) or "",
            metric=name, unit=unit if unit is not None
            else self.config.units.get(name, guess_unit(name)))
        for at, value in _finite(raw.values):
            one.times.append(at)
            one.values.append(value)
        return one

    def _runs(self, raw: _Series, steps: _Steps, service: str | None) -> Iterable[_Run]:
        labels = {k: v for k, v in raw.metric.items() if k not in ("__name__", "alertstate")}
        times = [at for at, _ in _finite(raw.values)]
        last_step = datetime.fromtimestamp(steps.end, UTC)
        begin = 0
        for index in range(1, len(times) + 1):
            if index < len(times) and \
                    (times[index] - times[index - 1]).total_seconds() <= steps.step:
                continue
            start, end = times[begin], times[index - 1]
            firing = end >= last_step
            yield _Run(labels, Alert(
                name=labels.get("alertname", "unknown"),
                service=labels.get(self.config.service_label) or service
                or target_name(labels, self.config.service_label) or "unknown",
                severity=labels.get("severity", "unknown"),
                state="firing" if firing else "resolved",
                starts_at=start, ends_at=None if firing else end))
            begin = index

    def _active_summaries(self, summaries: _Summaries, queries: list[str]) -> int:
        data, text, size = self._get("/api/v1/alerts")
        queries.append(text)
        try:
            active = _ActiveAlerts.model_validate(data)
        except ValidationError:
            raise self.client.error("answered /api/v1/alerts in an unknown shape") from None
        for alert in active.alerts:
            if alert.state == "firing":
                summaries.by_labels.append((alert.labels, self._summary(alert.annotations)))
        return size

    def _rule_summaries(self, summaries: _Summaries, queries: list[str]) -> int:
        data, text, size = self._get("/api/v1/rules", {"type": "alert"})
        queries.append(text)
        try:
            groups = _Groups.model_validate(data)
        except ValidationError:
            raise self.client.error("answered /api/v1/rules in an unknown shape") from None
        for group in groups.groups:
            for rule in group.rules:
                summary = self._summary(rule.annotations)
                if rule.type in ("", "alerting") and summary and "{{" not in summary:
                    summaries.by_rule.setdefault(rule.name, summary)
        return size

    def _summary(self, annotations: Mapping[str, str]) -> str:
        for key in self.config.summary_annotations:
            if annotations.get(key):
                return " ".join(annotations[key].split())
        return ""


@dataclass(frozen=True, slots=True)
class _Run:
    labels: dict[str, str]
    alert: Alert


class _Summaries:
    """Summaries found so far: of active alerts (by label set), of rules (by name)."""

    def __init__(self) -> None:
        self.by_labels: list[tuple[dict[str, str], str]] = []
        self.by_rule: dict[str, str] = {}

    def find(self, labels: Mapping[str, str]) -> str:
        for active, summary in self.by_labels:
            if summary and all(active.get(k) == v for k, v in labels.items()):
                return summary
        return self.by_rule.get(labels.get("alertname", ""), "")


@dataclass(frozen=True, slots=True)
class _Target:
    """A service's series as the source labels them: the matchers selecting them, the metric
    names they carry in the window, and the matcher found when it is not the configured
    selector ('' when it is)."""

    matchers: list[str]
    names: list[str]
    matched: str


def _spellings(service: str) -> list[str]:
    """The name, and without a service-like suffix (`checkout-service` is often `checkout`)."""
    bare = re.sub(r"[-_.](?:service|svc|api|app|server)$", "", service, flags=re.IGNORECASE)
    return list(dict.fromkeys([service, bare]))


def _service_label_names(configured: str) -> list[str]:
    """The labels a service's name may be in, as Prometheus label names (a Kubernetes label
    `app.kubernetes.io/name` is `app_kubernetes_io_name` once scraped)."""
    names = [re.sub(r"[^A-Za-z0-9_]", "_", label)
             for label in (configured, *SERVICE_LABELS, "namespace")]
    return [n for n in dict.fromkeys(names) if _LABEL.match(n)]


def _names_matcher(names: Sequence[str]) -> str:
    """A matcher for exactly these metric names (a metric name needs no escaping)."""
    return f'__name__=~"{"|".join(names)}"'


def _matched_note(service: str | None, target: _Target) -> str:
    return f"{service} matched as {target.matched}" if target.matched else ""


def guess_unit(name: str) -> str:
    """The unit a metric name's suffix names (`UNIT_SUFFIXES`), "" when it names none."""
    base = name.lower()
    for counter in ("_total", "_sum"):
        base = base.removesuffix(counter)
    for suffix, unit in UNIT_SUFFIXES:
        if base.endswith(suffix):
            return unit
    return "count" if name.endswith("_total") else ""


def _distinguish(pairs: list[tuple[MetricSeries, dict[str, str]]],
                 service_label: str) -> list[MetricSeries]:
    """Series sharing service and name get the labels that differ among them appended."""
    groups: dict[tuple[str, str], list[tuple[MetricSeries, dict[str, str]]]] = {}
    for one, labels in pairs:
        groups.setdefault((one.service, one.metric), []).append((one, labels))
    for group in groups.values():
        if len(group) < 2:
            continue
        keys = sorted({k for _, labels in group for k in labels} - {"__name__", service_label})
        differ = [k for k in keys if len({labels.get(k, "") for _, labels in group}) > 1]
        for one, labels in group:
            one.metric += "{" + ",".join(f'{k}="{labels.get(k, "")}"' for k in differ) + "}"
    return [one for one, _ in pairs]


def _finite(values: Sequence[tuple[float, str]]) -> Iterable[tuple[datetime, float]]:
    for at, text in values:
        try:
            value = float(text)
        except ValueError:
            continue
        if math.isfinite(value):
            yield datetime.fromtimestamp(at, UTC), value


def _promql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _ceil(seconds: float, step: int) -> int:
    return math.ceil(seconds / step) * step


def _floor(seconds: float, step: int) -> int:
    return math.floor(seconds / step) * step


__all__ = ["MAX_ALERTS", "MAX_POINTS", "MAX_SERIES", "SERVICE_NAME", "UNIT_SUFFIXES",
           "Prometheus", "SourceError", "guess_unit"]
