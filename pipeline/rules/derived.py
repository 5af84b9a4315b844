"""What a claim works out from its evidence rather than copies from it, read in the gatekeep
node where every tool output is at hand: words the evidence bears out though no output uses
them, and readings of the whole lists a claim binds into that belie it.

- a superlative whose value is the extreme of its field in the list (`extremes`);
- a number word that counts the records the claim speaks of (`listed.tallied_words`);
- a comparison between two values the claim gives (`comparisons`);
- an identifier given as the only one, against the other records of its list
  (`listed.exclusive_conflicts`);
- an identifier paired with a time that every record at that time gives to a peer
  (`pairing`).

Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from models.gatekeeper import GatekeeperOutcome
from models.invocation import ToolInvocation
from pipeline.rules.comparisons import compared
from pipeline.rules.extremes import extreme_values, names_an_extreme
from pipeline.rules.listed import claim_lists, exclusive_conflicts, needs_lists, tallied_words
from pipeline.rules.pairing import pairing_conflicts


@dataclass(frozen=True, slots=True)
class Derived:
    """Per verified claim id: the words its evidence bears out, and what belies it."""

    allowed: dict[str, frozenset[str]]
    belied: dict[str, str]


def derived(outcome: GatekeeperOutcome, invocations: Sequence[ToolInvocation]) -> Derived:
    """What the claims of `outcome` work out, read against the outputs of `invocations`."""
    lists = claim_lists(outcome, invocations, {
        c.claim_id for c in outcome.verified_output.claims
        if names_an_extreme(c.text) or needs_lists(c.text)})
    superlatives = extreme_values(outcome, lists)
    allowed: dict[str, frozenset[str]] = {}
    belied: dict[str, str] = {}
    for claim in outcome.verified_output.claims:
        comparison = compared(claim.text)
        extreme = superlatives.get(claim.claim_id)
        allowed[claim.claim_id] = (
            tallied_words(claim.text, lists.get(claim.claim_id, [])) | comparison.held
            | (extreme.held if extreme else frozenset()))
        problem = (extreme.problem if extreme else None) or comparison.problem
        if problem is not None:
            belied[claim.claim_id] = problem
    paired = pairing_conflicts(outcome, invocations)
    return Derived(allowed, {**paired, **belied, **exclusive_conflicts(outcome, lists)})
