"""Deterministic guards on model output: the Verifier post-check (the Composer's statements are
held to their citations by `pipeline.rules.statements`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from models.executor import CONCLUSIONS, ClaimKind
from models.gatekeeper import GatekeeperOutcome, VerifiedEvidence
from models.invocation import EvidenceStatus, QueryScope, ToolInvocation
from models.verifier import ClaimCheck, EvidenceGap, Verification, VerifierInput, VerifierOutput
from pipeline.rules import lexicon
from pipeline.rules.attributes import account_conflict, attribute_conflict
from pipeline.rules.counts import listed_count_conflict
from pipeline.rules.facts import KEY_KINDS, Fact, FactKind, FactMemo, FactSet, extract_facts
from pipeline.rules.gatekeeper import scope_text
from pipeline.rules.intervals import worked_out
from pipeline.rules.opposites import outcome_conflict, setting_conflict
from pipeline.rules.periods import period_problem
from pipeline.rules.projection import listing_header
from pipeline.rules.statements import grounding_problem, words_of
from pipeline.rules.timed import timed_conflict


@dataclass(frozen=True, slots=True)
class PostChecked:
    """Claim checks and gaps after the deterministic post-check, with what it changed."""

    claim_checks: list[ClaimCheck]
    evidence_gaps: list[EvidenceGap]
    downgrades: list[str]


def evidence_facts(
    evidence: Iterable[VerifiedEvidence], *, memo: FactMemo | None = None
) -> FactSet:
    """The facts stated by verified evidence: matched texts and query scopes (`memo`: texts
    already extracted in this verification)."""
    texts: list[str] = []
    for item in evidence:
        texts.append(item.matched_text)
        texts.extend(scope_text(item.scope))
    return FactSet.from_texts(texts, memo=memo)


def unsupported_facts(text: str, facts: FactSet) -> list[Fact]:
    """The facts of `text` that `facts` does not state."""
    return [fact for fact in extract_facts(text) if not facts.supports(fact)]


_LINE = re.compile(r"\$\.lines\[\d+\]$")
"""A binding to one line of a text output (`$.lines[41]`): a log line or a row of
command output is a record of its own, and the claim's words are read against it (and the
output's header, `projection.listing_header`), not against every other line of the file."""

_UNIVERSAL = re.compile(r"\b(?:every|all|always|each|none|throughout)\b", re.IGNORECASE)
"""A claim about every record of an output, not one of them."""

_TOOL_WORDS = re.compile(r"[-_.]+")
"""What separates the words of a tool's name (`list_alerts`, `kubectl-get-pods.txt`): the
output of a tool that lists alerts speaks of alerts, whatever its rows say."""


@dataclass(frozen=True, slots=True)
class Wording:
    """What the word check found, per verified claim id (claims with nothing to say left out)."""

    unsaid: dict[str, str]
    """Words no output of the run uses: nobody's but the model's."""
    elsewhere: dict[str, str]
    """Words the outputs the claim binds to do not use but another output of the run does: a
    reading across the run's outputs ("every line is at INFO level" bound to three of its
    lines; "the acquirer behind payment-gateway" bound to the deploy, the word in the logs)."""


