"""The statement check: what a Composer may say, read statement by statement. Pure functions.

The Composer answers in statements, each citing the ids of the input material it rests on
(`ComposerReply`). A statement is accepted only when
- every id it cites is in the input, of a kind its field may cite (actions only in
  `recommended_actions`; gaps apart from claims);
- every fact in it (services, identifiers, numbers with units, versions, times, error codes;
  `pipeline.rules.facts`) is stated by what it cites, and so is every number written in words;
- every content word (`pipeline.rules.lexicon`: anything that is not connective, hedging or function
  language) occurs in what it cites, by stem or by synonym class; a hyphenated compound must
  occur whole, or as its parts side by side;
- it denies where what it cites denies, and only there (no dropped or added "not");
- causal wording ("because", "led to", "driven by" ... in any phrasing) appears only where what
  it cites states a causal link, or it cites an allowed ROOT_CAUSE claim under PASS; wording of
  exclusivity ("solely", "alone", "the root cause") only under PASS citing an allowed
  ROOT_CAUSE claim; wording of certainty only of confirmed material; none of the three under
  REJECT. Denials ("no root cause is confirmed") are always allowed;
- it is one line of plain text that does not read as instructions to an agent.

Each statement's *section* is the weakest material it cites (a hypothesis makes a statement a
possible direction, whatever it says), and the answer is assembled by section under headings
worded by verdict (`assemble`): a model chooses its sentences, never how sure they sound.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import snowballstemmer

from models.common import Verdict
from models.composer import (
    AllowedClaim,
    ComposerAudit,
    ComposerField,
    ComposerInput,
    ComposerOutput,
    ComposerReply,
    RejectedStatement,
    Statement,
)
from models.executor import ClaimKind
from models.verifier import Verification
from pipeline.rules import lexicon
from pipeline.rules.facts import FactKind, FactSet, extract_facts
from pipeline.rules.untrusted import instruction_like

NO_RELIABLE_CONCLUSION = "Current evidence cannot support a reliable conclusion."
DEFAULT_ACTION = "Collect the missing evidence listed above, then ask again."
LOW_CONFID_LEAD = "The evidence is incomplete, so no root cause is confirmed."
PASS_NO_ROOT_LEAD = "Confirmed findings are listed below; no root cause is confirmed."
MAX_REJECTED = 10


class Section(IntEnum):
    """Where a statement stands in the answer; higher is surer. A statement's section is the
    lowest of what it cites."""

    GAP = 0
    ACTION = 1
    DIRECTION = 2
    INFERRED = 3
    FINDING = 4
    ROOT_CAUSE = 5


HEADINGS: dict[Verdict, dict[Section, str]] = {
    Verdict.PASS: {
        Section.ROOT_CAUSE: "Root cause, supported by verified evidence",
        Section.FINDING: "Confirmed findings",
        Section.INFERRED: "Inferred from the evidence",
        Section.DIRECTION: "Possible directions (not confirmed)",
        Section.GAP: "Evidence gaps",
    },
    Verdict.LOW_CONFID: {
        Section.FINDING: "Confirmed information",
        Section.DIRECTION: "Possible directions (not confirmed)",
        Section.GAP: "Evidence gaps",
    },
    Verdict.REJECT: {
        Section.FINDING: "Verified observations (no conclusion is drawn from them)",
        Section.GAP: "Evidence gaps",
    },
}
"""The headings of each verdict's answer, in order; a section absent here cannot be used."""

_SUMMARY_SECTIONS = frozenset({Section.ROOT_CAUSE, Section.FINDING, Section.INFERRED,
                               Section.GAP})
"""A summary has no heading to hedge it: possible directions stay in the body."""


@dataclass(frozen=True, slots=True)
class CheckedStatement:
    """One statement after the check: its section when accepted, else why not."""

    field: ComposerField
    index: int
    statement: Statement
    section: Section | None
    problem: str | None

    @property
    def accepted(self) -> bool:
        """True when the statement may be published."""
        return self.problem is None


@dataclass(frozen=True, slots=True)
class _Item:
    """One citable piece of the input: its kind, text, section and causal standing."""

    kind: str
    text: str
    section: Section
    root_cause: bool = False
    """An allowed ROOT_CAUSE claim under PASS."""
    backing: tuple[str, ...] = ()
    """Texts it rests on that a statement citing it may also use (an action's claims)."""


