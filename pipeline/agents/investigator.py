"""The offline investigator: an Executor that runs the plan, follows leads, and reports claims.

Turn 0 asks for the plan's calls. After results it may follow leads for at most
`MAX_TURNS` tool turns in all: the logs, metrics, events and alerts of services named in the
failing service's new error messages, every deployment in the hour before the onset, the
service's Warning events when memory or restarts show up, and the runbooks for the symptom.
Then it returns `executor_evidence_v2`: claims bound to exact paths and verbatim text of the
stored projections (signals found by `pipeline.tools.analysis`), hypotheses, missing
information and recommended actions citing claims. In an EVIDENCE_GAP_ONLY cycle it makes
only the gap plan's calls and reports what they show (`build_gap_output`).

A deploy is blamed only when its service is the failing one or is named in the failing
service's error messages, and it went out at most 90 minutes before the onset. A dependency is
blamed only when it is named in those messages and its own anomaly starts no later than 5
minutes after the onset. Otherwise no root cause is claimed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from models import tool_names
from models.agent import ExecutorStep, PlanStep, ToolCallRequest, Transcript
from models.common import Intent
from models.executor import (
    Claim,
    ClaimKind,
    ClaimStatus,
    EvidenceBinding,
    ExecutorEvidenceV2,
    Hypothesis,
    RecommendedAction,
)
from pipeline.data.metric_names import is_target, saturation_of
from pipeline.data.records import iso
from pipeline.ids import mint_tool_call_id
from pipeline.rules.facts import FactMemo, FactSet
from pipeline.rules.gatekeeper import scope_text
from pipeline.rules.guards import unsupported_facts
from pipeline.rules.jsonpath import PathError, resolve
from pipeline.rules.text import normalize, value_text
from pipeline.rules.untrusted import instruction_like
from pipeline.tools.analysis import DEPENDENCY_SLACK, ONSET_SLACK, Findings
from pipeline.tools.formatting import format_value, plural
from pipeline.tools.registry import ToolRegistry
from pipeline.tools.views import CallView, Element, LogPattern, MetricView, metric_series

MAX_TURNS = 3
MAX_DEPENDENCIES = 2
DEPLOY_SEARCH_BEFORE = timedelta(minutes=60)
DEPLOY_SEARCH_AFTER = timedelta(minutes=5)
MODEL_NAME = "offline-investigator-1"


class OfflineExecutor:
    """Deterministic Executor over the built-in tools."""

    model = MODEL_NAME

    def step(
        self, transcript: Transcript, *, registry: ToolRegistry, log: object | None = None
    ) -> ExecutorStep:
        """Next tool calls, or the final `executor_evidence_v2` text."""
        steps = next_steps(transcript, registry=registry)
        if steps:
            return ExecutorStep(tool_calls=requests_for(transcript, steps))
        return ExecutorStep(final_output=final_output(transcript))

    def repair(
        self, transcript: Transcript, raw: str, problems: list[str], *,
        log: object | None = None,
    ) -> str | None:
        """None: the deterministic output is not repaired (a failing one goes to the
        fallback)."""
        return None


def calls_of(transcript: Transcript) -> list[CallView]:
    """Every invocation the transcript holds, in order."""
    return [CallView(inv) for turn in transcript.turns for inv in turn.results]


def final_output(transcript: Transcript) -> str:
    """The executor_evidence_v2 JSON for everything seen so far."""
    return investigate(transcript).output.model_dump_json(indent=2)


def next_steps(transcript: Transcript, *, registry: ToolRegistry) -> list[PlanStep]:
    """The calls of the next turn (empty when it is time to report)."""
    if not transcript.turns:
        return [s for s in transcript.plan.steps if s.tool_name in registry]
    if (
        len(transcript.turns) >= MAX_TURNS
        or transcript.gaps
        or transcript.plan.evidence_gap_only
        or transcript.plan.intent is Intent.KNOWLEDGE_QUERY
    ):
        return []
    asked = {_call_key(r.tool_name, r.arguments) for t in transcript.turns for r in t.tool_calls}
    findings = Findings(calls_of(transcript), focus=transcript.plan.service)
    fresh: list[PlanStep] = []
    for step in follow_ups(findings):
        key = _call_key(step.tool_name, step.arguments)
        if step.tool_name in registry and key not in asked:
            asked.add(key)
            fresh.append(step)
    return fresh


def follow_ups(findings: Findings) -> list[PlanStep]:
    """Leads worth following, given what has been found."""
    steps: list[PlanStep] = []
    onset = findings.onset()
    for dependency in findings.named_dependencies()[:MAX_DEPENDENCIES]:
        if findings.investigated(dependency):
            continue
        why = f"{dependency} is named in {findings.focus}'s error messages"
        steps += [
            PlanStep(tool_name=tool, arguments={"service": dependency, **extra}, reason=why)
            for tool, extra in ((tool_names.SEARCH_LOGS, {"level": "WARN"}),
                                (tool_names.QUERY_METRICS, {}),
                                (tool_names.GET_EVENTS, {"type": "Warning"}),
                                (tool_names.LIST_ALERTS, {}))
        ]
    if onset is not None:
        steps.append(PlanStep(
            tool_name=tool_names.LIST_DEPLOYMENTS,
            arguments={"window": _window(onset - DEPLOY_SEARCH_BEFORE,
                                         onset + DEPLOY_SEARCH_AFTER)},
            reason=f"every deployment in the hour before the onset at {iso(onset)}",
        ))
    if (findings.focus and findings.memory_trouble()
            and not findings.has_call(tool_names.GET_EVENTS, findings.focus)):
        steps.append(PlanStep(tool_name=tool_names.GET_EVENTS,
                              arguments={"service": findings.focus, "type": "Warning"},
                              reason="memory pressure or restarts: look for OOMKilled pods"))
    steps += _metric_retry(findings)
    query = findings.symptom_words()
    if query and not findings.has_tool(tool_names.SEARCH_RUNBOOKS):
        steps.append(PlanStep(tool_name=tool_names.SEARCH_RUNBOOKS, arguments={"query": query},
                              reason="runbooks for the observed symptom"))
    return steps


def _metric_retry(findings: Findings) -> list[PlanStep]:
    """A metric filter that matched nothing: ask for every metric of the service instead."""
    for call in findings.calls:
        if (call.tool == tool_names.QUERY_METRICS and call.empty and call.argument("metric")
                and call.service):
            return [PlanStep(tool_name=tool_names.QUERY_METRICS,
                             arguments={"service": call.service},
                             reason=f"no {call.argument('metric')} metric: list every metric")]
    return []


def _window(start: datetime, end: datetime) -> dict[str, str]:
    return {"start": iso(start), "end": iso(end)}


def _call_key(tool: str, arguments: dict[str, Any]) -> str:
    return f"{tool}:{json.dumps(arguments, sort_keys=True)}"


def requests_for(transcript: Transcript, steps: Sequence[PlanStep]) -> list[ToolCallRequest]:
    """Tool call requests with fresh ids shaped like Anthropic's `tool_use` ids."""
    taken = {r.tool_call_id for t in transcript.turns for r in t.tool_calls}
    state = transcript.model_dump_json()
    requests = []
    for index, step in enumerate(steps):
        call_id = next_call_id(state, turn=len(transcript.turns), index=index, taken=taken)
        taken.add(call_id)
        requests.append(ToolCallRequest(tool_call_id=call_id, tool_name=step.tool_name,
                                        arguments=step.arguments))
    return requests