def unsaid_words(outcome: GatekeeperOutcome, invocations: Sequence[ToolInvocation], *,
                 allowed: Mapping[str, frozenset[str]] | None = None) -> Wording:
    """Per verified claim: the content words it uses that no whole output of the tool calls it
    binds to uses (a line of a text output: that line), nor the narration of an incident
    (`lexicon.CLAIM_WORDS`), split by whether some other output of the run uses them. An
    excerpt is short ("1432"), so the claim's words are looked for in the whole stored
    projection ("checkout-service logged 1432 errors, returning HTTP 500" is read against the
    log search); "a memory leak in the product cache" is in none of them. `allowed`: words a
    claim may use besides, by claim id (a superlative its list bears out, `extremes`)."""
    outputs = {i.tool_call_id: i for i in invocations}
    texts: dict[str, str] = {}

    def whole(call_id: str) -> str:
        if call_id not in texts:
            call = outputs.get(call_id)
            projection = call.projection if call is not None else None
            texts[call_id] = projection.model_dump_json() if projection is not None else ""
        return texts[call_id]

    unsaid: dict[str, str] = {}
    elsewhere: dict[str, str] = {}
    runs: dict[frozenset[str], tuple[set[str], str]] = {}  # the run's words, by lines left out
    for claim in outcome.verified_output.claims:
        material: list[str] = []
        records: set[str] = set()  # text outputs read line by line for this claim
        for item in outcome.verified_evidence:
            if item.claim_id != claim.claim_id:
                continue
            call = outputs.get(item.invocation_id)
            if _LINE.match(item.path):  # one line of a text output: that line is the record
                records.add(item.invocation_id)
                material += listing_header(getattr(call.projection if call else None,
                                                   "lines", None))
            else:
                material.append(whole(item.invocation_id))
            material += [item.matched_text, item.tool_name,
                         _TOOL_WORDS.sub(" ", item.tool_name), *scope_text(item.scope)]
        vocabulary = claim_vocabulary(claim.text) | (allowed or {}).get(claim.claim_id,
                                                                        frozenset())
        problem = grounding_problem(claim.text, material, vocabulary=vocabulary,
                                    words_only=True)
        if problem is None:
            continue
        # the other lines of a log it reads line by line are other records ("user test" is
        # another line's user), unless the claim speaks of its lines as a whole ("every line")
        others = frozenset() if _UNIVERSAL.search(claim.text) else frozenset(records)
        if others not in runs:
            runs[others] = words_of([
                *(whole(call_id) for call_id in outputs if call_id not in others),
                *(name for call in invocations
                  for name in (call.tool_name, _TOOL_WORDS.sub(" ", call.tool_name)))])
        if grounding_problem(claim.text, material, vocabulary=vocabulary, words_only=True,
                             known=runs[others]) is None:
            elsewhere[claim.claim_id] = problem
        else:
            unsaid[claim.claim_id] = problem
    return Wording(unsaid=unsaid, elsewhere=elsewhere)


def claim_vocabulary(text: str) -> frozenset[str]:
    """The words a claim may use beside those of its outputs: the narration of an incident
    (`lexicon.CLAIM_WORDS`) and the names of the kinds of facts it gives itself
    (`lexicon.KIND_WORDS`: "addresses" of a claim that gives an IP address)."""
    kinds = [lexicon.KIND_WORDS.get(f.shape, frozenset()) for f in extract_facts(text)
             if f.kind is FactKind.IDENTIFIER]
    return lexicon.CLAIM_WORDS.union(lexicon.CLOSED_WORDS, *kinds)