def check_reply(reply: ComposerReply, composer_input: ComposerInput) -> list[CheckedStatement]:
    """Every statement of the reply, checked against the input."""
    items = _items(composer_input)
    verdict = composer_input.verdict
    fields: list[tuple[ComposerField, list[Statement]]] = [
        ("answer_summary", reply.answer_summary),
        ("user_facing_answer", reply.user_facing_answer),
        ("recommended_actions", reply.recommended_actions),
    ]
    return [
        _check(field, index, statement, items=items, verdict=verdict)
        for field, statements in fields for index, statement in enumerate(statements)
    ]


def audit(checked: Sequence[CheckedStatement]) -> ComposerAudit:
    """The compact audit of a checked reply."""
    sections: dict[str, int] = {}
    for item in checked:
        if item.section is not None and item.accepted:
            key = item.section.name.lower()
            sections[key] = sections.get(key, 0) + 1
    rejected = [
        RejectedStatement(field=c.field, index=c.index, text=c.statement.text[:160],
                          reason=c.problem or "")
        for c in checked if not c.accepted
    ]
    return ComposerAudit(
        status="rejected" if rejected else "accepted", statements=len(checked),
        accepted=len(checked) - len(rejected), sections=sections,
        rejected=rejected[:MAX_REJECTED],
    )


def assemble(composer_input: ComposerInput, checked: Sequence[CheckedStatement]
             ) -> ComposerOutput:
    """The published answer from accepted statements only, under the verdict's headings."""
    verdict = composer_input.verdict
    accepted = [c for c in checked if c.accepted and c.section is not None]
    summary_parts = [("Root cause: " if c.section is Section.ROOT_CAUSE else "") + c.statement.text
                     for c in accepted if c.field == "answer_summary"]
    lead = _lead(composer_input)
    summary = " ".join(([lead] if lead else []) + summary_parts)
    body: dict[Section, list[str]] = {}
    for c in accepted:
        if c.field == "user_facing_answer" and c.section is not None:
            body.setdefault(c.section, []).append(c.statement.text)
    if verdict is Verdict.LOW_CONFID:
        body.setdefault(Section.FINDING, ["Nothing could be confirmed."])
    if verdict is not Verdict.PASS or composer_input.missing_info:
        gaps = [g.text for g in composer_input.missing_info]
        if verdict is Verdict.LOW_CONFID and not gaps:
            gaps = ["The evidence gaps were not itemized."]
        if gaps and Section.GAP not in body:
            body[Section.GAP] = gaps
    sections = [
        _section(heading, body.get(section, []))
        for section, heading in sorted(HEADINGS[verdict].items(), key=lambda kv: -kv[0])
    ]
    actions = [c.statement.text for c in accepted if c.field == "recommended_actions"]
    parts = [f"Question: {composer_input.original_query}", summary, *sections]
    return ComposerOutput(
        answer_summary=summary or PASS_NO_ROOT_LEAD,
        recommended_actions=actions or [DEFAULT_ACTION],
        user_facing_answer="\n\n".join(p for p in parts if p),
    )


def self_statements(composer_input: ComposerInput) -> ComposerReply:
    """The reply that restates the input word for word: what the offline Composer and the
    fallbacks publish. Every statement passes the check for an input the builder made."""
    items = _items(composer_input)
    summary = [Statement(text=c.text, cites=[c.claim_id])
               for c in composer_input.allowed_claims
               if items[c.claim_id].section is Section.ROOT_CAUSE][:1]
    body = [Statement(text=c.text, cites=[c.claim_id]) for c in composer_input.allowed_claims]
    body += [Statement(text=h.text, cites=[h.hypothesis_id])
             for h in composer_input.allowed_hypotheses]
    body += [Statement(text=g.text, cites=[g.gap_id]) for g in composer_input.missing_info]
    actions = [Statement(text=a.text, cites=[a.action_id])
               for a in composer_input.recommended_actions]
    return ComposerReply(answer_summary=summary, user_facing_answer=body,
                         recommended_actions=actions)


def item_problem(text: str, *, section: Section, verdict: Verdict, root_cause: bool = False
                 ) -> str | None:
    """Why material the builder would hand the Composer cannot be published as it stands
    under this verdict (a FINDING worded as the sole cause, say); None when it can."""
    item = _Item("claim", text, section, root_cause=root_cause)
    return _wording_problem(text, [item], section=section, verdict=verdict,
                            field="user_facing_answer")