def next_call_id(state: str, *, turn: int, index: int, taken: set[str]) -> str:
    """A tool_call_id derived from the transcript state, turn and index (`pipeline.ids`).

    The transcript holds every earlier call and result, so ids never repeat within a run (a
    collision with an id already taken is re-drawn).
    """
    salt = 0
    while True:
        call_id = mint_tool_call_id(f"{state}|{turn}|{index}|{salt}")
        if call_id not in taken:
            return call_id
        salt += 1


# ==== the report ==============================================================================

MAX_BURSTS = 3
MAX_STEADY_SERIES = 3
MAX_ALERTS = 4
_REASON_PRIORITY = ("OOMKilled", "Evicted", "BackOff", "CrashLoopBackOff", "Expired", "Failed",
                    "Unhealthy")
Binding = tuple[CallView, str, str | None]
"""(call, path, verbatim text at the path or None for the whole value)."""


@dataclass(frozen=True)
class Investigation:
    """The Executor's output and the claims it withheld because its evidence did not state them
    (a non-empty `dropped` is a defect of the investigator, and tests assert it stays empty)."""

    output: ExecutorEvidenceV2
    dropped: list[str]


def investigate(transcript: Transcript) -> Investigation:
    """Analyze every result in the transcript into executor_evidence_v2 (in an
    EVIDENCE_GAP_ONLY cycle, what the gap calls found: `build_gap_output`)."""
    findings = Findings(calls_of(transcript), focus=transcript.plan.service)
    if transcript.plan.evidence_gap_only or transcript.gaps:
        return build_gap_output(findings)
    return build_output(findings)


