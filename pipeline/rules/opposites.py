"""Words of a closed class whose other member the evidence states. A claim that a login
succeeded, bound to a line that says the authentication failed, or that a clock mode was High
where its line says Low, names a value its evidence gives otherwise: the words differ as two
numbers would. Only closed classes are read (an outcome; a level or setting and its opposite),
so that a word the evidence merely lacks ("struggling") is never taken for one it contradicts.
Data and pure functions; the post-check (`guards`) applies them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pipeline.rules import lexicon
from pipeline.rules.facts import Fact, FactKind

_SUCCESS = re.compile(
    r"\b(?:succeed(?:ed|s)?|success(?:ful(?:ly)?)?|accepted|logged\s+in|log(?:ged)?-?ins?\s+"
    r"succeeded|completed\s+successfully)\b", re.IGNORECASE)
_FAILURE = re.compile(
    r"\b(?:fail(?:ed|s|ure|ures|ing)?|denied|rejected|refused|invalid|unable|error|errors"
    r"|timed\s+out|not\s+(?:accepted|allowed|authori[sz]ed))\b", re.IGNORECASE)


def outcome_conflict(text: str, evidence: Iterable[str]) -> list[Fact]:
    """A success `text` states ("user test logged in", "the attempt succeeded") where every
    line it binds to that states an outcome states a failure ("authentication failure",
    "Failed password"), as a fact; none when the claim also speaks of failure, or a line it
    binds to states a success."""
    if _FAILURE.search(text) or not (said := _SUCCESS.search(text)):
        return []
    items = list(evidence)
    if any(_SUCCESS.search(item) for item in items) or not any(
            _FAILURE.search(item) for item in items):
        return []
    word = said.group(0)
    return [Fact(FactKind.NAME, word, word.casefold(), shape="outcome")]


OPPOSITES: tuple[tuple[str, str], ...] = (
    ("high", "low"), ("up", "down"), ("on", "off"), ("enabled", "disabled"),
    ("true", "false"), ("open", "closed"), ("online", "offline"), ("healthy", "unhealthy"),
    ("ready", "unready"), ("available", "unavailable"), ("active", "inactive"),
    ("allowed", "denied"), ("present", "absent"),
)
"""Settings and states that are one or the other."""

_OTHER = {a: b for a, b in OPPOSITES} | {b: a for a, b in OPPOSITES}
_SETTING = re.compile(
    r"\b([a-z][\w-]*)\s*(?:\s(?:is|was|were|are|went|became|stays?|stayed"
    r"|remains?|remained|set\s+to)\s+|[:=]\s*)(?:still\s+|now\s+)?(" + "|".join(_OTHER) + r")\b",
    re.IGNORECASE)
"""A named setting and its value: "clock mode was High", "Clock Mode is Low", "ready=false"."""


def settings_of(text: str) -> dict[str, set[str]]:
    """The values `text` gives its named settings, by the setting's name (the word before the
    verb, case-folded: "mode" of "clock mode was High")."""
    found: dict[str, set[str]] = {}
    for match in _SETTING.finditer(text):
        name = match.group(1).casefold()
        if name in lexicon.FUNCTION_WORDS:  # "it is down": which "it" is not said
            continue
        found.setdefault(name, set()).add(match.group(2).casefold())
    return found


def setting_conflict(text: str, evidence: Iterable[str]) -> list[Fact]:
    """Each value `text` gives a setting ("its clock mode was High") where its evidence gives
    that setting only the opposite ("Clock Mode is Low"), as a fact."""
    stated: dict[str, set[str]] = {}
    for item in evidence:
        for name, values in settings_of(item).items():
            stated.setdefault(name, set()).update(values)
    differing = []
    for name, values in settings_of(text).items():
        seen = stated.get(name, set())
        for value in sorted(values):
            if seen and value not in seen and _OTHER[value] in seen:
                differing.append(Fact(FactKind.NAME, value, value, shape="setting"))
    return differing