def gap_problem(text: str, material: Sequence[str]) -> str | None:
    """Why `text` cannot be shown as an evidence gap; None when it can. A gap names what is
    missing: one line, no Markdown, no instructions; every clause carries an absence ("not
    checked", "missing", "needed"); no cause, no exclusive cause, no certainty (a check named
    as a purpose, "needed to confirm", is none); every fact and word within `material` (the
    query, the allowed claims, the run's evidence) or the words that describe evidence."""
    shape = _shape_problem(text)
    if shape:
        return shape
    plain = lexicon.PURPOSE.sub(" ", lexicon.DENIAL.sub(" ", text))
    for pattern, what in ((lexicon.CAUSAL, "draws a causal link"),
                          (lexicon.CAUSE_NAMING, "names a cause"),
                          (lexicon.CERTAINTY, "states something as settled")):
        found = pattern.search(plain)
        if found:
            return f"{what} ({found.group(0)!r}): a gap names what is missing"
    asserting = [c.strip() for c in _CLAUSE.split(text)
                 if c.strip() and not lexicon.ABSENCE.search(c)]
    if asserting:
        return f"asserts rather than names what is missing: {asserting[0][:60]!r}"
    known = FactSet.from_texts(material)
    absent = [f.text for f in extract_facts(text, single_digits=True) if not known.supports(f)]
    if absent:
        return f"states what nothing in the run states: {_listed(absent)}"
    vocab, joined = _vocabulary_of(material, extra=_GAP_VOCABULARY)
    tokens = _WORD.findall(_rewrite(_without_facts(_unpossessed(
        lexicon.ABSENCE.sub(" , ", lexicon.EXCLUSIVE.sub(" , ", lexicon.PURPOSE.sub(
            " , ", text)))))))
    unknown = [w for w in tokens if not _covered(w, vocab, joined, lambda: known) and not all(
        _covered(p, vocab, joined, lambda: known) for p in re.split(r"[-_.]", w) if p)]
    if unknown:
        return f"says what nothing in the run says: {_listed(unknown)}"
    return None


_CLAUSE = re.compile(r"(?<=[.;!?])\s+|;\s*|,\s+(?:and|but)\s+|\s+(?:but|while|whereas|"
                     r"although|though)\s+", re.IGNORECASE)


# -- the check ---------------------------------------------------------------------------------


def _items(ci: ComposerInput) -> dict[str, _Item]:
    verdict = ci.verdict
    claims = {c.claim_id: c for c in ci.allowed_claims}
    items: dict[str, _Item] = {}
    for claim in ci.allowed_claims:
        items[claim.claim_id] = _Item("claim", claim.text, _claim_section(claim, verdict),
                                      root_cause=(verdict is Verdict.PASS
                                                  and claim.kind is ClaimKind.ROOT_CAUSE))
    for hypothesis in ci.allowed_hypotheses:
        items[hypothesis.hypothesis_id] = _Item("hypothesis", hypothesis.text, Section.DIRECTION)
    for gap in ci.missing_info:
        items[gap.gap_id] = _Item("gap", gap.text, Section.GAP)
    for action in ci.recommended_actions:
        backing = tuple(claims[i].text for i in action.claim_ids if i in claims)
        rooted = any(items[i].root_cause for i in action.claim_ids if i in items)
        items[action.action_id] = _Item("action", action.text, Section.ACTION,
                                        root_cause=rooted, backing=backing)
    return items


def _claim_section(claim: AllowedClaim, verdict: Verdict) -> Section:
    kind, verification = claim.kind, claim.verification
    if verdict is Verdict.REJECT:
        return Section.FINDING
    if kind is ClaimKind.ROOT_CAUSE:
        return Section.ROOT_CAUSE if verdict is Verdict.PASS else Section.DIRECTION
    if verification is Verification.DIRECT_OBSERVATION:
        return Section.FINDING
    return Section.INFERRED if verdict is Verdict.PASS else Section.DIRECTION