@dataclass(frozen=True)
class _Signal:
    """One symptom, worded, with the bindings that state it."""

    phrase: str
    start: datetime | None
    bindings: list[Binding]


@dataclass
class _Report:
    claims: list[Claim] = field(default_factory=list)
    hypotheses: list[Hypothesis] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    actions: list[RecommendedAction] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    _texts: set[str] = field(default_factory=set)
    _facts: FactMemo = field(default_factory=dict)  # the evidence texts' facts, by text

    def claim(self, text: str, kind: ClaimKind, *, critical: bool,
              bindings: Sequence[Binding]) -> str | None:
        """Add a claim if every fact it states is in its bound text or scopes; its id."""
        if text in self._texts:
            return None
        evidence: list[EvidenceBinding] = []
        stated: list[str] = []
        for call, path, needle in bindings:
            try:
                value = normalize(value_text(resolve(call.document, path)))
            except PathError:
                self.dropped.append(f"{text!r}: {path} does not resolve")
                return None
            matched = normalize(needle) if needle is not None else value
            if not matched or matched not in value:
                self.dropped.append(f"{text!r}: {matched!r} is not at {path}")
                return None
            stated += [matched, *scope_text(call.scope)]
            evidence.append(EvidenceBinding(invocation_id=call.call_id, tool_name=call.tool,
                                            path=path, matched_text=matched))
        missing = unsupported_facts(text, FactSet.from_texts(stated, memo=self._facts))
        if missing or not evidence:
            self.dropped.append(f"{text!r}: not in its evidence: {[f.text for f in missing]}")
            return None
        claim_id = f"c{len(self.claims) + 1}"
        self._texts.add(text)
        self.claims.append(Claim(claim_id=claim_id, text=text, kind=kind, critical=critical,
                                 status=ClaimStatus.CONFIRMED, evidence_bindings=evidence))
        return claim_id

    def negative(self, call: CallView, text: str, *, critical: bool) -> str | None:
        """A NEGATIVE_OBSERVATION bound to the call's recorded scope."""
        scope = call.scope
        paths = [("$.scope.service", scope.service), ("$.scope.filter", scope.filter)]
        if scope.window is not None:
            paths += [("$.scope.window.start", scope.window.start),
                      ("$.scope.window.end", scope.window.end)]
        paths.append(("$.scope.note", scope.note))
        bindings: list[Binding] = [(call, path, None) for path, value in paths if value]
        return self.claim(text, ClaimKind.NEGATIVE_OBSERVATION, critical=critical,
                          bindings=bindings)

    def action(self, text: str, claim_ids: Sequence[str | None]) -> None:
        ids = [i for i in claim_ids if i]
        if ids and text not in {a.text for a in self.actions}:
            self.actions.append(RecommendedAction(text=text, claim_ids=ids))

    def hypothesis(self, text: str, claim_ids: Sequence[str | None]) -> None:
        ids = [i for i in claim_ids if i]
        if ids:
            self.hypotheses.append(Hypothesis(text=text, claim_ids=ids))


def build_output(findings: Findings) -> Investigation:
    """Claims, hypotheses, missing information and actions for what was found."""
    report = _Report()
    focus = findings.focus
    onset = findings.onset()
    quiet = onset is None
    deploy, dependency = _blame(findings, onset)
    symptom_ids = _service_claims(report, findings, focus, critical=True, quiet=quiet)
    root_id = None
    saturated = None
    if deploy is not None:
        root_id = _deploy_root_cause(report, findings, deploy)
    elif dependency is not None:
        root_id = _dependency_root_cause(report, findings, dependency)
    else:
        saturated = _saturation_blame(findings)
        if saturated is not None:
            root_id = _saturation_root_cause(report, findings, *saturated)
    factor_ids = _contributing_factors(report, findings, onset)
    deploy_ids = _deployment_claims(report, findings, blamed=deploy, quiet=quiet)
    for name in findings.named_dependencies():
        _service_claims(report, findings, name, critical=name == dependency, quiet=False)
    _alert_claims(report, findings, quiet=quiet)
    runbook_ids = _runbook_claims(report, findings)
    _conclude(report, findings, root_id=root_id, deploy=deploy, dependency=dependency,
              saturated=saturated,
              symptom_ids=[] if quiet else symptom_ids + factor_ids, deploy_ids=deploy_ids,
              runbook_ids=runbook_ids)
    output = ExecutorEvidenceV2(claims=report.claims, hypotheses=report.hypotheses,
                                missing_info=report.missing,
                                recommended_actions=report.actions)
    return Investigation(output=output, dropped=report.dropped)


