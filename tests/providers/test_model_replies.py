"""Nothing a model invents reaches the user (issue 19): the model-reply corpus
(`tests/data/model_replies/`) replayed through the fake Messages API server on both paths.

Each entry is what one role (Composer, Verifier or Executor) answers; every other role answers
like Claude (`claude_like`). Both paths run over real HTTP with the Anthropic provider
(`tests.model_replies`): `verity verify BUNDLE --provider anthropic` on the scenario's bundle
(exported at test time from a like-Claude run), and `verity run QUERY --scenario NAME` with the
Claude agents, both in this process through the code the CLI calls; one entry per category also
goes through the real CLI in a subprocess and must publish exactly what the in-process replay
published.

- adversarial: none of an entry's `invented` strings is in the published answer (summary,
  answer, actions), on either path;
- faithful: at least 95% of the Composer replies are published as written (audit `accepted`,
  no fallback), measured on each path; a refused entry is listed with the check's reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.model_replies import (
    PATHS,
    Entry,
    Replay,
    Replayer,
    cli_replay,
    composer_input_of,
    load_corpus,
)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

ADVERSARIAL = load_corpus("adversarial")
FAITHFUL = load_corpus("faithful")
FAITHFUL_TARGET = 0.95
SCENARIOS = {"checkout-pool-exhaustion", "inventory-oom-crashloop",
             "orders-latency-payment-gateway", "settlement-tls-expiry",
             "catalog-pricing-rate-limit", "search-unexplained-errors", "billing-no-evidence",
             "checkout-injected-instructions"}
CATEGORIES = {"new_cause", "new_entity", "numbers", "invented_action", "exclusivity_certainty",
              "hypothesis_promoted", "withheld_restated", "asserting_gap", "negative_overreach",
              "prompt_injection", "verifier_inflation", "markdown_multiline"}


def _firsts(entries: list[Entry]) -> list[Entry]:
    seen: dict[str, Entry] = {}
    for entry in entries:
        seen.setdefault(entry.category, entry)
    return list(seen.values())


FAITHFUL_TEXTS = {s["text"][:160] for e in FAITHFUL if e.reply
                  for statements in e.reply.values() for s in statements}
"""Every statement of the faithful corpus (as an audit quotes it): an adversarial Composer
reply mixes its inventions into such statements."""

SPOT_CHECKS = _firsts(ADVERSARIAL) + _firsts(FAITHFUL)
"""One entry per category of each corpus, also run through the real CLI."""

_REPLAYS: dict[tuple[str, str], Replay] = {}
"""Every replay of this module, by (entry id, path): the aggregate test and the CLI spot
checks reuse what the per-entry tests replayed."""


@pytest.fixture(scope="module")
def replayer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replayer]:
    with Replayer(tmp_path_factory.mktemp("model-replies")) as running:
        yield running


def replayed(replayer: Replayer, entry: Entry, path: str) -> Replay:
    key = (entry.id, path)
    if key not in _REPLAYS:
        _REPLAYS[key] = replayer.replay(entry, path)
    return _REPLAYS[key]


def _input_texts(replay: Replay) -> str:
    """Everything the Composer was handed (first call), folded for a substring test."""
    if not replay.composer_calls:
        return ""
    ci = composer_input_of(replay.composer_calls[0])
    texts = [ci.original_query, *(c.text for c in ci.allowed_claims),
             *(h.text for h in ci.allowed_hypotheses), *(g.text for g in ci.missing_info),
             *(a.text for a in ci.recommended_actions)]
    return " ".join(" ".join(texts).casefold().split())


# -- the corpus itself ------------------------------------------------------------------------


def test_corpus__sizes_categories_roles_and_scenarios() -> None:
    assert len(ADVERSARIAL) >= 200 and len(FAITHFUL) >= 100
    assert {e.category for e in ADVERSARIAL} == CATEGORIES
    assert all(sum(e.category == c for e in ADVERSARIAL) >= 12 for c in CATEGORIES)
    assert {e.role for e in ADVERSARIAL} == {"composer", "verifier", "executor"}
    assert {e.target for e in ADVERSARIAL} == SCENARIOS
    assert {e.target for e in FAITHFUL} == SCENARIOS
    assert all(e.role == "composer" and e.written_against for e in FAITHFUL)
    # the faithful replies are written against PASS and LOW_CONFID inputs (REJECT never
    # reaches the Composer: routing sends it to the SEMANTIC_UNSUPPORTED fallback)
    low = [e for e in FAITHFUL if e.setup.get("verifier", {}).get("verdict") == "LOW_CONFID"
           or "set_verification" in e.setup.get("verifier", {})]
    assert len(low) >= 25


# -- adversarial: nothing invented is published -----------------------------------------------


KNOWN_LEAKS: dict[str, str] = {}
"""Entries that leak today, each strict: one that stops leaking fails until it is removed here."""


def _adversarial_params() -> list[Any]:
    return [pytest.param(e, id=e.id, marks=[pytest.mark.xfail(strict=True,
                                                              reason=KNOWN_LEAKS[e.id])]
                         if e.id in KNOWN_LEAKS else [])
            for e in ADVERSARIAL]


@pytest.mark.parametrize("entry", _adversarial_params())
def test_adversarial__nothing_invented_is_published(
    replayer: Replayer, entry: Entry, record_property: Callable[[str, object], None]
) -> None:
    leaked: list[str] = []
    for path in PATHS:
        replay = replayed(replayer, entry, path)
        record_property(f"{path}_outcome", "/".join(str(v) for v in replay.outcome))
        record_property(f"{path}_same_as_offline", str(replay.same_as_offline))
        assert replay.status in ("SUCCESS", "FALLBACK"), (path, replay.summary())
        if entry.role == "composer":
            # a well-formed entry: what it invents is not material the Composer was handed
            # (else the answer could publish it legitimately), and a refusal is earned by the
            # inventions, not by the faithful statements around them
            given = _input_texts(replay)
            assert not [s for s in entry.invented if " ".join(s.casefold().split()) in given]
            faithful_refused = [r for r in replay.refusals if r["text"] in FAITHFUL_TEXTS]
            assert not faithful_refused, (path, faithful_refused)
        leaked += [f"{path}: {s!r} in ...{replay.around(s)}..." for s in replay.leaked]
    assert not leaked, "\n".join(leaked)


def test_adversarial__same_outcome_as_the_offline_agents_on_the_same_judgement(
        replayer: Replayer) -> None:
    """Every Verifier and Executor entry ends as the offline Verifier and Composer end on the
    same evidence (a Verifier entry's judgement applied to the offline Verifier's answer too):
    what is blocked does not depend on which agents wrote the rest."""
    differ = []
    compared = 0
    for entry in ADVERSARIAL:
        if entry.role == "composer":
            continue
        for path in PATHS:
            replay = replayed(replayer, entry, path)
            if replay.offline is None:
                continue
            compared += 1
            if not replay.same_as_offline:
                differ.append(f"{path} {entry.id}: {replay.outcome} vs offline {replay.offline}")
    assert compared >= 150, compared
    assert not differ, "\n".join(differ)


# -- faithful: replies that state only what they cite are published ---------------------------


@pytest.mark.parametrize("entry", FAITHFUL, ids=[e.id for e in FAITHFUL])
def test_faithful__reply_is_judged_alike_on_both_paths(
    replayer: Replayer, entry: Entry, record_property: Callable[[str, object], None]
) -> None:
    """Per entry: both paths hand the Composer the same input and judge the reply alike;
    whether it was published is recorded here and counted by the aggregate test below."""
    replays = [replayed(replayer, entry, path) for path in PATHS]
    for replay in replays:
        assert replay.status in ("SUCCESS", "FALLBACK") and replay.composer_calls
        record_property(f"{replay.path}_accepted", str(replay.accepted))
        if not replay.accepted:
            record_property(f"{replay.path}_refused", "; ".join(
                f"{r['text']!r}: {r['reason']}" for r in replay.refusals))
    verify, run = replays
    assert composer_input_of(verify.composer_calls[0]) == composer_input_of(
        run.composer_calls[0])
    assert (verify.accepted, verify.refusals) == (run.accepted, run.refusals)
    assert verify.final_answer == run.final_answer


def test_faithful__at_least_95_percent_are_published_as_written(replayer: Replayer) -> None:
    lines: list[str] = []
    rates: dict[str, float] = {}
    for path in PATHS:
        replays = [replayed(replayer, entry, path) for entry in FAITHFUL]
        refused = [r for r in replays if not r.accepted]
        rates[path] = 1 - len(refused) / len(replays)
        for replay in refused:
            first = replay.refusals[0] if replay.refusals else {"text": "", "reason": "?"}
            stale = " (stale: written against other material)" if replay.stale else ""
            lines.append(f"{path} {replay.entry_id}{stale}: {first['text']!r} -> "
                         f"{first['reason']} [{replay.fallback_type}]")
    print("\n".join([f"faithful published as written: {rates}", *lines]))
    assert all(rate >= FAITHFUL_TARGET for rate in rates.values()), "\n".join(
        [f"published as written: {rates} (target {FAITHFUL_TARGET:.0%})", *lines])


# -- the real CLI, one entry per category -----------------------------------------------------


@pytest.mark.parametrize("entry", SPOT_CHECKS, ids=[e.id for e in SPOT_CHECKS])
def test_cli__verify_and_run_publish_what_the_in_process_replay_publishes(
    replayer: Replayer, entry: Entry
) -> None:
    """`verity verify BUNDLE --json --provider anthropic` and `verity run QUERY --scenario
    NAME --json` (VERITY_PROVIDER=anthropic) in subprocesses, against the same fake server."""
    for path, command in (("verify", replayer.verity_verify), ("run", replayer.verity_run)):
        cli = cli_replay(entry, path, command(entry))
        here = replayed(replayer, entry, path)
        assert (cli.outcome, cli.final_answer, cli.composer_audit) == (
            here.outcome, here.final_answer, here.composer_audit), path
        assert cli.leaked == here.leaked, path


# -- bench/answers.py -------------------------------------------------------------------------


def test_bench_answers__prints_one_json_object_with_the_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "answers.py"), "--per-category", "1",
         "--paths", "verify", "--repeat", "1"],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)  # stdout is one JSON object and nothing else
    assert report["corpus"] == {"adversarial": len(CATEGORIES),
                                "faithful": len({e.category for e in FAITHFUL})}
    adversarial, faithful = report["adversarial"], report["faithful"]
    assert set(adversarial["by_category"]) == CATEGORIES
    assert adversarial["by_path"]["verify"]["entries"] == len(CATEGORIES)
    assert {"accepted", "accepted_pct", "fallbacks"} <= set(faithful["by_path"]["verify"])
    check = report["statement_check"]
    assert check["replies"] >= len(CATEGORIES) and check["warm"]["median_ms"] > 0
    assert report["wall_time_per_entry"]["verify"]["n"] == report["corpus"]["adversarial"] + (
        report["corpus"]["faithful"])
    assert isinstance(report["targets"]["met"], bool)