def post_check(output: VerifierOutput, verifier_input: VerifierInput, *,
               unsaid: Mapping[str, str] | None = None,
               elsewhere: Mapping[str, str] | None = None,
               belied: Mapping[str, str] | None = None) -> PostChecked:
    """Hold the Verifier's claim checks to the verified evidence.

    Unknown claims are dropped, unchecked claims count as unsupported, evidence refs must name
    verified evidence. Evidence marked untrusted (it reads as instructions to an agent) grounds
    nothing: a claim resting only on it, or stating a fact only it states, is unsupported.
    Each fact of a claim is compared with the facts of the same kind and shape in the claim's
    own verified evidence (`FactSet.conflicts`): one that differs from every such value makes
    the claim contradicted, whatever the model said, as does another record of a list it binds
    into that belies it (`belied`: an identifier given as the only one, a value as the
    slowest). A conclusion worded beyond every output of its tool calls (`unsaid`,
    `unsaid_words`) fabricates a conclusion: contradicted when given as observed, overstated
    when given as inferred. Otherwise a direct_observation whose facts are not all in its
    evidence is downgraded (unsupported without evidence, overstated with facts missing), and
    an observation worded beyond its outputs (`unsaid`) or from outputs of the run it does not
    bind to (`elsewhere`) is a reasonable inference at most. Each change is a recorded
    downgrade.
    """
    claims = verifier_input.verified_executor_output.claims
    evidence_by_claim: dict[str, list[VerifiedEvidence]] = {c.claim_id: [] for c in claims}
    for item in verifier_input.verified_evidence:
        evidence_by_claim.setdefault(item.claim_id, []).append(item)
    known_refs = _known_refs(verifier_input.verified_evidence)
    memo: FactMemo = {}
    given = {}
    downgrades: list[str] = []
    for check in output.claim_checks:
        if check.claim_id not in evidence_by_claim:
            downgrades.append(f"{check.claim_id}: dropped, not a verified claim")
        elif check.claim_id in given:
            downgrades.append(f"{check.claim_id}: duplicate check dropped")
        else:
            given[check.claim_id] = check
    checks: list[ClaimCheck] = []
    for claim in claims:
        check = given.get(claim.claim_id) or ClaimCheck(
            claim_id=claim.claim_id, verification=Verification.UNSUPPORTED,
            note="no claim check returned",
        )
        if claim.claim_id not in given:
            downgrades.append(f"{claim.claim_id}: no check returned, counted as unsupported")
        evidence = evidence_by_claim[claim.claim_id]
        check, notes = _hold_to_evidence(check, claim.text, evidence, known_refs=known_refs,
                                         memo=memo, unsaid=(unsaid or {}).get(claim.claim_id),
                                         elsewhere=(elsewhere or {}).get(claim.claim_id),
                                         belied=(belied or {}).get(claim.claim_id),
                                         negative=claim.kind is ClaimKind.NEGATIVE_OBSERVATION,
                                         conclusion=claim.kind in CONCLUSIONS)
        downgrades.extend(notes)
        checks.append(check)
    gaps = [
        g for g in output.evidence_gaps if g.claim_id is None or g.claim_id in evidence_by_claim
    ]
    return PostChecked(claim_checks=checks, evidence_gaps=gaps, downgrades=downgrades)


def _known_refs(evidence: Sequence[VerifiedEvidence]) -> frozenset[str]:
    refs: set[str] = set()
    for item in evidence:
        refs.update(
            (item.evidence_id, item.claim_id, item.invocation_id, item.tool_name, item.path)
        )
    return frozenset(refs)