def build_gap_output(findings: Findings) -> Investigation:
    """The report of an EVIDENCE_GAP_ONLY cycle: what each of its calls shows, and nothing else.

    The cycle supplements the first one, whose claims stay, so nothing is restated. Every signal
    a gap call finds (a new log burst, a shifted series, Warning events) is critical: the gap
    asked for it because a critical claim rests on it. What a call did not find is reported as
    an observation the diagnosis does not rest on, and a gap left without any signal says so.
    """
    report = _Report()
    for call in findings.calls:
        if not call.ready:
            continue
        service = call.service or findings.focus
        if call.tool == tool_names.SEARCH_LOGS:
            _log_claims(report, findings, call, service, critical=True, quiet=False)
        elif call.tool == tool_names.QUERY_METRICS:
            _metric_claims(report, call, service, critical=True, quiet=False)
        elif call.tool == tool_names.GET_EVENTS:
            _event_claims(report, call, critical=True, quiet=False)
    _deployment_claims(report, findings, blamed=None, quiet=False)
    _alert_claims(report, findings, quiet=False)
    _runbook_claims(report, findings)
    report.missing += _failed_calls(findings)
    if not any(c.critical for c in report.claims):
        report.missing.append("The calls made for the evidence gaps found no new signal: "
                              "the gaps are still open.")
    output = ExecutorEvidenceV2(claims=report.claims, missing_info=report.missing)
    return Investigation(output=output, dropped=report.dropped)


def _blame(findings: Findings, onset: datetime | None) -> tuple[Element | None, str | None]:
    """The deploy or the dependency the evidence chain supports, if any."""
    if onset is None or findings.focus is None:
        return None, None
    suspects = {findings.focus, *findings.named_dependencies()}
    deploys = [d for d in findings.deployments
               if d.text("service") in suspects and d.text("status") in ("", "succeeded")
               and findings.deploy_in_time(d, onset)]
    if deploys:
        return max(deploys, key=lambda d: d.text("deployed_at")), None
    timed = [(own, name) for name in findings.named_dependencies()
             if (own := findings.dependency_in_time(name, onset)) is not None]
    return (None, min(timed)[1]) if timed else (None, None)


# ---- per-service claims ------------------------------------------------------------------

def _service_claims(report: _Report, findings: Findings, service: str | None, *,
                    critical: bool, quiet: bool) -> list[str]:
    """What the service's logs, metrics and events show; ids of its symptom claims.

    Calls limited to the service count, and for the focus also calls over all services.
    """
    ids: list[str | None] = []
    for call in findings.calls:
        if not call.ready or not (call.service == service or (
                call.service is None and service == findings.focus)):
            continue
        if call.tool == tool_names.SEARCH_LOGS:
            ids += _log_claims(report, findings, call, service, critical=critical, quiet=quiet)
        elif call.tool == tool_names.QUERY_METRICS:
            ids += _metric_claims(report, call, service, critical=critical, quiet=quiet)
        elif call.tool == tool_names.GET_EVENTS:
            ids += _event_claims(report, call, critical=critical, quiet=quiet)
    return [i for i in ids if i]


def _log_claims(report: _Report, findings: Findings, call: CallView, service: str | None, *,
                critical: bool, quiet: bool) -> list[str | None]:
    if call.empty:
        level = call.argument("level")
        what = f"log lines at {level} or above" if level else "log lines"
        query = call.argument("query")
        matching = f' matching "{query}"' if query else ""
        return [report.negative(call, f"No {what}{matching} were found for "
                                f"{service or 'any service'}{_span(call)}",
                                critical=critical and quiet)]
    bursts = [b for b in findings.bursts(service) if b.call is call][:MAX_BURSTS]
    planted = sum(p.count for p in findings.untrusted(service) if p.call is call)
    if planted:
        report.missing.append(
            f"Some log lines from {service or 'the searched services'} were not used as "
            "evidence: they read as instructions to an AI agent and were treated as untrusted "
            "data.")
    if not bursts:
        return [report.claim(f"Nothing new in these logs: {call.document.get('summary')}",
                             ClaimKind.FINDING, critical=critical and quiet,
                             bindings=[(call, "$.summary", None)])]
    return [report.claim(f"New in this window: {b.text('summary')}", ClaimKind.FINDING,
                         critical=critical, bindings=[(call, b.at("summary"), None)])
            for b in bursts]


