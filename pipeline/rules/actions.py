"""The action guard: a recommended action names only allowed material and changes nothing
without a runbook step behind it.

An Executor's recommended action is free text a model wrote, after reading tool output anyone
can write to. Before an action reaches the Composer it must:
- not read as instructions to an agent (`pipeline.rules.untrusted`);
- name no command, URL, host, file path, service or other identifier that the allowed
  material (the query, the allowed claims and hypotheses, the steps of the runbooks those
  claims cite) does not;
- not run code fetched from the network (`curl … | sh`) unless a cited runbook step runs the
  same;
- not change production (roll back, restart, scale, fail over, delete, reconfigure) unless a
  step of a cited runbook makes a change of the same sort.
Anything else is withheld with a one-line reason (`WithheldAction`). Pure functions only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from models.composer import RunbookStep, WithheldAction
from models.gatekeeper import VerifiedEvidence
from models.invocation import ToolInvocation
from models.tool_names import SEARCH_RUNBOOKS
from pipeline.rules import lexicon
from pipeline.rules.facts import FactSet, extract_facts
from pipeline.rules.statements import grounding_problem
from pipeline.rules.untrusted import fetch_and_run, instruction_like

RUNBOOK_TOOLS = frozenset({SEARCH_RUNBOOKS})
"""Tools whose projections hold runbook documents (`documents[i].steps`)."""

_DOCUMENT_PATH = re.compile(r"^\$\.documents\[(\d+)\]")

_CHANGES: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE) for name, pattern in {
        "roll back": r"\broll(?:s|ed|ing)?[\s-]+(?:\w+\s+){0,2}?back\b|\brollbacks?\b"
                     r"|\brevert\w*|\brollout\s+undo\b|\bdowngrad\w+|\brestor\w*\s+the\s+previous",
        "restart": r"\brestart\w*|\breboot\w*|\bbounc(?:e|es|ed|ing)\b|\brecycl\w+|\bkill\w*"
                   r"|\bredeploy\w*",
        "scale": r"\bscal(?:e|es|ed|ing)\b|\bresiz\w+|\badd\s+(?:more\s+)?replicas\b",
        "fail over": r"\bfail(?:s|ed|ing)?[\s-]*over\b|\bswitch(?:ing)?[\s-]*over\b"
                     r"|\bpromot\w+",
        "delete": r"\bdelet\w+|\bdrop(?:s|ped|ping)?\b|\btruncat\w+|\bpurg\w+|\bflush\w*"
                  r"|\bwip(?:e|es|ed|ing)\b|\brm\s+-\w*[rf]|\bremov\w+|\bdestroy\w*",
        "reconfigure": r"\b(?:increas|rais|decreas|lower|reduc)(?:e|es|ed|ing)?\b|\bset\b"
                       r"|\bedit\b|\bpatch\b|\bapply\b|\bupgrad\w+|\binstall\w*|\buninstall\w*"
                       r"|\bdisabl\w+|\benabl\w+|\brotat\w+|\bmigrat\w+|\bdrain\w*|\bcordon\w*"
                       r"|\bevict\w*|\bchmod\b|\bchown\b|\biptables\b|\bsystemctl\s+(?:stop|start)",
    }.items()
}
"""Sorts of production change, each by the words that make one."""

_NEGATED = re.compile(r"\b(?:not|never|don't|do\s+not|no|avoid|without)\s+(?:\w+\s+){0,2}$",
                      re.IGNORECASE)
_PARENTHESES = re.compile(r"\([^()]*\)")

_COMMANDS = frozenset(
    "kubectl helm curl wget sudo sh bash zsh systemctl docker podman psql mysql redis-cli ssh "
    "scp rsync rm chmod chown dd mkfs iptables aws gcloud az terraform ansible patronictl "
    "openssl python python3 perl nc ncat eval powershell iex vault argocd etcdctl".split()
)
_BACKTICKS = re.compile(r"`([^`]+)`")


def runbook_steps(
    evidence: Iterable[VerifiedEvidence], invocations: Sequence[ToolInvocation]
) -> list[RunbookStep]:
    """The steps of every runbook document a verified claim is bound to (by a path into
    `documents[i]` of a runbook search), each once per claim."""
    by_id = {i.tool_call_id: i for i in invocations}
    found: dict[tuple[str, str, str], RunbookStep] = {}
    for item in evidence:
        match = _DOCUMENT_PATH.match(item.path)
        invocation = by_id.get(item.invocation_id)
        if (match is None or item.tool_name not in RUNBOOK_TOOLS or invocation is None
                or invocation.projection is None):
            continue
        documents = invocation.projection.model_dump(mode="json").get("documents")
        index = int(match.group(1))
        if not isinstance(documents, list) or index >= len(documents):
            continue
        document = documents[index]
        if not isinstance(document, dict):
            continue
        doc_id = str(document.get("doc_id") or "")
        for step in document.get("steps") or []:
            if isinstance(step, str) and step.strip():
                key = (item.claim_id, doc_id, step)
                found.setdefault(key, RunbookStep(claim_id=item.claim_id, doc_id=doc_id,
                                                  text=step))
    return list(found.values())


def changes(text: str) -> set[str]:
    """The sorts of production change `text` makes, outside parentheses (which describe,
    not instruct) and not negated ("do not roll back")."""
    plain = _PARENTHESES.sub(" ", text)
    return {name for name, pattern in _CHANGES.items()
            if any(not _NEGATED.search(plain[:m.start()]) for m in pattern.finditer(plain))}


def screen_action(
    text: str, *, material: FactSet, steps: Sequence[str]
) -> str | None:
    """Why the action must be withheld, or None if it may reach the Composer. `material`: the
    facts of the allowed material; `steps`: the cited runbooks' steps."""
    reason = instruction_like(text)
    command = fetch_and_run(text)
    if command is not None:
        if not any(fetch_and_run(step) and _urls(text) <= _urls(step) for step in steps):
            return f"runs code fetched from the network ({command!r}) with no runbook step " \
                   "behind it"
    elif reason is not None:
        return f"reads as instructions to an agent: it {reason}"
    named = [f.text for f in extract_facts(text) if not material.supports(f)]
    named += sorted(c for c in _commands(text) if not material.states_token(c))
    if named:
        return f"names what the allowed material does not: {', '.join(dict.fromkeys(named))}"
    unbacked = changes(text) - set().union(*(changes_anywhere(step) for step in steps))
    if unbacked:
        return (f"changes production ({', '.join(sorted(unbacked))}) with no runbook step "
                "behind it")
    return None


