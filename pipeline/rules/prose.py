"""Claims from prose: another agent's answer (Markdown or plain text) split into the claims it
states, deterministically, each with its character span in the answer.

A claim is one sentence of a paragraph, one list item, or one table row (its header row and
separator are not claims). Headings, code blocks, questions and lead-ins ("Here is what I
found:") state nothing and are left out. Recommendations ("Roll back v2.3.1", anything under a
"Next steps" heading) are kept apart as actions.

The kind comes from the wording and the heading a claim sits under: a root cause names a cause
or links one thing to another as its cause; a correlation says two things happened together; a
contributing factor says one made another worse; a negative observation says something was not
there; everything else is a finding. Hedged wording ("may", "likely", "suggests") makes the
claim a hypothesis. Critical are the root causes that are not hedged and the findings that
share an identifying fact (a version, an error code, an identifier), a time or a service with
one (what the cause names is what it rests on); an answer without
a root cause rests on its unhedged findings and negative observations, which are critical.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from models.executor import ClaimKind
from pipeline.rules import lexicon
from pipeline.rules.facts import IDENTIFYING_KINDS, FactKind, extract_facts


@dataclass(frozen=True, slots=True)
class ProseClaim:
    """One claim of an answer: `answer[start:end]` is `text` exactly; `plain` is the same
    without Markdown (emphasis, code ticks, links, table pipes), for the checks to read."""

    text: str
    plain: str
    start: int
    end: int
    kind: ClaimKind
    hedged: bool
    critical: bool
    action: bool
    section: str | None


_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_BULLET = re.compile(r"^(\s*)(?:[-*+•]|\d{1,3}[.)])\s+")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_QUOTE = re.compile(r"^\s*>\s?")
_LABEL = re.compile(r"^\s*(?:\*\*|__)?[A-Z][A-Za-z0-9 /&-]{0,30}(?:\*\*|__)?:(?:\*\*|__)?\s")
"""A line that starts with a label ("Impact: ...", "**Root cause:** ..."): a statement of its
own even when the line before ends without punctuation (a hard-wrapped sentence does not)."""
_RULE_LINE = re.compile(r"^\s*(?:[-*_]\s*){3,}$")
_BOLD_HEADING = re.compile(r"^\s*(?:\*\*|__)([^*_]{1,60}?)(?:\*\*|__)\s*:?\s*$")
_TERMINAL = (".", "!", "?", ":", ";")

_ABBREVIATIONS = frozenset("""
e.g i.e etc vs approx cf al fig no inc ltd mr ms dr st jr sr resp est min max avg
""".split())
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]*_`]*(?=\s+[\"'(\[*_`]*[A-Za-z0-9])")

_ACTION_HEADING = re.compile(
    r"next\s+steps?|recommend\w*|actions?|remediat\w*|mitigat\w*|fix(?:es)?|to\s+do|todo"
    r"|what\s+to\s+do|follow[\s-]*ups?|suggest\w*", re.IGNORECASE)
_CAUSE_HEADING = re.compile(r"\b(?:root[\s-]*caus\w*|causes?|diagnosis|conclusion)\b",
                            re.IGNORECASE)
_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:roll\s*back|revert|restart|redeploy|re-?run|increase|raise|decrease"
    r"|lower|reduce|scale|bump|set|reset|check|verify|investigate|inspect|monitor|review"
    r"|confirm|add|remove|disable|enable|update|upgrade|downgrade|renew|rotate|replace|page"
    r"|escalate|consider|run|apply|drain|cordon|tune|adjust|watch"
    r"|notify|contact|ask|audit|fix|patch|pin|limit|throttle|flush|clear|purge|delete"
    r"|restore|re-enable|roll\s+forward|look\s+(?:at|into))\b"
    r"|^(?:we|you|i|the\s+team)\s+(?:should|must|need\s+to|could|would\s+recommend|recommend)\b"
    r"|^(?:i\s+)?(?:recommend|suggest)(?:ed|s)?\b|^it\s+is\s+recommended\b",
    re.IGNORECASE)
_HEDGE = re.compile(
    r"\b(?:may|might|could|possibly|possible|perhaps|maybe|likely|unlikely|probabl[ey]"
    r"|appears?|appeared|seems?|seemed|suggests?|suggested|suspect\w*|hypothes\w*|potential"
    r"|potentially|plausibl[ey]|presumabl[ey]|conceivabl[ey]|i\s+think|i\s+believe"
    r"|not\s+sure|unclear\s+whether)\b", re.IGNORECASE)
_ORIGIN = re.compile(
    r"\b(?:is|was)\s+where\s+(?:the\s+)?(?:problems?|trouble|errors?|failures?|issues?)\s+"
    r"(?:starts?|started|begins?|began|originates?|originated)\b", re.IGNORECASE)
"""Where a chain of failures starts: "payment-gateway is where the problems start"."""
_CORRELATION = re.compile(
    r"\bcorrelat\w*|\bcoincid\w*|\bat\s+the\s+same\s+time\b|\baround\s+the\s+same\s+time\b"
    r"|\bin\s+the\s+same\s+minute\b|\b(?:right|shortly|just|immediately|minutes?)\s+after\b"
    r"|\bwithin\s+\w+\s+(?:seconds?|minutes?)\s+of\b|\bline[sd]?\s+up\s+with\b"
    r"|\bmatch(?:es|ed)?\s+the\s+(?:timing|onset)\b", re.IGNORECASE)
_CONTRIBUTING = re.compile(
    r"\bcontribut\w*|\bworse\b|\bworsen\w*"
    r"|\bexacerbat\w*|\bamplif\w*|\bcompound\w*|\baggravat\w*|\badded\s+to\b"
    r"|\bfactors?\b", re.IGNORECASE)
_NEGATIVE = re.compile(
    r"\bno\s+(?:\w+\s+){0,3}?(?:errors?|warnings?|alerts?|deploy\w*|rollouts?|events?|logs?"
    r"|lines?|restarts?|evidence|changes?|incidents?|spikes?|anomal\w+|failures?|exceptions?"
    r"|timeouts?|crash\w*|oom\w*|signs?|indications?|traces?|entries|records?|matches|hits"
    r"|results?|data|metrics?|increase|shift|change)\b"
    r"|\bno\s+(?:\w+\s+){1,4}?(?:was|were|has\s+been|have\s+been|had\s+been|got)\s+\w+(?:ed|en|wn)\b"
    r"|\bnothing\b|\bnone\b|\bnever\b|\bzero\b|\bnot\s+(?:a\s+single|any|once)\b"
    r"|\b(?:did|does|do|was|were|has|have|had|is|are)(?:\s+not|n't)\s+(?:\w+\s+)?"
    r"(?:show|log|logged|find|found|appear|appeared|fire|fired|change|changed|see|seen"
    r"|record|recorded|report|reported|contain|return|returned|present|affected|involved"
    r"|deployed|restart|restarted)\w*"
    r"|\bwithout\s+(?:any\s+)?(?:errors?|restarts?|alerts?|changes?)\b|\babsent\b",
    re.IGNORECASE)
_MARKUP = re.compile(r"\*\*|__|`")
_EMPHASIS = re.compile(
    r"(?<![^\s(\[\"'])([*_])(?=[^\s*_])(.+?)(?<=[^\s*_])\1(?=[\s.,;:!?)\]\"']|$)")
"""One `*` or `_` around words (`_20_`, `*not*`): emphasis only as a pair standing between
spaces or punctuation, never the underscore inside an identifier (`blk_-6845…`,
`/randtxt5/_temporary/_task_2008…`)."""
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_WORD = re.compile(r"[A-Za-z]{2,}")


def split_claims(answer: str) -> list[ProseClaim]:
    """The claims and actions of `answer`, in the order they stand."""
    units = list(claim_units(answer))
    claims = [read_claim(answer, start, end, section, listed=listed)
              for start, end, section, listed in units]
    kept = [c for c in claims if c is not None]
    return mark_critical(kept)


def claim_units(answer: str) -> list[tuple[int, int, str | None, bool]]:
    """(start, end, heading, listed) of every claim-sized piece: sentences, list items (listed)
    and table rows."""
    reader = _Reader(answer)
    lines = _lines(answer)
    for index, (start, end) in enumerate(lines):
        following = lines[index + 1] if index + 1 < len(lines) else (end, end)
        reader.read(start, end, answer[following[0]:following[1]])
    reader.flush()
    return [u for u in reader.units if u[1] > u[0]]


class _Reader:
    """Reads an answer line by line into claim-sized units."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.units: list[tuple[int, int, str | None, bool]] = []
        self.section: str | None = None
        self.fenced = False
        self.paragraph: list[tuple[int, int]] = []
        self.item: list[tuple[int, int]] = []
        self.table_header = False

    def flush(self) -> None:
        for group, listed in ((self.paragraph, False), (self.item, True)):
            if group:
                self.units.extend((s, e, self.section, listed)
                                  for s, e in _sentences(self.answer, group, whole=listed))
        self.paragraph, self.item = [], []

    def read(self, start: int, end: int, following: str) -> None:
        line = self.answer[start:end]
        if _FENCE.match(line):
            self.flush()
            self.fenced = not self.fenced
        elif self.fenced:
            return
        elif not line.strip() or _RULE_LINE.match(line) or _SETEXT.match(line):
            self.flush()
            self.table_header = False
        elif self._heading(line, following):
            return
        elif _TABLE_ROW.match(line):
            self._table_row(start, line, following)
        else:
            self.table_header = False
            self._text(start, end, line)

    def _heading(self, line: str, following: str) -> bool:
        heading = _HEADING.match(line) or _BOLD_HEADING.match(line)
        if heading:
            self.flush()
            self.section = heading.group(heading.lastindex or 1).strip(" *_:")
            return True
        if _SETEXT.match(following) and following.strip():
            self.flush()
            self.section = line.strip()  # its underline comes next, read as a rule
            return True
        return False

    def _table_row(self, start: int, line: str, following: str) -> None:
        self.flush()
        if _TABLE_RULE.match(line):
            return
        if not self.table_header and _TABLE_RULE.match(following):
            self.table_header = True  # the header row names columns; it states nothing
            return
        inner_start = start + line.index("|") + 1
        inner_end = start + line.rstrip().rindex("|")
        self.units.append((*_trimmed(self.answer, inner_start, inner_end), self.section, True))

    def _text(self, start: int, end: int, line: str) -> None:
        quote = _QUOTE.match(line)
        offset = start + (quote.end() if quote else 0)
        bullet = _BULLET.match(self.answer[offset:end])
        if bullet:
            self.flush()
            self.item = [(offset + bullet.end(), end)]
            return
        if self.item and (line.startswith((" ", "\t"))
                          or not _ends_sentence(self.answer, self.item[-1])):
            self.item.append((offset, end))
            return
        if self.item:
            self.flush()
        if self.paragraph and _ends_line(self.answer, self.paragraph[-1]) \
                and _LABEL.match(line):
            self.flush()  # "Root cause: X" then "Impact: Y": one statement a line
        self.paragraph.append((offset, end))