def _metric_claims(report: _Report, call: CallView, service: str | None, *, critical: bool,
                   quiet: bool) -> list[str | None]:
    if call.empty:
        metric = call.argument("metric")
        what = f'metrics matching "{metric}"' if metric else "metrics"
        text = f"No {what} were found for {call.service or 'any service'}"
        note = call.scope.note or ""
        if _UNMATCHED.match(note):  # the name matched nothing: say so, with what there is
            return [report.negative(call, f"{text}: {note}", critical=False)]
        return [report.negative(call, text, critical=False)]
    series = [s for s in metric_series(call)
              if call.service is not None or service is None or s.text("service") == service]
    shifted = [s for s in series if s.shifted
               or (is_target(s.text("metric")) and s.data.get("low") == 0)]
    ids = [report.claim(s.text("summary"), ClaimKind.FINDING, critical=critical,
                        bindings=[(call, s.at("summary"), None)]) for s in shifted]
    if not shifted:
        steady = [s for s in series if s.text("shift") == "none"][:MAX_STEADY_SERIES]
        ids += [report.claim(s.text("summary"), ClaimKind.NEGATIVE_OBSERVATION,
                             critical=critical and quiet, bindings=[(call, s.at("summary"), None)])
                for s in steady]
    return ids


def _event_claims(report: _Report, call: CallView, *, critical: bool,
                  quiet: bool) -> list[str | None]:
    if call.empty:
        kind = f"{call.argument('type')} events" if call.argument("type") else "events"
        return [report.negative(call, f"No Kubernetes {kind} were found for the objects of "
                                f"{call.service or 'any service'}{_span(call)}",
                                critical=critical and quiet)]
    reasons = [(path, data) for path, data in call.items("reasons")
               if data.get("type") == "Warning"]
    trusted = [(p, d) for p, d in reasons if not instruction_like(json.dumps(d))]
    if len(trusted) < len(reasons):
        report.missing.append(
            f"Kubernetes events of {call.service or 'the queried objects'} were not used as "
            "evidence: they read as instructions to an AI agent and were treated as untrusted "
            "data.")
    return [report.claim(data["summary"], ClaimKind.FINDING, critical=critical,
                         bindings=[(call, f"{path}.summary", None)])
            for path, data in trusted]


# ---- root cause and contributing factors ---------------------------------------------------

def _span(call: CallView) -> str:
    """The scope's window in words: a moment when the backend answered for one (alerts
    active now), never wider than what it saw."""
    window = call.scope.window
    if window is None:
        return ""
    if window.start == window.end:
        return f" at {window.start}"
    return f" between {window.start} and {window.end}"


def _hhmm(moment: datetime | None) -> str:
    return moment.strftime("%H:%M") if moment else "an unknown time"


def _event_signal(reason: Element, service: str) -> _Signal:
    count = int(reason.number("events"))
    phrase = (f"{service} had {plural(count, reason.text('reason') + ' event')} from "
              f"{_hhmm(reason.time('first_ts'))} UTC, e.g. '{reason.text('example')}'")
    return _Signal(phrase, reason.time("first_ts"), [(reason.call, reason.at("summary"), None)])


def _burst_signal(burst: LogPattern) -> _Signal:
    phrase = (f"{burst.service} logged {plural(burst.count, burst.text('level') + ' line')} from "
              f"{_hhmm(burst.time('first_ts'))} UTC such as '{burst.text('example')}'")
    return _Signal(phrase, burst.time("first_ts"), [(burst.call, burst.at("summary"), None)])


def _shift_signal(series: MetricView) -> _Signal:
    direction = series.text("shift")
    field_name = "low" if direction == "down" else "peak"
    extreme = format_value(series.number(field_name), series.text("unit"))
    phrase = (f"{series.text('metric')} of {series.text('service')} shifted {direction} from "
              f"baseline at {_hhmm(series.time('onset'))} UTC ({field_name} {extreme} at "
              f"{_hhmm(series.time(field_name + '_at'))} UTC)")
    return _Signal(phrase, series.time("onset"), [(series.call, series.at("summary"), None)])