def _check(field: ComposerField, index: int, statement: Statement, *,
           items: dict[str, _Item], verdict: Verdict) -> CheckedStatement:
    def done(section: Section | None, problem: str | None) -> CheckedStatement:
        return CheckedStatement(field, index, statement, section, problem)

    text = statement.text
    shape = _shape_problem(text)
    if shape:
        return done(None, shape)
    unknown = [i for i in statement.cites if i not in items]
    if unknown:
        return done(None, f"cites ids absent from its input: {_ids(unknown)}")
    cited = [items[i] for i in dict.fromkeys(statement.cites)]
    kinds = {c.kind for c in cited}
    if field == "recommended_actions":
        if "action" not in kinds or kinds - {"action", "claim"}:
            return done(None, "an action must cite action ids (and may cite claims), "
                        "nothing else")
        section = Section.ACTION
    else:
        if "action" in kinds:
            return done(None, "cites an action outside recommended_actions")
        if "gap" in kinds and kinds != {"gap"}:
            return done(None, "cites evidence gaps together with claims or hypotheses")
        section = min(c.section for c in cited)
        if section not in HEADINGS[verdict]:
            return done(None, f"cites material that a {verdict.value} answer cannot show")
        if field == "answer_summary" and section not in _SUMMARY_SECTIONS:
            return done(None, "a summary cannot state a possible direction")
    # A statement that draws a causal link or names a cause states only what the items that
    # license it say (an allowed root cause under PASS, or material that draws the link
    # itself): citing the root cause beside a red herring licenses no blame for the red herring.
    grounds = _licensing(text, cited, verdict) or cited
    problem = (_facts_problem(text, grounds)
               or _wording_problem(text, cited, section=section, verdict=verdict, field=field)
               or _words_problem(_unworded(text), grounds, words_of_backing=False)
               or _polarity_problem(text, cited))
    return done(section if problem is None else None, problem)


def _licensing(text: str, cited: Sequence[_Item], verdict: Verdict) -> list[_Item]:
    """The cited items that license the causal link or the named cause `text` states (empty
    when it states none)."""
    plain = lexicon.PURPOSE.sub(" ", lexicon.DENIAL.sub(" ", text))
    if not (lexicon.CAUSAL.search(plain) or lexicon.CAUSE_NAMING.search(plain)):
        return []
    return [c for c in cited if (verdict is Verdict.PASS and c.root_cause)
            or any(lexicon.CAUSAL.search(t) for t in _material([c]))]


def words_of(texts: Iterable[str]) -> tuple[set[str], str]:
    """The normalized words of `texts` and their sequences joined, built once for many
    checks against the same texts (`grounding_problem`'s `known`)."""
    return _vocabulary_of(texts)


def grounding_problem(text: str, material: Sequence[str], *,
                      vocabulary: frozenset[str] = frozenset(), action: bool = False,
                      words_only: bool = False,
                      known: tuple[set[str], str] | None = None) -> str | None:
    """Why `text` (an Executor hypothesis or action, a claim) says what `material` does not;
    None when every fact and content word of it is in `material` (or, for words, in
    `vocabulary`). Causal wording and hedges are allowed (a possible direction links what it
    cites); exclusive causes and certainty are not, save an `action`'s imperative ("Confirm
    the primary is unhealthy"). `words_only`: the content words alone (a claim, whose facts
    and wording the post-check and the verdict rules judge); `known`: words allowed besides,
    as `words_of` built them."""
    items = [_Item("claim", t, Section.FINDING) for t in material]
    extra = frozenset(_norm(w) for w in vocabulary)
    if words_only:
        return _words_problem(_unworded(text), items, extra=extra, known=known)
    plain = lexicon.PURPOSE.sub(" ", lexicon.DENIAL.sub(" ", text))
    wordings = [(lexicon.CAUSE_NAMING, "names a cause")]
    if not action:
        wordings.append((lexicon.CERTAINTY, "states something as settled"))
    for pattern, what in wordings:
        found = pattern.search(plain)
        if found:
            return f"{what} ({found.group(0)!r})"
    return _facts_problem(text, items) or _words_problem(_unworded(text), items, extra=extra)


_MARKUP = re.compile(r"^\s*(?:[-*•#>]|\d+[.)]\s)|\*\*|__|```|^\s*#|\[[^\]]*\]\(")


def _shape_problem(text: str) -> str | None:
    if "\n" in text or "\r" in text:
        return "is more than one line"
    if _MARKUP.search(text):
        return "uses Markdown"
    if not text.strip():
        return "is empty"
    injected = instruction_like(text)
    if injected:
        return f"reads as instructions to an agent: {injected}"
    return None


def _material(cited: Iterable[_Item]) -> list[str]:
    texts: list[str] = []
    for item in cited:
        texts.append(item.text)
        texts.extend(item.backing)
    return texts