def changes_anywhere(text: str) -> set[str]:
    """The sorts of change a runbook step names anywhere, parenthesized words included."""
    return {name for name, pattern in _CHANGES.items() if pattern.search(text)}


Action = tuple[int, str, list[str]]
"""An Executor action: its position in `recommended_actions`, its text, the claims it cites."""


def screen_actions(
    actions: Iterable[Action], *, material_texts: Sequence[str], steps: Sequence[RunbookStep],
) -> tuple[list[Action], list[WithheldAction]]:
    """Split actions into those kept and those withheld with a reason."""
    step_texts = [s.text for s in steps]
    material = FactSet.from_texts([*material_texts, *step_texts])
    kept: list[Action] = []
    withheld: list[WithheldAction] = []
    for index, text, claim_ids in actions:
        reason = screen_action(text, material=material, steps=step_texts)
        if reason is None:
            kept.append((index, text, claim_ids))
        else:
            withheld.append(WithheldAction(index=index, text=text, reason=reason))
    return kept, withheld


def _commands(text: str) -> set[str]:
    words = {w.casefold() for w in re.findall(r"[A-Za-z][\w-]*", text)}
    named = words & _COMMANDS
    for span in _BACKTICKS.findall(text):
        first = span.split()
        if first:
            named.add(first[0].casefold())
    return named


def _urls(text: str) -> set[str]:
    return {f.key for f in extract_facts(text) if f.shape == "url"}


def retrieved_steps(invocations: Sequence[ToolInvocation]) -> list[str]:
    """The steps of every runbook document a run retrieved (`documents[i].steps`, wherever an
    output holds them: an imported output keeps its JSON under `result`), each document's id
    and title first: an imported agent's recommendation may restate a step its tools returned,
    and name the runbook it follows."""
    steps: list[str] = []
    for invocation in invocations:
        if invocation.projection is not None:
            steps += _steps_in(invocation.projection.model_dump(mode="json"))
    return steps


def _steps_in(value: Any, depth: int = 0) -> list[str]:
    if depth > 8 or not isinstance(value, dict | list):
        return []
    if isinstance(value, list):
        return [s for item in value for s in _steps_in(item, depth + 1)]
    found: list[str] = []
    for key, item in value.items():
        if key == "documents" and isinstance(item, list):
            for document in item:
                if isinstance(document, dict) and isinstance(document.get("steps"), list):
                    found += [str(document[k]) for k in ("doc_id", "title") if document.get(k)]
                    found += [s for s in document["steps"] if isinstance(s, str) and s.strip()]
        else:
            found += _steps_in(item, depth + 1)
    return found


def recommendation_problem(text: str, *, material: Sequence[str],
                           steps: Sequence[str]) -> str | None:
    """Why an imported answer's recommendation does not follow from what was checked, or None.

    `material`: the claims of the answer judged observed or inferred and the values they bind
    to; `steps`: the runbook steps the run retrieved. A recommendation is a next step, not a
    fact: it follows when it names nothing that material does not (versions, limits, commands,
    hosts), uses no word beyond it and the words of operating a service, and neither fetches
    and runs code without a step doing the same nor reads as instructions to an agent. Whether
    it may change production unasked is the action guard's question for Verity's own answers
    (`screen_action`), not a question of its truth."""
    command = fetch_and_run(text)
    if command is not None and not any(fetch_and_run(s) and _urls(text) <= _urls(s)
                                       for s in steps):
        return f"runs code fetched from the network ({command!r}) with no runbook step behind it"
    injected = instruction_like(text)
    if command is None and injected is not None:
        return f"reads as instructions to an agent: it {injected}"
    known = FactSet.from_texts([*material, *steps])
    named = [f.text for f in extract_facts(text) if not known.supports(f)]
    named += sorted(c for c in _commands(text) if not known.states_token(c))
    if named:
        return f"names what the checked claims do not: {', '.join(dict.fromkeys(named))}"
    return grounding_problem(text, [*material, *steps], vocabulary=lexicon.ACTION_WORDS,
                             action=True)