def _hold_to_evidence(
    check: ClaimCheck, text: str, evidence: list[VerifiedEvidence], *,
    known_refs: frozenset[str], memo: FactMemo, negative: bool = False,
    unsaid: str | None = None, elsewhere: str | None = None, belied: str | None = None,
    conclusion: bool = False,
) -> tuple[ClaimCheck, list[str]]:
    notes: list[str] = []
    refs = [ref for ref in check.evidence_refs if ref in known_refs]
    if len(refs) != len(check.evidence_refs):
        notes.append(f"{check.claim_id}: evidence refs to unverified material removed")
    verification = check.verification
    trusted = [item for item in evidence if item.untrusted is None]
    if evidence and not trusted:
        if verification not in _WITHHELD:
            notes.append(f"{check.claim_id}: {verification.value} -> unsupported (its only "
                         "support reads as instructions to an agent)")
            verification = Verification.UNSUPPORTED
        return _updated(check, refs, verification), notes
    known = evidence_facts(trusted, memo=memo) if trusted else None
    # single digits too: "slot 9" against "slot 8" is a changed number
    facts = extract_facts(text, single_digits=True) if known is not None else []
    said = [item.matched_text for item in trusted]
    # "30 seconds later", "between 13:59 and 14:03": readings of its times, not stated values
    readings = worked_out(text, said, known) if facts and known is not None else []
    facts = [f for f in facts if f not in readings]
    differing = [f for f in facts if known is not None and known.conflicts(f)]
    differing += severity_conflict(text, trusted) + alert_state_conflict(text, trusted)
    differing += attribute_conflict(text, said) + account_conflict(text, said)
    differing += timed_conflict(text, said) + shift_conflict(text, trusted)
    differing += listed_count_conflict(text, said)
    differing += outcome_conflict(text, said) + setting_conflict(text, said)
    planted = _planted(facts, known, [item for item in evidence if item.untrusted], memo=memo)
    if (differing or belied) and verification is not Verification.CONTRADICTED:
        verification = Verification.CONTRADICTED
        listed = ", ".join(f"{f.text} ({f.sort})" for f in differing)
        why = (f"differs from every value of its kind in its evidence: {listed}" if differing
               else belied)
        notes.append(f"{check.claim_id}: {check.verification.value} -> contradicted ({why})")
    elif planted and verification not in _WITHHELD:
        verification = Verification.UNSUPPORTED
        listed = ", ".join(f.text for f in planted)
        notes.append(f"{check.claim_id}: {check.verification.value} -> unsupported (only "
                     f"evidence that reads as instructions to an agent states: {listed})")
    elif verification in _JUDGED and known is not None and (fabricated := [
            f for f in facts if f.kind in KEY_KINDS and not known.supports(f)]):
        verification = Verification.CONTRADICTED
        listed = ", ".join(f"{f.text} ({f.sort})" for f in fabricated)
        notes.append(f"{check.claim_id}: {check.verification.value} -> contradicted "
                     f"(fabricated: absent from its verified evidence: {listed})")
    elif unsaid is not None and conclusion and verification in STATED:
        # a conclusion worded beyond every output it binds to ("a memory leak in the product
        # cache" from an OOMKilled event) may be right, but nothing Verity holds says so: given
        # as observed it fabricates a conclusion (the spec's REJECT), given as inferred it is
        # not confirmed; its words are not shown (`composer_input`)
        direct = verification is Verification.DIRECT_OBSERVATION
        verification = Verification.CONTRADICTED if direct else Verification.OVERSTATED
        why = "a fabricated conclusion" if direct else "worded beyond its tool outputs"
        notes.append(f"{check.claim_id}: {check.verification.value} -> {verification.value} "
                     f"({why}: no output of its tool calls {unsaid.removeprefix('says ')})")
    elif verification in _JUDGED and verification is not Verification.OVERSTATED:
        missing = [f for f in facts if known is not None and not known.supports(f)]
        if known is None:
            verification = Verification.UNSUPPORTED
            notes.append(f"{check.claim_id}: {check.verification.value} -> unsupported "
                         "(no evidence)")
        elif missing:
            verification = Verification.OVERSTATED
            listed = ", ".join(f.text for f in missing)
            notes.append(f"{check.claim_id}: {check.verification.value} -> overstated (not in "
                         f"evidence: {listed})")
        elif (wider := scope_problem(text, trusted, negative=negative)) is not None:
            verification = Verification.OVERSTATED
            notes.append(f"{check.claim_id}: {check.verification.value} -> overstated "
                         f"({wider})")
        else:
            verification = _as_read(check.claim_id, verification, text, trusted, notes,
                                    elsewhere=elsewhere, unsaid=unsaid)
    return _updated(check, refs, verification), notes


