"""The page in headless Chromium against real workers: ask a question and watch the nodes
appear while the run is still going, click a claim and see the excerpt its binding points
at, open a batch report, see another agent's checked answer as written with its claims marked,
and data shown as text, never as markup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from models.common import Intent
from models.delivery import NewDelivery
from pipeline.store import open_store
from tests.api.conftest import World, wait_for_run
from tests.store.samples import make_result
from tests.web.conftest import CHECK_QUESTION, StoredCheck, save_screenshot

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

SOURCE = "scenario:checkout-pool-exhaustion"
QUESTION = "Why is checkout-service returning 500s?"
VERIFIER_HOLD_S = 2.0


def _wait_run(world: World, secret: str, run_id: str) -> dict[str, Any]:
    with world.http(secret) as http:
        return wait_for_run(http, run_id)


def _create_run(world: World, secret: str, question: str = QUESTION) -> str:
    with world.http(secret) as http:
        created = http.post("/runs", json={"question": question, "source": SOURCE})
    assert created.status_code == 202, created.text
    return str(created.json()["run_id"])


def test_ask_watch_the_nodes_live_and_click_a_claim_for_its_evidence(
        world: World, page: Any, tmp_path: Path) -> None:
    secret = world.token()
    world.fake.set_latency(VERIFIER_HOLD_S, "verifier")
    try:
        page.goto(f"{world.base_url}/#token={secret}")
        page.wait_for_selector(f'#source option[value="{SOURCE}"]', state="attached")
        page.select_option("#source", SOURCE)
        page.fill("#question", QUESTION)
        page.click("#ask")
        # the Verifier is held: gatekeep is on the page while the run has not ended
        page.wait_for_selector('#nodes li[data-node="gatekeep"]')
        assert page.locator('#nodes li[data-node="finalize"]').count() == 0
        assert page.locator("#claims").count() == 0
        page.wait_for_selector('#nodes li[data-node="finalize"]', timeout=60_000)
    finally:
        world.fake.set_latency(0.0, "verifier")
    page.wait_for_selector("#claims .claim")
    run_id = page.url.rsplit("/", 1)[-1]
    record = _wait_run(world, secret, run_id)
    assert record["status"] == "SUCCESS", record["status"]
    shown = page.locator("#nodes > li.node").evaluate_all("items => items.map(i => i.dataset.node)")
    assert shown[:2] == ["submit", "plan"] and shown[-1] == "finalize", shown

    evaluation = record["self_evaluation"]["verifier_evaluation"]
    evidence = evaluation["verified_evidence"][0]
    check = next(c for c in evaluation["claim_checks"] if c["claim_id"] == evidence["claim_id"])
    claim = page.locator(f'#claims .claim[data-claim="{evidence["claim_id"]}"]')
    assert claim.locator(".badge").get_attribute("data-value") == check["verification"]
    claim.click()
    assert claim.get_attribute("aria-selected") == "true"
    panel = page.locator("#evidence")
    marks = panel.locator(".excerpt mark").all_text_contents()
    assert evidence["matched_text"] in marks, (marks, evidence["matched_text"])
    text = panel.text_content() or ""
    scope = evidence["scope"]
    for expected in (evidence["tool_name"], evidence["invocation_id"], evidence["path"],
                     scope["service"], scope["filter"]):
        assert expected and expected in text, expected
    assert page.locator("#answer .summary").text_content() == (
        record["final_answer"]["answer_summary"])
    assert page.locator("#gatekeeper").count() == 1 and page.locator("#gaps").count() == 1
    shot = save_screenshot(page, tmp_path, "run-view.png")
    assert shot.stat().st_size > 10_000


def test_a_batch_report_shows_the_verdict_transition_matrix(world: World, page: Any) -> None:
    secret = world.token()
    run_id = _create_run(world, secret)
    old = _wait_run(world, secret, run_id)["verdict"]
    page.goto(f"{world.base_url}/#token={secret}")
    page.goto(f"{world.base_url}/#/batches")
    page.click("#reverify")
    page.wait_for_selector('#batch .badge[data-value="COMPLETED"]', timeout=60_000)
    batch_id = page.url.rsplit("/", 1)[-1]
    with world.http(secret) as http:
        report = http.get(f"/batches/{batch_id}/report").json()
    assert report["judged"] == 1 and report["batch"]["status"] == "COMPLETED"
    cells = page.locator("#matrix td").evaluate_all(
        "cells => cells.map(c => [c.dataset.from, c.dataset.to, Number(c.textContent)])")
    shown = {(frm, to): n for frm, to, n in cells}
    expected = {(frm, to): n for frm, row in report["transitions"].items()
                for to, n in row.items()}
    assert shown == expected and sum(shown.values()) == 1
    assert any(frm == old and n == 1 for (frm, _), n in shown.items())


def test_data_is_shown_as_text_never_as_markup(world: World, page: Any) -> None:
    secret = world.token()
    hostile = '<img src=x onerror="window.pwned=1">Why is checkout-service failing?'
    run_id = _create_run(world, secret, hostile)
    page.goto(f"{world.base_url}/#token={secret}")
    page.wait_for_selector(f'#runs tr[data-run="{run_id}"]')
    page.goto(f"{world.base_url}/#/runs/{run_id}")
    page.wait_for_selector('#nodes li[data-node="finalize"]', timeout=60_000)
    assert page.locator("#run-question").text_content() == hostile
    assert page.locator("#view img").count() == 0
    assert page.evaluate("window.pwned") is None


def test_a_checked_answer_shows_as_written_each_claim_marked_beside_its_evidence(
        world: World, page: Any, stored_check: StoredCheck, tmp_path: Path) -> None:
    report = stored_check.report
    page.goto(f"{world.base_url}/#token={stored_check.secret}")
    row = page.locator(f'#runs tr[data-run="{stored_check.run_id}"]')
    row.wait_for()
    assert row.locator(".origin").text_content() == "imported"
    row.locator("a").click()
    page.wait_for_selector("#checked-answer .claim-span")
    assert page.locator("#run-question").text_content() == CHECK_QUESTION
    assert page.locator("#run-origin .origin").count() == 1
    assert page.locator("#nodes").count() == 0 and page.locator("#claims").count() == 0
    # the verdict and the counts at the top
    assert page.locator("#check .badge.verdict").get_attribute("data-value") == report["verdict"]
    counts = page.locator("#check-counts li").evaluate_all(
        "items => items.map(i => [i.dataset.verification, Number(i.dataset.count)])")
    assert dict(counts) == {"direct_observation": 1, "contradicted": 1, "unsupported": 1,
                            "action": 1}, counts
    assert page.locator("#check-summary").text_content() == report["summary"]

    # the answer as written, each claim's span marked by its verification (the spans count
    # code points: the answer's emoji is one, where JavaScript strings count two)
    assert report["answer"].startswith("\N{RIGHT-POINTING MAGNIFYING GLASS}")
    answer = page.locator("#checked-answer")
    assert answer.text_content() == report["answer"]
    expected = {"direct_observation": "v-direct_observation", "contradicted": "v-contradicted",
                "unsupported": "v-unsupported"}
    for claim in report["claims"]:
        start, end = claim["span"]
        mark = answer.locator(f'.claim-span[data-claim="{claim["claim_id"]}"]')
        assert mark.text_content() == report["answer"][start:end] == claim["text"]
        classes = (mark.get_attribute("class") or "").split()
        wanted = "v-action" if claim["action"] else expected[claim["verification"]]
        assert wanted in classes, (claim["claim_id"], classes)
        assert ("critical" in classes) is claim["critical"], (claim["claim_id"], classes)
    assert answer.locator(".claim-span").count() == len(report["claims"])

    # selecting the contradicted sentence shows its judgement and bindings beside it
    contradicted = stored_check.claim("contradicted")
    mark = answer.locator(f'.claim-span[data-claim="{contradicted["claim_id"]}"]')
    mark.click()
    assert mark.get_attribute("aria-pressed") == "true"
    panel = page.locator("#check-evidence")
    assert panel.locator("#check-verification").get_attribute(
        "data-verification") == "contradicted"
    assert panel.locator("#check-note").text_content() == f"Why: {contradicted['note']}"
    assert panel.locator(".binding-path").all_text_contents() == [
        b["path"] for b in contradicted["bindings"]]
    assert "$.result.deployments[0].change" in panel.locator(".binding-path").all_text_contents()
    text = panel.text_content() or ""
    for binding in contradicted["bindings"]:
        for value in (binding["tool_name"], binding["tool_call_id"], binding["matched_text"]):
            assert value in text, value
    shot = save_screenshot(page, tmp_path, "check-view.png")
    assert shot.stat().st_size > 10_000

    # the keyboard reaches the next sentence: focusing it selects it
    page.keyboard.press("Tab")
    unsupported = stored_check.claim("unsupported")
    following = answer.locator(f'.claim-span[data-claim="{unsupported["claim_id"]}"]')
    assert following.evaluate("node => node === document.activeElement")
    assert following.get_attribute("aria-pressed") == "true"
    assert mark.get_attribute("aria-pressed") == "false"
    assert panel.locator("#check-note").text_content() == f"Why: {unsupported['note']}"
    assert panel.locator(".binding").count() == 0

    # the recommended action: counted apart, its own judgement shown when selected
    action = stored_check.claim("unsupported", action=True)
    answer.locator(f'.claim-span[data-claim="{action["claim_id"]}"]').click()
    assert panel.locator("#check-verification").get_attribute("data-verification") == "action"
    assert panel.locator("#check-action-verification").get_attribute(
        "data-verification") == "unsupported"
    assert panel.locator("#check-note").text_content() == f"Why: {action['note']}"


def test_a_checked_answer_is_shown_as_text_never_as_markup(
        world: World, page: Any, stored_check: StoredCheck) -> None:
    report = stored_check.report
    assert "<b>x</b>" in report["answer"]
    page.goto(f"{world.base_url}/#token={stored_check.secret}")
    page.goto(f"{world.base_url}/#/runs/{stored_check.run_id}")
    page.wait_for_selector("#checked-answer .claim-span")
    unsupported = stored_check.claim("unsupported")
    mark = page.locator(f'#checked-answer .claim-span[data-claim="{unsupported["claim_id"]}"]')
    assert "<b>x</b>" in (mark.text_content() or "")
    assert page.locator("#view b").count() == 0
    mark.focus()
    assert page.locator("#check-evidence .claim-text").text_content() == unsupported["text"]
    assert page.locator("#view b").count() == 0


def test_without_a_valid_token_the_page_says_so_in_one_line(world: World, page: Any) -> None:
    page.goto(world.base_url)
    page.wait_for_selector("#notice:not([hidden])")
    assert "API token" in (page.text_content("#notice") or "")
    page.fill("#token", "vrt_not-a-token")
    page.click("#token-form button")
    page.wait_for_function(
        "() => document.getElementById('notice').textContent.includes('invalid or revoked')")


def test_the_policy_refuses_an_injected_inline_script(world: World, browser: Any) -> None:
    # not the `page` fixture: the violation this provokes would fail its teardown
    context = browser.new_context()
    try:
        opened = context.new_page()
        seen: list[str] = []
        opened.on("console", lambda message: seen.append(message.text))
        opened.goto(world.base_url)
        ran = opened.evaluate("""() => {
            const script = document.createElement('script');
            script.textContent = 'window.injected = true';
            document.head.appendChild(script);
            return window.injected === true;
        }""")
        opened.wait_for_timeout(200)
    finally:
        context.close()
    assert ran is False
    assert any("Content Security Policy" in text for text in seen), seen


def test_the_run_page_shows_where_the_answer_went(world: World, page: Any) -> None:
    secret = world.token("paged")
    with open_store(world.database_url) as store:
        run_id = store.create_run(tenant_id="paged", query="why?", intent=Intent.DIAGNOSIS)
        target = {"type": "webhook", "url": "http://127.0.0.1:9/hook", "when": "always",
                  "secret_env": "S"}
        store.finalize(run_id, make_result(run_id), deliveries=[NewDelivery(
            delivery_id="e" * 32, kind="webhook", target=target, max_attempts=1)])
        assert store.claim_delivery("e" * 32, owner="w", lease_s=30) is not None
        store.end_delivery_attempt("e" * 32, 1, owner="w", outcome="failed", status_code=404,
                                   error='HTTP 404 <img src=x onerror="window.pwned=1">')
    page.goto(f"{world.base_url}/#token={secret}")
    page.goto(f"{world.base_url}/#/runs/{run_id}")
    delivery = page.locator(f'#deliveries li[data-delivery="{"e" * 32}"]')
    delivery.wait_for(timeout=30_000)
    text = delivery.text_content() or ""
    assert "webhook http://127.0.0.1:9/hook" in text and "1/1 attempts" in text
    assert delivery.locator('.badge[data-value="FAILED"]').count() == 1
    assert delivery.locator('li[data-outcome="failed"]').text_content().startswith(
        "failed (HTTP 404) — HTTP 404 <img")
    assert page.locator("#view img").count() == 0 and page.evaluate("window.pwned") is None