def _lines(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for line in text.splitlines(keepends=True):
        spans.append((start, start + len(line.rstrip("\r\n"))))
        start += len(line)
    return spans


def _ends_sentence(text: str, span: tuple[int, int]) -> bool:
    return text[span[0]:span[1]].rstrip().endswith(_TERMINAL)


def _ends_line(text: str, span: tuple[int, int]) -> bool:
    """A line that ends without a sentence's punctuation, or with a colon: a statement of its
    own when the next line starts anew."""
    tail = text[span[0]:span[1]].rstrip()
    return not tail.endswith((".", "!", "?", ",", ";")) or tail.endswith(":")


def _sentences(text: str, group: list[tuple[int, int]], *, whole: bool
               ) -> list[tuple[int, int]]:
    """The sentences of a paragraph (its lines read as one text), or a list item as one."""
    start, end = group[0][0], group[-1][1]
    if whole:
        return [_trimmed(text, start, end)]
    found, begin = [], start
    for match in _SENTENCE_END.finditer(text, start, end):
        word = re.search(r"(\d\s?)?([A-Za-z.]+)\.$", text[begin:match.start() + 1])
        if word and not word.group(1) and word.group(2).rstrip(".").casefold() in _ABBREVIATIONS:
            continue  # "e.g." or "Dr." mid-sentence; after a number, "ms." is a unit that ends one
        found.append(_trimmed(text, begin, match.end()))
        begin = match.end()
    found.append(_trimmed(text, begin, end))
    return found


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def claim_span(answer: str, start: int, end: int) -> tuple[int, int]:
    """`answer[start:end]` cut as the splitter cuts its units: without the whitespace around
    it, a leading quote mark or list marker, or a table row's outer pipes."""
    start, end = _trimmed(answer, start, end)
    for mark in (_QUOTE, _BULLET):
        found = mark.match(answer[start:end])
        if found and found.end() < end - start:
            start, end = _trimmed(answer, start + found.end(), end)
    text = answer[start:end]
    if _TABLE_ROW.match(text) and text.count("|") >= 2:
        start, end = _trimmed(answer, start + text.index("|") + 1, start + text.rindex("|"))
    return start, end


def plain_text(text: str) -> str:
    """`text` without Markdown: emphasis and code ticks dropped, links as their text, table
    cells joined by semicolons, whitespace runs as one space."""
    plain = _LINK.sub(r"\1", text)
    plain = _MARKUP.sub("", _EMPHASIS.sub(r"\2", plain))
    plain = " ; ".join(cell.strip() for cell in plain.split("|")) if "|" in plain else plain
    return " ".join(plain.split())


_QUOTATION = re.compile(r"`([^`]+)`|\"([^\"]+)\"|“([^”]+)”|‘([^’]+)’|(?<![\w'])'([^']+)'(?![\w'])")
_QUOTE_MIN_CHARS = 8


def quotations(text: str) -> list[str]:
    """What `text` quotes word for word (in code ticks or quotation marks, double or single),
    each of eight characters or more, whitespace runs as one space: text a tool output states
    as written (`GET /api/search failed: internal error`)."""
    found = (" ".join(next(g for g in m.groups() if g is not None).split())
             for m in _QUOTATION.finditer(text))
    return list(dict.fromkeys(q for q in found if len(q) >= _QUOTE_MIN_CHARS))


def read_claim(answer: str, start: int, end: int, section: str | None, *, listed: bool
               ) -> ProseClaim | None:
    """`answer[start:end]` read as a claim under `section` (`listed`: a list item or table
    row), not yet weighed (critical False); None when it states nothing."""
    text = answer[start:end]
    plain = plain_text(text)
    facts = extract_facts(plain)
    if not _states_something(plain, bool(facts)):
        return None
    action = bool(_IMPERATIVE.match(plain) or (
        listed and section is not None and _ACTION_HEADING.search(section)))
    own = plain_text(_QUOTED.sub(" ", text))  # the claim's own words, not those it quotes
    hedged = bool(_HEDGE.search(lexicon.PURPOSE.sub(" ", own)))
    return ProseClaim(text=text, plain=plain, start=start, end=end,
                      kind=_kind(own, section), hedged=hedged, critical=False,
                      action=action, section=section)


def _states_something(plain: str, has_facts: bool) -> bool:
    """False for lead-ins and questions ("Here is what I found:", "Why?") and for what has
    neither a fact nor three words."""
    if plain.endswith(("?", ":")):
        return False  # a question, or a lead-in ("Here is what I found for checkout-service:")
    return has_facts or len(_WORD.findall(plain)) >= 3


_QUOTED = re.compile(r"\([^()]*\)|`[^`]*`|\"[^\"]*\"|“[^”]*”")
"""Parenthesized and quoted text: a runbook's title, a logged message. Its words are the
source's, not the claim's: "(Latency caused by a slow dependency)" names no cause."""


def _kind(plain: str, section: str | None) -> ClaimKind:
    heading_cause = section is not None and bool(_CAUSE_HEADING.search(section))
    if lexicon.DENIAL.search(plain):
        return ClaimKind.NEGATIVE_OBSERVATION  # "no root cause is confirmed"
    if lexicon.CAUSE_NAMING.search(plain) or _ORIGIN.search(plain):
        return ClaimKind.ROOT_CAUSE
    if _CONTRIBUTING.search(plain):
        return ClaimKind.CONTRIBUTING_FACTOR
    if _CORRELATION.search(plain):
        return ClaimKind.CORRELATION
    if _NEGATIVE.search(plain):
        return ClaimKind.NEGATIVE_OBSERVATION
    if lexicon.CAUSAL.search(plain) or heading_cause:
        return ClaimKind.ROOT_CAUSE
    return ClaimKind.FINDING


_RESTING = frozenset({ClaimKind.FINDING, ClaimKind.NEGATIVE_OBSERVATION})


def mark_critical(claims: list[ProseClaim]) -> list[ProseClaim]:
    """`claims` (one answer's, in order) with `critical` set by the rule of the module
    docstring, from their kind, hedging and facts."""
    causes = [c for c in claims
              if c.kind is ClaimKind.ROOT_CAUSE and not c.hedged and not c.action]
    if not causes:
        return [_critical(c, c.kind in _RESTING and not c.hedged and not c.action)
                for c in claims]
    keys = {(f.kind, f.key) for c in causes for f in extract_facts(c.plain)
            if f.kind in IDENTIFYING_KINDS or f.kind in (FactKind.TIMESTAMP, FactKind.SERVICE)}
    marked = []
    for claim in claims:
        if claim in causes:
            marked.append(_critical(claim, True))
            continue
        rests = claim.kind is ClaimKind.FINDING and not claim.hedged and not claim.action and any(
            (f.kind, f.key) in keys for f in extract_facts(claim.plain))
        marked.append(_critical(claim, rests))
    return marked


def _critical(claim: ProseClaim, critical: bool) -> ProseClaim:
    if claim.critical == critical:
        return claim
    return ProseClaim(text=claim.text, plain=claim.plain, start=claim.start, end=claim.end,
                      kind=claim.kind, hedged=claim.hedged, critical=critical,
                      action=claim.action, section=claim.section)