def _as_read(claim_id: str, verification: Verification, text: str,
             evidence: Sequence[VerifiedEvidence], notes: list[str], *,
             elsewhere: str | None, unsaid: str | None = None) -> Verification:
    """An observation worded beyond every output of its tool calls (`unsaid`), or from outputs
    of the run it does not bind to (`elsewhere`), or linking things none of its evidence links
    (`_as_link`): a reasonable inference.

    An observation worded beyond its outputs ("checkout-service is struggling: 1432 errors")
    has its facts there (a fact absent or differing is judged before) but not its words: Verity
    cannot say it saw it. Its words are not shown (`composer_input`), and when it is critical
    the run cannot pass (`verdict.effective_verdict`)."""
    if verification is not Verification.DIRECT_OBSERVATION:
        return verification
    if unsaid is not None:
        notes.append(f"{claim_id}: direct_observation -> reasonable_inference (its facts are in "
                     "its evidence, but no output of its tool calls says "
                     f"{unsaid.removeprefix('says what it does not cite: ')})")
        return Verification.REASONABLE_INFERENCE
    if elsewhere is None:
        return _as_link(claim_id, verification, text, evidence, notes)
    notes.append(f"{claim_id}: direct_observation -> reasonable_inference (worded from other "
                 "outputs of the run than those it binds to: they do not say "
                 f"{elsewhere.removeprefix('says what it does not cite: ')})")
    return Verification.REASONABLE_INFERENCE


def _as_link(claim_id: str, verification: Verification, text: str,
             evidence: Sequence[VerifiedEvidence], notes: list[str]) -> Verification:
    """An observation that links one thing to another, none of its evidence stating the link:
    a reasonable inference (a link is read from things, never seen in any one of them)."""
    link = _drawn_link(text, evidence)
    if verification is not Verification.DIRECT_OBSERVATION or link is None:
        return verification
    notes.append(f"{claim_id}: direct_observation -> reasonable_inference (draws a link none "
                 f"of its evidence states: {link!r})")
    return Verification.REASONABLE_INFERENCE


_SEVERITIES = "critical|warning|info|major|minor|page"
_SEVERITY_STATED = re.compile(
    rf"\(({_SEVERITIES})\)|\bseverity\W{{1,4}}({_SEVERITIES})\b", re.IGNORECASE)
_SEVERITY_CLAIMED = re.compile(
    rf"\(({_SEVERITIES})\)|\bseverity\W{{1,4}}({_SEVERITIES})\b"
    rf"|(?:^|[|;])\s*({_SEVERITIES})\s*(?=[|;]|$)"  # a table's cell
    rf"|\b(?:a|an|its|the)\s+({_SEVERITIES})\b(?=\s*(?:alert\b|,|\)))"
    rf"|\b({_SEVERITIES})[-\s]level\s+alert\b", re.IGNORECASE)  # "a warning-level alert"


def _said(pattern: re.Pattern[str], text: str, aliases: Mapping[str, str]) -> set[str]:
    """The values `pattern`'s groups take in `text` (the first group that matched, case
    folded, an alias read as what it stands for)."""
    found = set()
    for match in pattern.finditer(text):
        value = next((g for g in match.groups() if g is not None), "").casefold()
        found.add(aliases.get(value, value))
    return found


def _held_to_stated(text: str, evidence: Sequence[VerifiedEvidence], *, shape: str,
                    claimed: re.Pattern[str], stated: re.Pattern[str],
                    aliases: Mapping[str, str] | None = None) -> list[Fact]:
    """Each value of one attribute `text` gives (a severity, a state), as a fact, when its
    evidence states values of that attribute and none is that one."""
    given = _said(claimed, text, aliases or {})
    seen: set[str] = set()
    for item in evidence:
        seen |= _said(stated, item.matched_text, aliases or {})
    return [Fact(FactKind.NAME, value, value, shape=shape)
            for value in sorted(given) if seen and value not in seen]


def severity_conflict(text: str, evidence: Sequence[VerifiedEvidence]) -> list[Fact]:
    """The alert severity `text` gives ("the PaymentGatewayLatencyHigh alert (warning)",
    "| warning |", "a warning, has been firing"), as a fact, when the alerts of its evidence
    state severities and none is that one ("(critical)", `"severity": "critical"`)."""
    return _held_to_stated(text, evidence, shape="severity", claimed=_SEVERITY_CLAIMED,
                           stated=_SEVERITY_STATED)


_STATE_CLAIMED = re.compile(
    r"\b(?:is|are|has\s+been|have\s+been|still|currently|now|remains?)\s+(?:still\s+)?"
    r"(firing|active|resolved)\b|\b(firing)\s+since\b|\((firing|resolved)\)"
    r"|(?:^|[|;])\s*(firing|resolved)\b[^|;]*(?=[|;]|$)", re.IGNORECASE)  # a table's cell
