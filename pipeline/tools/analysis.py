"""Analyzers over stored tool projections: bursts, shifts, events, deploys, onsets, dependencies.

Pure functions of the invocations an agent has seen. They find signals; deciding what the
signals mean (and what may be claimed) is the investigator's job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import cached_property

from models import tool_names
from pipeline.data.metric_names import is_duration, is_error_ratio, is_target, saturation_of
from pipeline.data.records import LEVEL_RANK
from pipeline.rules.facts import FactKind, extract_facts
from pipeline.tools.views import (
    CallView,
    Element,
    LogPattern,
    MetricView,
    log_patterns,
    metric_series,
)

WARN_RANK = LEVEL_RANK["WARN"]
DEPLOY_LEAD = timedelta(minutes=90)
"""A deploy is in time for an onset when it went out at most this long before it."""
ONSET_SLACK = timedelta(minutes=2)
"""Sampling slack: a deploy this much after the first sign still counts as before it."""
SATURATED = 0.95
"""A gauge at this share of its limit or more is at its limit."""
DEPENDENCY_SLACK = timedelta(minutes=5)
"""A dependency's anomaly may start at most this long after the failing service's onset."""
_MEMORY = re.compile(r"\b(?:memory|oom\w*|heap|killed|exit code 137|restart\w*)\b", re.I)
_PLACEHOLDER = re.compile(r"<(?:n|id|ts|ip|uuid)>")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9]")
_METRIC_KINDS = {
    "latency": "latency slow timeouts", "error": "errors", "memory": "memory limit",
    "restart": "restarts", "request": "traffic",
}


class Findings:
    """Signals in the invocations seen so far, around a focus service."""

    def __init__(self, calls: Sequence[CallView], *, focus: str | None) -> None:
        self.calls = list(calls)
        self.focus = focus or self._busiest_service()

    # ---- calls ----------------------------------------------------------------------------
    def has_tool(self, tool: str) -> bool:
        """A call of this tool was made."""
        return any(c.tool == tool for c in self.calls)

    def has_call(self, tool: str, service: str | None) -> bool:
        """A call of this tool for this service was made."""
        return any(c.tool == tool and c.argument("service") == service for c in self.calls)

    def investigated(self, service: str) -> bool:
        """Its logs were searched."""
        return self.has_call(tool_names.SEARCH_LOGS, service)

    def _ready(self, tool: str) -> list[CallView]:
        return [c for c in self.calls if c.tool == tool and c.ready]

    # ---- logs -----------------------------------------------------------------------------
    @cached_property
    def patterns(self) -> list[LogPattern]:
        """Top messages of every log search, one per (service, level, pattern): the largest."""
        best: dict[tuple[str, str, str], LogPattern] = {}
        for call in self._ready(tool_names.SEARCH_LOGS):
            for pattern in log_patterns(call):
                key = (pattern.service, pattern.text("level"), pattern.text("pattern"))
                if key not in best or pattern.count > best[key].count:
                    best[key] = pattern
        return list(best.values())

    def bursts(self, service: str | None) -> list[LogPattern]:
        """New WARN-or-worse patterns of a service, most severe then most frequent first; none
        whose text reads as instructions to an agent (`untrusted`)."""
        found = [p for p in self.patterns if p.service == service and p.rank >= WARN_RANK
                 and p.is_new and not p.untrusted]
        return sorted(found, key=lambda p: (-p.rank, -p.count))

    def untrusted(self, service: str | None) -> list[LogPattern]:
        """A service's patterns whose text reads as instructions to an agent."""
        return [p for p in self.patterns if p.service == service and p.untrusted]

    # ---- metrics --------------------------------------------------------------------------
    @cached_property
    def series(self) -> list[MetricView]:
        """Every projected series, one per (service, metric)."""
        seen: dict[tuple[str, str], MetricView] = {}
        for call in self._ready(tool_names.QUERY_METRICS):
            for one in metric_series(call):
                seen.setdefault((one.text("service"), one.text("metric")), one)
        return list(seen.values())

    def shifts(self, service: str | None) -> list[MetricView]:
        """Shifted series of a service, earliest onset first."""
        found = [s for s in self.series if s.text("service") == service and s.shifted]
        return sorted(found, key=lambda s: (s.text("onset"), s.text("metric")))

    def saturations(self, service: str | None) -> list[MetricView]:
        """A service's gauges that rose to their limit (`conventions.saturation`: level over
        limit shifted up and peaking at SATURATED or more), earliest onset first."""
        return [s for s in self.shifts(service) if s.text("shift") == "up"
                and saturation_of(s.text("metric")) is not None
                and s.number("peak") >= SATURATED]

    def targets_down(self, service: str | None) -> list[MetricView]:
        """A service's scrape targets (`up`) that were 0 in the window, whether or not long
        enough to shift: the earliest first."""
        found = [s for s in self.series if s.text("service") == service
                 and is_target(s.text("metric")) and s.data.get("low") == 0]
        return sorted(found, key=lambda s: s.text("low_at"))

    def symptom_shifts(self, service: str | None) -> list[MetricView]:
        """A service's user-facing symptoms in its metrics: error ratios and durations that
        shifted up, earliest onset first."""
        return [s for s in self.shifts(service) if s.text("shift") == "up"
                and (is_error_ratio(s.text("metric")) or is_duration(s.text("metric")))]

    # ---- events, deployments, alerts, runbooks --------------------------------------------
    def warning_reasons(self, service: str | None) -> list[Element]:
        """Warning event groups of a service's objects, earliest first."""
        found = [
            Element(call, path, data)
            for call in self._ready(tool_names.GET_EVENTS) if call.service == service
            for path, data in call.items("reasons") if data.get("type") == "Warning"
        ]
        return sorted(found, key=lambda e: (e.text("first_ts"), e.text("reason")))

    @cached_property
    def deployments(self) -> list[Element]:
        """Every listed deployment once, oldest first."""
        seen: dict[tuple[str, str, str], Element] = {}
        for call in self._ready(tool_names.LIST_DEPLOYMENTS):
            for path, data in call.items("deployments"):
                key = (str(data.get("service")), str(data.get("version")),
                       str(data.get("deployed_at")))
                seen.setdefault(key, Element(call, path, data))
        return sorted(seen.values(), key=lambda e: e.text("deployed_at"))

    @cached_property
    def alerts(self) -> list[Element]:
        """Every listed alert once, by start."""
        seen: dict[tuple[str, str], Element] = {}
        for call in self._ready(tool_names.LIST_ALERTS):
            for path, data in call.items("alerts"):
                seen.setdefault((str(data.get("name")), str(data.get("starts_at"))),
                                Element(call, path, data))
        return sorted(seen.values(), key=lambda e: e.text("starts_at"))

    def documents(self) -> list[Element]:
        """Runbooks returned, best first per search."""
        return [Element(call, path, data) for call in self._ready(tool_names.SEARCH_RUNBOOKS)
                for path, data in call.items("documents")]

    # ---- onsets and leads -----------------------------------------------------------------
    def onset(self, service: str | None = None) -> datetime | None:
        """The first sign of trouble of a service (default the focus): new WARN+ patterns,
        shifted metrics and Warning events."""
        service = service or self.focus
        times = [p.time("first_ts") for p in self.bursts(service)]
        times += [s.time("onset") for s in self.shifts(service)]
        times += [s.time("low_at") for s in self.targets_down(service)]
        times += [e.time("first_ts") for e in self.warning_reasons(service)]
        known = [t for t in times if t is not None]
        return min(known) if known else None

    def named_dependencies(self) -> list[str]:
        """Services named in the focus's new WARN+ messages (not the focus, not its pods)."""
        names: list[str] = []
        for pattern in self.bursts(self.focus):
            for fact in extract_facts(pattern.text("example")):
                name = fact.text.lower()
                if (fact.kind is FactKind.SERVICE and name not in names
                        and not any(ch.isdigit() for ch in name)
                        and name != self.focus):
                    names.append(name)
        return names

    def deploy_in_time(self, deploy: Element, onset: datetime) -> bool:
        """Rolled out at most DEPLOY_LEAD before the onset (and not after it, within slack)."""
        at = deploy.time("deployed_at")
        return at is not None and onset - DEPLOY_LEAD <= at <= onset + ONSET_SLACK

    def dependency_in_time(self, dependency: str, onset: datetime) -> datetime | None:
        """The dependency's own onset, when it starts no later than the focus's plus slack."""
        own = self.onset(dependency)
        return own if own is not None and own <= onset + DEPENDENCY_SLACK else None

    def memory_trouble(self) -> bool:
        """Memory pressure, OOM or restarts show up for the focus."""
        texts = [p.text("example") for p in self.bursts(self.focus)]
        texts += [s.text("metric") for s in self.shifts(self.focus)]
        return any(_MEMORY.search(t.replace("_", " ")) for t in texts)

    def symptom_words(self) -> str:
        """Words describing the focus's symptom, for a runbook search ('' when none): event
        reasons, the top burst's words and the kind of each shifted metric."""
        parts = [e.text("reason") for e in self.warning_reasons(self.focus)]
        bursts = self.bursts(self.focus)
        if bursts:
            parts.append(_PLACEHOLDER.sub(" ", bursts[0].text("pattern")))
        for series in self.shifts(self.focus)[:3]:
            name = series.text("metric").lower()
            parts += [words for kind, words in _METRIC_KINDS.items() if kind in name]
        words = [w for w in _WORD.findall(" ".join(parts)) if len(w) > 2 and not w.isdigit()]
        return " ".join(dict.fromkeys(words))[:400]

    def _busiest_service(self) -> str | None:
        """Without a named service: the one with the largest new burst, if any."""
        candidates = [p for p in self.patterns if p.rank >= WARN_RANK and p.is_new]
        if not candidates:
            return None
        return max(candidates, key=lambda p: (p.rank, p.count)).service
