"""The offline Planner: intent from the wording, tools and arguments from the symptoms named.

Deterministic. The service comes from the question (a known service, else a service-like name),
else from the previous turn. Symptoms map to tools: errors → ERROR logs and the error-rate
metric; latency → the latency metric and WARN logs; crashes, restarts and OOM → Warning events,
the memory metric and WARN logs; nothing recognisable → WARN logs and every metric. Deployments
and alerts of the service are always listed. A KNOWLEDGE_QUERY is exactly one runbook search.
In EVIDENCE_GAP_ONLY mode the plan is built from the Verifier's gaps alone: each gap's suggested
tool (WARN logs when it names none or an unknown one), for the service the gap names when it
names one other than the question's (a dependency whose metrics would settle a claim), else for
the question's service.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from models import tool_names
from models.agent import Plan, PlanStep, PreviousTurn
from models.common import Intent
from models.verifier import EvidenceGap
from pipeline.tools.registry import ToolRegistry

DEPLOY_LOOKBACK_MINUTES = 240
"""Deployments are listed further back than the default window: a rollout precedes its effects."""

_KNOWLEDGE = re.compile(
    r"^\s*(?:how\s+(?:do|can|should|would|to)\b|how\s+is\s+\w+\s+(?:done|rotated|configured)\b"
    r"|what(?:'s|\s+is|\s+are)\s+the\s+(?:procedure|process|steps|runbook|policy|playbook)\b"
    r"|(?:where|is\s+there)\b.*\b(?:runbook|playbook|procedure)\b"
    r"|(?:show|find|give)\s+me\s+the\s+(?:runbook|procedure|steps)\b)"
    r"|\b(?:runbook|playbook|step[- ]by[- ]step|procedure\s+for|steps\s+to)\b",
    re.IGNORECASE,
)
_DIAGNOSIS = re.compile(r"^\s*(?:why|what(?:'s|\s+is)\s+(?:wrong|happening|going on))\b", re.I)
_SYMPTOMS: dict[str, re.Pattern[str]] = {
    "crash": re.compile(
        r"\b(?:crash\w*|restart\w*|oom\w*|out\s+of\s+memory|killed|evict\w*|backoff|"
        r"crashloop\w*|memory)\b", re.I),
    "latency": re.compile(
        r"\b(?:slow\w*|latenc\w*|p9\d|timeouts?|timing\s+out|timed\s+out|lag\w*|sluggish|"
        r"hang\w*|delay\w*)\b", re.I),
    "errors": re.compile(
        r"\b(?:5\d\d|5xx|4xx|errors?|exceptions?|fail\w*|broken|outage|down|unavailable|"
        r"refus\w*|certificate|cert|tls|ssl|x509|handshake)\b|\b5\d\ds\b", re.I),
}
_SERVICE_WORD = re.compile(r"\b[a-z][a-z0-9]*(?:-[a-z0-9]+)+\b")
_SERVICE_SUFFIXES = ("service", "api", "svc", "db", "gateway", "worker", "server", "frontend",
                     "backend", "app", "proxy", "cache", "queue", "web", "portal", "consumer")


def classify_intent(query: str) -> Intent:
    """KNOWLEDGE_QUERY for how-to and procedure questions, DIAGNOSIS otherwise."""
    if _DIAGNOSIS.search(query):
        return Intent.DIAGNOSIS
    return Intent.KNOWLEDGE_QUERY if _KNOWLEDGE.search(query) else Intent.DIAGNOSIS


def find_service(text: str, known_services: Iterable[str] | None = None) -> str | None:
    """The service a text names: the longest known service in it, else a service-like word,
    else the subject of a question about one thing ("why is checkout slow?", "anything wrong
    with checkout?"), which the source then matches through the labels it has."""
    lowered = text.lower()
    known = sorted(set(known_services or ()), key=len, reverse=True)
    for name in known:
        if re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", lowered):
            return name
    words: list[str] = _SERVICE_WORD.findall(lowered)
    named = next((w for w in words if w.rsplit("-", 1)[-1] in _SERVICE_SUFFIXES), None)
    return named if named is not None else subject(lowered)


_SUBJECT = re.compile(
    r"\bwhy\s+(?:is|does|did|was|has|isn't|doesn't)\s+(?:the\s+|our\s+)?(?P<a>[a-z][\w.:-]*)"
    r"|\b(?:wrong|going\s+on|happening|up)\s+with\s+(?:the\s+|our\s+)?(?P<b>[a-z][\w.:-]*)"
    r"|^\s*is\s+(?:the\s+|our\s+)?(?P<c>[a-z][\w.:-]*)\s+(?:down|up|ok|okay|healthy|slow|"
    r"failing|broken|erroring|returning|throwing|timing|restarting|crashing)\b")
_NOT_SUBJECTS = frozenset({
    "it", "this", "that", "there", "everything", "anything", "something", "nothing", "we",
    "they", "he", "she", "you", "i", "my", "our", "the", "a", "an", "service", "site", "app",
    "system", "prod", "production", "so", "still", "now", "everyone", "nobody"})


def subject(text: str) -> str | None:
    """The one thing a question asks about, by its grammar (`_SUBJECT`), when it is a word
    that can name a service (not a pronoun or a generic noun); None otherwise."""
    found = _SUBJECT.search(text.lower())
    if found is None:
        return None
    word = (found["a"] or found["b"] or found["c"]).rstrip(".:-")
    if word in _NOT_SUBJECTS or any(p.fullmatch(word) for p in _SYMPTOMS.values()):
        return None
    return word


class OfflinePlanner:
    """Plans an investigation from the question's wording, or from evidence gaps."""

    model = "offline-planner-1"

    def plan(
        self,
        query: str,
        *,
        registry: ToolRegistry,
        previous_turn: PreviousTurn | None = None,
        gaps: Sequence[EvidenceGap] | None = None,
        known_services: Iterable[str] | None = None,
        log: object | None = None,
    ) -> Plan:
        """The plan for this cycle; gaps switch to EVIDENCE_GAP_ONLY mode."""
        known = list(known_services or ())
        service = find_service(query, known)
        if service is None and previous_turn is not None:
            service = find_service(f"{previous_turn.query} {previous_turn.answer_summary}", known)
        if gaps:
            return _gap_plan(gaps, service=service, registry=registry, known=known)
        intent = classify_intent(query)
        if intent is Intent.KNOWLEDGE_QUERY:
            step = PlanStep(tool_name=tool_names.SEARCH_RUNBOOKS, arguments={"query": query},
                            reason="knowledge question: look it up in the runbooks")
            return Plan(intent=intent, service=service,
                        steps=[step] if tool_names.SEARCH_RUNBOOKS in registry else [],
                        notes="one runbook lookup")
        symptoms = [name for name, pattern in _SYMPTOMS.items() if pattern.search(query)]
        steps = _diagnosis_steps(service, symptoms)
        return Plan(
            intent=intent, service=service,
            steps=[s for s in steps if s.tool_name in registry],
            notes=f"service: {service or 'not named'}; symptoms: {', '.join(symptoms) or 'none'}",
        )


def _args(service: str | None, **extra: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {"service": service} if service else {}
    arguments.update({k: v for k, v in extra.items() if v is not None})
    return arguments


def _diagnosis_steps(service: str | None, symptoms: Sequence[str]) -> list[PlanStep]:
    who = service or "all services"
    steps: list[PlanStep] = []
    log_level = "ERROR" if symptoms == ["errors"] else "WARN"
    steps.append(PlanStep(tool_name=tool_names.SEARCH_LOGS,
                          arguments=_args(service, level=log_level),
                          reason=f"{log_level} and worse log lines of {who}, grouped by message"))
    metrics = {"errors": "error", "latency": "latency", "crash": "memory"}
    for symptom in symptoms:
        steps.append(PlanStep(
            tool_name=tool_names.QUERY_METRICS, arguments=_args(service, metric=metrics[symptom]),
            reason=f"{metrics[symptom]} metrics of {who} against their baseline",
        ))
    if not symptoms:
        steps.append(PlanStep(tool_name=tool_names.QUERY_METRICS, arguments=_args(service),
                              reason=f"every metric of {who} against its baseline"))
    if "crash" in symptoms:
        steps.append(PlanStep(tool_name=tool_names.GET_EVENTS,
                              arguments=_args(service, type="Warning"),
                              reason=f"Warning events (OOMKilled, BackOff ...) of {who}'s pods"))
    steps.append(PlanStep(
        tool_name=tool_names.LIST_DEPLOYMENTS,
        arguments=_args(service, lookback_minutes=DEPLOY_LOOKBACK_MINUTES),
        reason=f"deployments of {who} in the last {DEPLOY_LOOKBACK_MINUTES} minutes",
    ))
    steps.append(PlanStep(tool_name=tool_names.LIST_ALERTS, arguments=_args(service),
                          reason=f"alerts of {who} in the window"))
    return steps


_GAP_DEFAULTS: dict[str, dict[str, Any]] = {
    tool_names.SEARCH_LOGS: {"level": "WARN"},
    tool_names.QUERY_METRICS: {},
    tool_names.GET_EVENTS: {"type": "Warning"},
    tool_names.LIST_DEPLOYMENTS: {"lookback_minutes": DEPLOY_LOOKBACK_MINUTES},
    tool_names.LIST_ALERTS: {},
}


def services_named(text: str, known_services: Iterable[str] = ()) -> list[str]:
    """Every service a text names, in order: known services, and service-like words."""
    lowered = text.lower()
    found: list[tuple[int, str]] = []
    for name in sorted(set(known_services), key=len, reverse=True):
        match = re.search(rf"(?<![\w-]){re.escape(name.lower())}(?![\w-])", lowered)
        if match and not any(s <= match.start() < s + len(n) for s, n in found):
            found.append((match.start(), name))
    for match in _SERVICE_WORD.finditer(lowered):
        word = match.group()
        if word.rsplit("-", 1)[-1] in _SERVICE_SUFFIXES and all(
                n.lower() != word for _, n in found):
            found.append((match.start(), word))
    return [name for _, name in sorted(found)]


def gap_service(gap: EvidenceGap, *, service: str | None,
                known_services: Iterable[str] = ()) -> str | None:
    """The service a gap is about: the first other than the question's that it names (a gap
    asking for a dependency's metrics), else the question's."""
    others = [n for n in services_named(gap.description, known_services)
              if service is None or n.lower() != service.lower()]
    return others[0] if others else service


def _gap_plan(
    gaps: Sequence[EvidenceGap], *, service: str | None, registry: ToolRegistry,
    known: Sequence[str] = (),
) -> Plan:
    """One call per distinct gap tool and service, scoped to the service the gap names (else
    the service in question); nothing else."""
    steps: list[PlanStep] = []
    seen: set[str] = set()
    for gap in gaps:
        tool = gap.suggested_tool or tool_names.SEARCH_LOGS
        tool = tool if tool in registry else tool_names.SEARCH_LOGS
        if tool not in registry:
            continue
        if tool == tool_names.SEARCH_RUNBOOKS:
            arguments: dict[str, Any] = {"query": gap.description}
        else:
            target = gap_service(gap, service=service, known_services=known)
            arguments = _args(target, **_GAP_DEFAULTS.get(tool, {}))
        key = f"{tool}:{sorted(arguments.items())}"
        concerning = f"claim {gap.claim_id}" if gap.claim_id else "the diagnosis"
        if key in seen:
            continue
        seen.add(key)
        steps.append(PlanStep(tool_name=tool, arguments=arguments,
                              reason=f"evidence gap on {concerning}: {gap.description}"))
    return Plan(intent=Intent.DIAGNOSIS, service=service, steps=steps, evidence_gap_only=True,
                notes=f"{len(steps)} calls for {len(gaps)} evidence gaps")