_STATE_STATED = re.compile(
    r"\bstate\W{1,4}(firing|resolved|active)\b|\b(firing)\s+since\b|\b(resolved)\b"
    r"|\bfired\s+from\b.*?\bto\b()", re.IGNORECASE)
_STATE_ALIASES = {"active": "firing", "": "resolved"}  # "fired from … to …" ended


def alert_state_conflict(text: str, evidence: Sequence[VerifiedEvidence]) -> list[Fact]:
    """The state `text` says an alert is in now ("has been firing since 10:18", a table's
    "| firing |") as a fact, when the alerts of its evidence state theirs and none is that one
    ("fired from 09:00 to 09:00 the next week", `"state": "resolved"`). What an alert did
    once ("starts firing at 09:00", "was firing") is no state."""
    return _held_to_stated(text, evidence, shape="alert_state", claimed=_STATE_CLAIMED,
                           stated=_STATE_STATED, aliases=_STATE_ALIASES)


_SHIFT_CLAIMED = re.compile(
    r"\bshift(?:ed|s)?\s+(up|down)(?:wards?)?\b"
    r"|\b(?:no|not|n't|never)\s+(?:\w+\s+)?shift(?:ed|s)?\b()"
    # a series' state, said of it: "latency is up too", "the error rate stayed elevated" (not
    # "flat" or "steady": said as often of a baseline, or of another series of the claim)
    r"|\b(?:is|are|was|were|stayed|remained|stays|remains)\s+(?:still\s+|also\s+|clearly\s+)?"
    r"(up|down|elevated|higher|lower)\b(?!\s+(?:to|from|at|by|than|before)\b)",
    re.IGNORECASE)
_SHIFT_STATED = re.compile(r"\bshifted\s+(up|down)\s+from\s+baseline\b|\bno\s+shift\b()",
                           re.IGNORECASE)
_SHIFT_ALIASES = {"": "none", "elevated": "up", "higher": "up", "lower": "down"}


def shift_conflict(text: str, evidence: Sequence[VerifiedEvidence]) -> list[Fact]:
    """The shift `text` gives a series ("shifted up", "did not shift") as a fact, when the
    series of its evidence state theirs ("shifted up from baseline at …", "no shift from
    baseline") and none is that one: "CPU usage shifted up" against a CPU series with no
    shift."""
    return _held_to_stated(text, evidence, shape="shift", claimed=_SHIFT_CLAIMED,
                           stated=_SHIFT_STATED, aliases=_SHIFT_ALIASES)


_QUOTES = re.compile(r"`[^`]*`|\"[^\"]*\"|“[^”]*”")


def _drawn_link(text: str, evidence: Sequence[VerifiedEvidence]) -> str | None:
    """The wording by which `text` links one thing to another as its cause or correlate
    ("because", "started with") when no evidence it rests on states such a link itself;
    None otherwise. Quoted text is what a source said, not the claim's own link."""
    found = lexicon.CAUSAL.search(_QUOTES.sub(" ", text))
    if found is None or any(lexicon.CAUSAL.search(e.matched_text) for e in evidence):
        return None
    return found.group(0)