def _facts_problem(text: str, cited: Sequence[_Item]) -> str | None:
    known = FactSet.from_texts(_material(cited))
    absent = [f.text for f in extract_facts(text, single_digits=True) if not known.supports(f)]
    if absent:
        return f"states what it does not cite: {_listed(absent)}"
    return None


_WORD = re.compile(r"[^\W\d_](?:[\w'’]*\w)?(?:[-_.][\w]+)*", re.UNICODE)
# A snowball stemmer keeps the word it is stemming on itself: two threads sharing one corrupt
# each other (IndexError, or a wrong stem that the cache below would keep). Workers judge on
# threads, so each thread has its own.
_STEMMERS = threading.local()


def _stem(word: str) -> str:
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    stem: str = stemmer.stemWord(word)
    return stem


_SYNONYM_STEMS: dict[str, str] = {}


def _fill_synonyms() -> None:
    for name, words in lexicon.SYNONYMS.items():
        for word in words:
            _SYNONYM_STEMS[_stem(lexicon.IRREGULAR.get(word, word))] = name


_fill_synonyms()


_BRITISH = re.compile(r"(?<=\w{3})(?:(is|ys)(e|ed|es|ing|ation|ations)|(o)u(r|rs))$")
"""British spellings (initialised, analyse, behaviour): one word with the American
(initialized, analyze, behavior), whichever of the two a claim and its evidence use."""


@functools.lru_cache(maxsize=32768)
def _norm(word: str) -> str:
    word = word.casefold().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    word = _BRITISH.sub(lambda m: (m[1][0] + "z" + m[2]) if m[1] else m[3] + m[4], word)
    word = lexicon.IRREGULAR.get(word, word)
    stem = _stem(word)
    return _SYNONYM_STEMS.get(stem, stem)


def _rewrite(text: str) -> str:
    for pattern, word in lexicon.PHRASES:
        text = pattern.sub(word, text)
    return text


@functools.lru_cache(maxsize=8192)
def _vocabulary(text: str) -> tuple[frozenset[str], str]:
    """The normalized words of `text` (facts' words included: "ERROR lines" says "error"),
    and its words joined by single spaces (for compounds)."""
    words = [_norm(w) for w in _split_words(_rewrite(_unpossessed(text)))]
    return frozenset(words), " " + " ".join(words) + " "


def content_stems(text: str) -> frozenset[str]:
    """The content words of `text` as the word check compares them: stemmed, a synonym as
    its class, a phrase as its word ("timed out" is "timeout"), function words left out."""
    stems, _ = _vocabulary(text)
    return stems - _FUNCTION_STEMS


def _vocabulary_of(material: Iterable[str], *, extra: frozenset[str] = frozenset()
                   ) -> tuple[set[str], str]:
    """The normalized words of every text of `material` (and `extra`), and their sequences
    joined (for compounds)."""
    vocab: set[str] = set(extra)
    joined = ""
    for part in material:
        words, sequence = _vocabulary(part)
        vocab |= words
        joined += sequence
    return vocab, joined


_POSSESSIVE = re.compile(r"['’]s\b")


def _unpossessed(text: str) -> str:
    return _POSSESSIVE.sub("", text)


_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _split_words(text: str) -> list[str]:
    """The words of `text`, compounds split at `-`, `_` and `.`, and a CamelCase name both
    whole and in its parts ("OOMKilled" says "killed", "CertificateExpiringSoon" "expiring")."""
    words: list[str] = []
    for token in _WORD.findall(text):
        for part in re.split(r"[-_.]", token):
            if not part:
                continue
            words.append(part)
            camel = _CAMEL.findall(part)
            if len(camel) > 1:
                words.extend(camel)
    return words


def _without_facts(text: str) -> str:
    """`text` with the spans of its facts blanked: facts are compared as facts."""
    # services are words too: compounds match whole; one pass over the text, longest first
    spans = sorted({f.text for f in extract_facts(text, single_digits=True)
                    if f.kind is not FactKind.SERVICE}, key=lambda t: (-len(t), t))
    if not spans:
        return text
    facts = "|".join(re.escape(t) for t in spans)
    return re.sub(rf"(?<!\w)(?:{facts})(?!\w)", " ", text)