def _reason_rank(reason: Element) -> tuple[int, float]:
    name = reason.text("reason")
    priority = _REASON_PRIORITY.index(name) if name in _REASON_PRIORITY else len(_REASON_PRIORITY)
    return priority, -reason.number("events")


def _symptom(findings: Findings, service: str, *, naming: str | None = None) -> _Signal | None:
    """The service's strongest symptom; with `naming`, a log burst naming that service."""
    bursts = findings.bursts(service)
    if naming is not None:
        named = [b for b in bursts if naming in b.text("example").lower()]
        return _burst_signal(named[0]) if named else None
    reasons = findings.warning_reasons(service)
    if reasons:
        return _event_signal(min(reasons, key=_reason_rank), service)
    if bursts:
        return _burst_signal(bursts[0])
    shifts = findings.shifts(service)
    return _shift_signal(shifts[0]) if shifts else None


def _deploy_root_cause(report: _Report, findings: Findings, deploy: Element) -> str | None:
    assert findings.focus is not None
    symptom = _symptom(findings, findings.focus)
    if symptom is None:
        return None
    change = f" ({deploy.text('change')})" if deploy.text("change") else ""
    text = (f"Deploy {deploy.text('service')} {deploy.text('version')} at "
            f"{_hhmm(deploy.time('deployed_at'))} UTC{change} caused the problems that began at "
            f"{_hhmm(symptom.start)} UTC: {symptom.phrase}")
    return report.claim(text, ClaimKind.ROOT_CAUSE, critical=True,
                        bindings=[(deploy.call, deploy.at("summary"), None), *symptom.bindings])


def _dependency_signal(findings: Findings, dependency: str, onset: datetime) -> _Signal | None:
    """The dependency's signal closest to the focus's onset: events, then shifts, then bursts."""
    near = [r for r in findings.warning_reasons(dependency)
            if (t := r.time("first_ts")) is not None and abs(t - onset) <= DEPENDENCY_SLACK]
    if near:
        return _event_signal(min(near, key=_reason_rank), dependency)
    shifts = findings.shifts(dependency)
    if shifts:
        return _shift_signal(shifts[0])
    bursts = findings.bursts(dependency)
    return _burst_signal(bursts[0]) if bursts else None


def _dependency_root_cause(report: _Report, findings: Findings, dependency: str) -> str | None:
    assert findings.focus is not None
    onset = findings.onset()
    symptom = _symptom(findings, findings.focus, naming=dependency)
    signal = _dependency_signal(findings, dependency, onset) if onset else None
    if symptom is None or signal is None:
        return None
    text = f"{dependency} is where the problems start: {symptom.phrase}, and {signal.phrase}"
    return report.claim(text, ClaimKind.ROOT_CAUSE, critical=True,
                        bindings=[*symptom.bindings, *signal.bindings])


def _saturation_blame(findings: Findings) -> tuple[MetricView, MetricView] | None:
    """The focus's gauge at its limit that explains a symptom in its metrics: a saturation
    (`Findings.saturations`) that left its baseline no later than the earliest error ratio
    or duration that rose (`Findings.symptom_shifts`), and is still high while the symptom
    is (`_still_high`), or, the symptom over, reached its limit within ONSET_SLACK of the
    symptom's peak; with the symptom. A saturation that rose after the symptom is an effect
    as likely as a cause, and one that is over while the symptom goes on (an earlier episode
    in the same window) explains another problem: neither is blamed."""
    symptoms = findings.symptom_shifts(findings.focus)
    if not symptoms:
        return None
    symptom = min(symptoms, key=lambda s: s.text("onset"))
    onset, peak = symptom.time("onset"), symptom.time("peak_at")
    if onset is None or peak is None:
        return None
    for saturation in findings.saturations(findings.focus):
        start, full = saturation.time("onset"), saturation.time("peak_at")
        if start is None or full is None or start > onset:
            continue
        if _still_high(symptom):
            if _still_high(saturation):
                return saturation, symptom
        elif abs(peak - full) <= ONSET_SLACK:
            return saturation, symptom
    return None


def _still_high(series: MetricView) -> bool:
    """The series' latest points (the last of its downsampled `points`) are nearer its peak
    than its baseline mean: the episode that raised it is not over."""
    points = series.data.get("points") or []
    baseline = series.data.get("baseline") or {}
    if not points or not isinstance(baseline.get("mean"), int | float):
        return False
    last, base = float(points[-1][1]), float(baseline["mean"])
    return last - base >= (series.number("peak") - base) / 2


