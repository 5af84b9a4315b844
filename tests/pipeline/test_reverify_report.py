"""The batch report, from items alone: transitions with null verdicts, rule and claim-class
changes, the worst flips first, errors, tokens and cost; and one stored run re-judged."""

from __future__ import annotations

from models.batch import ClaimChange, ItemDetail, ItemRecord, ItemStatus
from models.verifier import Verification
from pipeline.reverify import build_report

D, R, U = (Verification.DIRECT_OBSERVATION, Verification.REASONABLE_INFERENCE,
           Verification.UNSUPPORTED)


def item(seq: int, old: str | None, new: str | None, *, claims: list[ClaimChange] | None = None,
         rules: tuple[list[str], list[str]] = ([], []), error: str | None = None) -> ItemRecord:
    if error:
        return ItemRecord(batch_id="b", seq=seq, run_id=f"r{seq}", status=ItemStatus.ERROR,
                          error=error)
    return ItemRecord(
        batch_id="b", seq=seq, run_id=f"r{seq}", status=ItemStatus.DONE, old_verdict=old,
        new_verdict=new, detail=ItemDetail(claims=claims or [], old_failed_rules=rules[0],
                                           new_failed_rules=rules[1], prompts=["verifier:v@5"],
                                           rationale=f"why {seq}"),
        input_tokens=100, output_tokens=10, cost_usd=0.5)


def test_report_counts_transitions_changes_and_orders_flips_worst_first() -> None:
    report = build_report([
        item(0, "PASS", "LOW_CONFID", claims=[ClaimChange(claim_id="c1", old=D, new=R)]),
        item(1, "PASS", "REJECT", claims=[ClaimChange(claim_id="c1", old=D, new=U),
                                          ClaimChange(claim_id="c2", old=D, new=D)],
             rules=([], ["evidence.path"])),
        item(2, "LOW_CONFID", "LOW_CONFID"),
        item(3, None, "PASS", rules=(["evidence.matched_text"], [])),
        item(4, None, None, error="the stored run is corrupt: bad JSON"),
    ]).as_json()
    assert (report["items"], report["judged"], report["errors"]) == (5, 4, 1)
    assert report["verdict_labels"] == ["PASS", "LOW_CONFID", "REJECT", "null"]
    assert report["transitions"]["PASS"] == {"PASS": 0, "LOW_CONFID": 1, "REJECT": 1, "null": 0}
    assert report["transitions"]["null"]["PASS"] == 1
    assert report["changed_verdicts"] == 3
    assert [f["run_id"] for f in report["flips"]] == ["r1", "r0", "r3"]  # PASS -> REJECT first
    assert report["flips"][0]["claims"] == [{"claim_id": "c1", "old": "direct_observation",
                                             "new": "unsupported"}]
    assert report["rules"] == {"evidence.matched_text": {"now_passes": 1},
                               "evidence.path": {"now_fails": 1}}
    assert report["claim_class_changes"] == {"direct_observation -> reasonable_inference": 1,
                                             "direct_observation -> unsupported": 1}
    assert report["error_samples"] == [{"run_id": "r4",
                                        "error": "the stored run is corrupt: bad JSON"}]
    assert report["tokens"] == {"input": 400, "output": 40} and report["cost_usd"] == 2.0
    assert report["by_prompts"] == {"verifier:v@5": {"PASS -> LOW_CONFID": 1,
                                                     "PASS -> REJECT": 1,
                                                     "LOW_CONFID -> LOW_CONFID": 1,
                                                     "null -> PASS": 1}}


def test_the_report_keeps_a_bounded_number_of_flips() -> None:
    items = [item(i, "PASS", "LOW_CONFID") for i in range(50)] + [item(50, "PASS", "REJECT")]
    report = build_report(items, max_flips=10).as_json()
    assert report["changed_verdicts"] == 51 and len(report["flips"]) == 10
    assert report["flips"][0]["run_id"] == "r50"