def _words_problem(text: str, cited: Sequence[_Item], *, words_of_backing: bool = True,
                   extra: frozenset[str] = frozenset(),
                   known: tuple[set[str], str] | None = None) -> str | None:
    """Every content word of `text` in what it cites (an action's words in the action itself
    unless `words_of_backing`: "raise" is no restatement of "roll back" because its claim
    "shifted up"); `extra`: normalized words allowed besides."""
    material = _material(cited) if words_of_backing else [c.text for c in cited]
    texts = tuple(_material(cited))
    numbers = functools.cache(lambda: FactSet.from_texts(texts))  # read for number words only
    vocab, joined = _vocabulary_of(material, extra=extra)
    absent: list[str] = []
    plain = _uncounted(_unpossessed(_PERIOD.sub(" ", _PLURAL_NUMBER.sub("", text))))
    for token in _WORD.findall(_rewrite(_without_facts(plain))):
        if _covered(token, vocab, joined, numbers) or (
                known is not None and _covered(token, *known, numbers)):
            continue
        absent.append(token)
    if absent:
        return f"says what it does not cite: {_listed(absent)}"
    return None


_COUNT_WORD = re.compile(
    r"\b(?:" + "|".join(w for w, n in lexicon.NUMBER_WORDS.items() if n == int(n) and n >= 2)
    + r")\b", re.IGNORECASE)


def _uncounted(text: str) -> str:
    """`text` without the number words that count the identifiers or the times it lists
    after them ("two pods, billing-service-f48535746-w7v58 and billing-service-f48535746-srjwq",
    "twice, at 16:01:46 and 16:03:11"), or the items of the first list that follows them in
    their clause ("all three pods (48h9s, 97t2x, 6pwxh)", "four requests from 10.11.21.123,
    .126, .134 and .136"): the claim states that count itself, and each item is its own."""
    for match in reversed(list(_COUNT_WORD.finditer(text))):
        after = extract_facts(text[match.end():])
        count = lexicon.NUMBER_WORDS[match.group(0).casefold()]
        ids = {f.key for f in after if f.kind is FactKind.IDENTIFIER}
        times = {f.key for f in after if f.kind is FactKind.TIMESTAMP and ":" in f.key}
        # times of day: "on Jul 10" is their day
        if count in (len(ids), len(times), _listed_after(text[match.end():])):
            text = text[:match.start()] + " " + text[match.end():]
    return text


_ITEM = r"[^\s,;:()]+"
_LIST = re.compile(rf"(?<![^\s(]){_ITEM}(?:\s*,\s*{_ITEM})*\s*,?\s+and\s+{_ITEM}"
                   rf"|(?<![^\s(]){_ITEM}(?:\s*,\s*{_ITEM})+")
_NAME_LIKE = re.compile(r"[\d._-]")
"""What an item of a counted list has: a digit, a dot, a dash or an underscore (a pod's suffix,
an address, a block), not a plain word ("pods, a and b" lists two)."""
_CLAUSE_END = re.compile(r"[.;!?](?:\s|$)|\s[-–—]\s")
_LIST_REACH = 6
"""Words at most between a number word and the list it counts ("three orders-api pods (...)")."""


def _listed_after(text: str) -> int:
    """How many items the first list of `text`'s first clause has (names separated by commas
    and a last "and", each `_NAME_LIKE`), when it begins within `_LIST_REACH` words; else 0."""
    clause = text[:end.start()] if (end := _CLAUSE_END.search(text)) else text
    found = _LIST.search(clause)
    while found is not None and len(clause[:found.start()].split()) <= _LIST_REACH:
        items = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", found.group(0).strip())
        if all(_NAME_LIKE.search(item) for item in items):
            return len(items)
        found = _LIST.search(clause, found.start() + 1)  # "pods, a-1 and b-2": from "a-1"
    return 0


_PERIOD = re.compile(r"\bevery(?=\s+\d)", re.IGNORECASE)
"""The "every" of a period ("retried every 30 s"): the duration is the fact, and no
quantifier over records."""
_PLURAL_NUMBER = re.compile(r"(?<=\d)s\b")
"""The s of "503s" or "1990s": the number is the fact, the s no word."""