def _saturation_root_cause(report: _Report, findings: Findings, saturation: MetricView,
                           symptom: MetricView) -> str | None:
    pair = saturation_of(saturation.text("metric"))
    assert pair is not None and findings.focus is not None
    gauge, limit = pair
    cause, effect = _shift_signal(saturation), _shift_signal(symptom)
    text = (f"{gauge} of {findings.focus} reached {limit} and caused the problems that "
            f"began at {_hhmm(symptom.time('onset'))} UTC: {cause.phrase}, and "
            f"{effect.phrase}")
    return report.claim(text, ClaimKind.ROOT_CAUSE, critical=True,
                        bindings=[*cause.bindings, *effect.bindings])


def _contributing_factors(report: _Report, findings: Findings,
                          onset: datetime | None) -> list[str]:
    """Warning events of the focus or a named dependency that began before the onset."""
    if onset is None or findings.focus is None:
        return []
    ids = []
    for service in (findings.focus, *findings.named_dependencies()):
        for reason in findings.warning_reasons(service):
            start = reason.time("first_ts")
            if start is not None and start < onset - ONSET_SLACK:
                signal = _event_signal(reason, service)
                ids.append(report.claim(f"Before the problems began, {signal.phrase}",
                                        ClaimKind.CONTRIBUTING_FACTOR, critical=False,
                                        bindings=signal.bindings))
    return [i for i in ids if i]


# ---- deployments, alerts, runbooks ---------------------------------------------------------

def _deployment_claims(report: _Report, findings: Findings, *, blamed: Element | None,
                       quiet: bool) -> list[str]:
    ids = []
    for deploy in findings.deployments:
        ids.append(report.claim(deploy.text("summary"), ClaimKind.FINDING,
                                critical=deploy is blamed,
                                bindings=[(deploy.call, deploy.at("summary"), None)]))
    for call in findings.calls:
        if call.tool == tool_names.LIST_DEPLOYMENTS and call.empty:
            report.negative(call, f"No deployments of {call.service or 'any service'} were "
                            f"rolled out{_span(call)}",
                            critical=quiet and call.service == findings.focus)
    return [i for i in ids if i]


def _alert_claims(report: _Report, findings: Findings, *, quiet: bool) -> None:
    for alert in findings.alerts[:MAX_ALERTS]:
        report.claim(alert.text("summary"), ClaimKind.FINDING, critical=False,
                     bindings=[(alert.call, alert.at("summary"), None)])
    for call in findings.calls:
        if call.tool == tool_names.LIST_ALERTS and call.empty:
            # a service no series matched is no service the alerts would name either: its
            # empty alert list says nothing of its health
            known = call.service not in unmatched_services(findings)
            report.negative(call, f"No alerts were active for {call.service or 'any service'}"
                            f"{_span(call)}",
                            critical=quiet and known and call.service == findings.focus)


def _runbook_claims(report: _Report, findings: Findings) -> list[tuple[str, Element]]:
    found = []
    for call in findings.calls:
        if call.tool == tool_names.SEARCH_RUNBOOKS and call.empty:
            report.negative(call, f"No runbook matched \"{call.scope.filter}\"", critical=False)
    for document in findings.documents()[:1]:
        claim_id = report.claim(
            f"Runbook {document.text('doc_id')} ({document.text('title')}) is the best match "
            "for the observed symptom",
            ClaimKind.FINDING, critical=False,
            bindings=[(document.call, document.at("doc_id"), None),
                      (document.call, document.at("title"), None)],
        )
        if claim_id:
            found.append((claim_id, document))
    return found


_HINT = re.compile(r"\s*\((?:configure|set|see)\b[^()]*\)\s*$")
"""A configuration hint closing an error ("... (configure [sources.prod.loki])"): for the
operator reading `verity show`, not for the answer."""


def _failed_calls(findings: Findings) -> list[str]:
    """Each failed call as a gap, with the reason its tool answered (a source with no logs
    backend, a backend unreachable), one line per tool and reason."""
    lines = []
    for call in findings.calls:
        if call.ready:
            continue
        who = f" for {call.argument('service')}" if call.argument("service") else ""
        reason = _HINT.sub("", (call.invocation.error or "").split(": ", 1)[-1]).strip()
        why = f" ({reason.rstrip('.')})" if reason else ""
        lines.append(f"The {call.tool} call{who} failed{why}: its evidence is missing.")
    return list(dict.fromkeys(lines))