def scope_problem(text: str, evidence: Sequence[VerifiedEvidence], *, negative: bool
                  ) -> str | None:
    """Why a negative observation says more than the queries it rests on looked at; None when
    it stays within them. A claim is negative when its kind says so or when it rests on a query
    that found nothing. It may not widen its reach with words its evidence does not use ("at
    all", "not even", "healthy"); on a query limited to a minimum log level it names a level,
    and only levels at or above that minimum; on a query limited to a search term or a metric,
    it names that term; on a query of one service it speaks of no other service; it names no
    period longer than the windows its queries looked at (`periods.period_problem`)."""
    empty = [e for e in evidence if e.evidence_status is EvidenceStatus.NO_EVIDENCE]
    if not negative and not empty:
        return None
    said = " ".join([e.matched_text for e in evidence]
                    + [t for e in evidence for t in scope_text(e.scope)]).casefold()
    unfiltered = any(_unfiltered(e.scope) for e in evidence if e.scope is not None)
    reach = next((m.group(0) for m in lexicon.OVERREACH.finditer(text)
                  if m.group(0).casefold() not in said
                  and not (unfiltered and lexicon.WIDE.fullmatch(m.group(0)))), None)
    if reach is not None:
        return f"wider than its evidence: {reach!r}"
    period = period_problem(text, [e.scope.window for e in evidence
                                   if e.scope is not None and e.scope.window is not None])
    if period is not None:
        return period
    words = [w.casefold() for w in re.findall(r"[A-Za-z]+", text)]
    for item in empty:
        query = item.scope.filter or ""
        floor = _LEVEL_FILTER.search(query)
        if floor is not None:
            minimum = lexicon.LEVELS.get(floor.group(2).casefold(), 0)
            exact = floor.group(1) != ">="
            named = [w for w in words if w in lexicon.LEVELS]
            if not named:
                return (f"names no log level, but its query searched only {floor.group(0)!r}")
            outside = [w for w in named if lexicon.LEVELS[w] < minimum
                       or (exact and lexicon.LEVELS[w] != minimum)]
            if outside:
                return (f"speaks of {outside[0]!r}, but its query searched only "
                        f"{floor.group(0)!r}")
        for term in _TERM.findall(query):
            if term.casefold() not in text.casefold():
                return f"leaves out the term its query searched for ({term!r})"
        service = item.scope.service
        if service and re.search(r"\b(?:any|all|every|other)\s+services?\b", text,
                                 re.IGNORECASE):
            return f"speaks of other services, but its query looked at {service} only"
    return None


def _unfiltered(scope: QueryScope) -> bool:
    """Whether a query looked at everything in its window: no service, and no filter beyond
    "all services" or an evidence file's name."""
    if scope.service:
        return False
    query = (scope.filter or "").strip()
    if query.casefold() in ("", "all services", "any service"):
        return True
    try:
        arguments = json.loads(query)
    except ValueError:
        return False
    return isinstance(arguments, dict) and set(arguments) <= {"file"}


_LEVEL_FILTER = re.compile(r"\blevel\s*(>=|==?|:)\s*([A-Za-z]+)", re.IGNORECASE)
"""A log level filter: a floor (`level >= ERROR`) or one level (`level:error`)."""
_TERM = re.compile(r'(?:message|metric)\s+contains\s+"([^"]+)"', re.IGNORECASE)


_JUDGED = frozenset({Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE,
                     Verification.OVERSTATED})
"""Verifications that let a claim reach the Composer: each is held to its evidence."""

STATED = frozenset({Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE})
"""Verifications that let a claim be stated as it is (an allowed claim of the Composer input)."""

_WITHHELD = frozenset({Verification.UNSUPPORTED, Verification.CONTRADICTED,
                       Verification.EXTERNAL_UNKNOWN})
"""Verifications that already keep a claim out of the answer."""


def _planted(
    facts: list[Fact], known: FactSet | None, untrusted: list[VerifiedEvidence], *,
    memo: FactMemo,
) -> list[Fact]:
    """The claim's facts that only evidence reading as instructions to an agent states: an
    attacker's log line may name any host as the root cause."""
    if not untrusted:
        return []
    planted_by = evidence_facts(untrusted, memo=memo)
    return [f for f in facts
            if (known is None or not known.supports(f)) and planted_by.supports(f)]


def _updated(check: ClaimCheck, refs: list[str], verification: Verification) -> ClaimCheck:
    if refs == check.evidence_refs and verification is check.verification:
        return check
    return check.model_copy(update={"evidence_refs": refs, "verification": verification})