def _covered(token: str, vocab: set[str], joined: str, numbers: Callable[[], FactSet]) -> bool:
    folded = token.casefold().replace("’", "'")
    if folded in lexicon.FUNCTION_WORDS:  # "e.g" before it is split at its dot
        return True
    parts = [p for p in re.split(r"[-_.]", folded) if p]
    if len(parts) > 1:
        sequence = " " + " ".join(_norm(p) for p in parts) + " "
        return sequence in joined
    if folded in lexicon.FUNCTION_WORDS or folded in lexicon.NEGATIONS:
        return True
    if folded in lexicon.NUMBER_WORDS:  # its value stated, or the word itself given
        value = lexicon.NUMBER_WORDS[folded]
        return _norm(folded) in vocab or any(
            numbers().supports(f) for f in extract_facts(f"{value:g}", single_digits=True))
    return _norm(folded) in vocab


_NEGATION = re.compile(
    r"\b(?:" + "|".join(re.escape(w) for w in sorted(lexicon.NEGATIONS, key=len, reverse=True))
    + r")\b|n't\b", re.IGNORECASE)


def _denies(text: str) -> bool:
    text = lexicon.DENIAL.sub(" ", text)
    if _NEGATION.search(text):
        return True
    return lexicon.NOCHANGE in _vocabulary(text)[0]


def _polarity_problem(text: str, cited: Sequence[_Item]) -> str | None:
    denies = _denies(text)
    denying = [item for item in cited if _denies(item.text)]
    if denies and not denying and not any(_denies(t) for t in _material(cited)):
        return "denies what it cites"
    if not denies and denying and len(denying) == len(cited):
        return "drops the denial of what it cites"
    return None


def _wording_problem(text: str, cited: Sequence[_Item], *, section: Section, verdict: Verdict,
                     field: ComposerField) -> str | None:
    plain = lexicon.PURPOSE.sub(" ", lexicon.DENIAL.sub(" ", text))
    rooted = verdict is Verdict.PASS and any(c.root_cause for c in cited)
    causal = lexicon.CAUSAL.search(plain)
    if causal and verdict is Verdict.REJECT:
        return f"draws a causal link under REJECT ({causal.group(0)!r})"
    if causal and not rooted and not any(lexicon.CAUSAL.search(t) for t in _material(cited)):
        return f"draws a causal link that nothing it cites draws ({causal.group(0)!r})"
    exclusive = lexicon.EXCLUSIVE.search(plain)
    if exclusive and not (rooted and section in (Section.ROOT_CAUSE, Section.ACTION)) and (
            causal or lexicon.CAUSE_NAMING.search(plain)
            or not any(lexicon.EXCLUSIVE.search(t) for t in _material(cited))):
        # A quantifier ("only", "entirely") the cited material itself uses, in a statement
        # that names no cause, restates that material; anything else makes one thing the
        # whole explanation.
        return ("states an exclusive or final cause without an allowed root-cause claim "
                f"under PASS ({exclusive.group(0)!r})")
    certain = lexicon.CERTAINTY.search(plain)
    if certain and field != "recommended_actions" and (
            verdict is Verdict.REJECT or section not in (Section.ROOT_CAUSE, Section.FINDING)):
        return f"states as settled what is not confirmed ({certain.group(0)!r})"
    return None


def _unworded(text: str) -> str:
    """`text` without its wording of causes, exclusivity, certainty and denial: the wording
    check has judged those; the word check reads the rest."""
    for pattern in (lexicon.DENIAL, lexicon.PURPOSE, lexicon.EXCLUSIVE, lexicon.CAUSAL,
                    lexicon.CERTAINTY):
        text = pattern.sub(" , ", text)
    return text


def _lead(ci: ComposerInput) -> str:
    if ci.verdict is Verdict.REJECT:
        return NO_RELIABLE_CONCLUSION
    if ci.verdict is Verdict.LOW_CONFID:
        return LOW_CONFID_LEAD
    if not any(c.kind is ClaimKind.ROOT_CAUSE for c in ci.allowed_claims):
        return PASS_NO_ROOT_LEAD
    return ""


def _section(title: str, items: list[str]) -> str:
    if not items:
        return ""
    return title + ":\n" + "\n".join(f"- {item}" for item in items)


def _listed(words: Sequence[str]) -> str:
    unique = list(dict.fromkeys(words))
    shown = ", ".join(repr(w[:40]) for w in unique[:6])
    return shown + (f" and {len(unique) - 6} more" if len(unique) > 6 else "")


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(repr(i[:24]) for i in ids[:5])


_GAP_VOCABULARY: frozenset[str] = frozenset(_norm(w) for w in lexicon.GAP_WORDS)
_FUNCTION_STEMS: frozenset[str] = frozenset(_norm(w) for w in lexicon.FUNCTION_WORDS)