_UNMATCHED = re.compile(r"no series matched ")
"""How a metrics source notes that the service asked about matched nothing."""


def unmatched_services(findings: Findings) -> list[str]:
    """Services the metrics source matched no series of, in call order."""
    return list(dict.fromkeys(
        call.service for call in findings.calls
        if call.empty and call.tool == tool_names.QUERY_METRICS and call.service
        and _UNMATCHED.match(call.scope.note or "")))


def _unmatched(findings: Findings) -> list[str]:
    """A service the source matched no series of: said as a gap, so an empty answer is not
    read as all being quiet."""
    return [f"The metrics of {service} were not checked: no series matched {service}."
            for service in unmatched_services(findings)]


def _stand_in_baselines(findings: Findings) -> list[str]:
    """Series compared with their own first points, the source holding nothing before the
    window: said once per service, since a shift is then judged on less history."""
    services = sorted({s.text("service") for s in findings.series
                       if s.data.get("baseline_in_window")})
    return [f"No baseline data before the window was found for the metrics of {service}: "
            "their first points in the window were the baseline." for service in services]


def _conclude(report: _Report, findings: Findings, *, root_id: str | None,
              deploy: Element | None, dependency: str | None,
              saturated: tuple[MetricView, MetricView] | None, symptom_ids: list[str],
              deploy_ids: list[str], runbook_ids: list[tuple[str, Element]]) -> None:
    """Hypotheses, missing information and actions, each citing the claims behind it."""
    focus = findings.focus or "the service"
    report.missing += _failed_calls(findings)
    report.missing += _unmatched(findings) + _stand_in_baselines(findings)
    if deploy is not None and root_id:
        previous = deploy.text("previous_version")
        target = f" to {previous}" if previous else ""
        report.action(f"Roll back {deploy.text('service')}{target} or revert the change "
                      f"({deploy.text('change')}), then watch {focus}'s error rate and latency",
                      [root_id, *deploy_ids])
    elif dependency is not None and root_id:
        report.action(f"Escalate to the owners of {dependency} and limit the impact on {focus} "
                      "(shorter timeouts, fewer retries or a circuit breaker) until it recovers",
                      [root_id])
    elif saturated is not None and root_id:
        gauge, limit = saturation_of(saturated[0].text("metric")) or ("", "")
        report.action(f"Find why {gauge} of {focus} reached {limit}, then watch the error "
                      f"rate and latency of {focus}", [root_id])
    elif symptom_ids:
        texts = {c.claim_id: c.text for c in report.claims}
        for name in findings.named_dependencies():
            naming = [i for i in symptom_ids if name in texts.get(i, "") and focus in texts[i]]
            report.hypothesis(f"The {focus} problems may come from {name}, which its messages "
                              "name", naming[:1])
        report.hypothesis(f"Something outside the queried data changed shortly before the "
                          f"{focus} problems began", symptom_ids[:1])
        report.missing.append("No deployment, dependency anomaly or Kubernetes event in the "
                              f"queried data lines up with the onset of the {focus} problems.")
        report.action(f"Check what changed for {focus} outside the queried data "
                      "(configuration, feature flags, data, traffic, upstream providers)",
                      symptom_ids[:1])
    elif focus in unmatched_services(findings):
        unmatched = [c.claim_id for c in report.claims if c.text.startswith("No metrics were")
                     and f"no series matched {focus}" in c.text]
        report.action(f"Ask again about {focus} by the name the source knows it by (see the "
                      "services it has)", unmatched)
    else:
        negatives = [c.claim_id for c in report.claims
                     if c.kind is ClaimKind.NEGATIVE_OBSERVATION and c.critical]
        report.action(f"No action is indicated for {focus} by this evidence; if users still "
                      "report problems, widen the time window or look at traces", negatives)
    for claim_id, document in runbook_ids:
        steps = document.data.get("steps") or []
        first = f", starting with: {steps[0]}" if steps and isinstance(steps[0], str) else ""
        report.action(f"Follow runbook {document.text('doc_id')} ({document.text('title')})"
                      f"{first}", [claim_id, root_id or (symptom_ids[0] if symptom_ids else None)])
    report.missing.append("Traces, request payloads and database internals were not examined.")
