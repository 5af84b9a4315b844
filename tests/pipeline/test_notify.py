"""Notifications: the rule that picks runs, the sources file's targets, the Slack text (no
run text becomes a mention or a link), the signed webhook checked by a local receiver, and
how receivers' answers become retries, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from models.bundle import FinalAnswer
from models.common import Intent
from models.delivery import DeliveryStatus
from pipeline.errors import ConfigurationError
from pipeline.notify import deliver, plan_deliveries
from pipeline.notify.messages import slack_escape
from pipeline.notify.sender import backoff, classify, retry_after
from pipeline.rules.notify import notifies
from pipeline.sources.config import load_config
from pipeline.store import RunStore
from tests.receiver import Receiver, Reply, serve, signature_ok
from tests.store.samples import make_result

TENANT = "team-a"
SECRET = "s3cret-for-tests"
INJECTION = "<!channel> see <https://evil.example|here> & @here https://evil.example/x"


@pytest.mark.parametrize(("when", "status", "verdict", "origin", "expected"), [
    pytest.param(["PASS", "LOW_CONFID"], "SUCCESS", "PASS", "run", True, id="pass-listed"),
    pytest.param(["PASS", "LOW_CONFID"], "SUCCESS", "LOW_CONFID", "run", True, id="low-listed"),
    pytest.param(["PASS", "LOW_CONFID"], "SUCCESS", "REJECT", "run", False, id="reject-not"),
    pytest.param(["PASS"], "FALLBACK", "PASS", "run", False, id="fallback-is-no-verdict"),
    pytest.param(["FALLBACK"], "FALLBACK", "REJECT", "run", True, id="fallback-listed"),
    pytest.param(["PASS"], "SUCCESS", None, "run", False, id="no-verdict"),
    pytest.param("alert", "SUCCESS", "PASS", "alert", True, id="alert-started"),
    pytest.param("alert", "SUCCESS", "PASS", "run", False, id="alert-rule-plain-run"),
    pytest.param("always", "FALLBACK", None, "verify", True, id="always"),
])
def test_notify_rule(when: str | list[str], status: str, verdict: str | None, origin: str,
                     expected: bool) -> None:
    assert notifies(when, status=status, verdict=verdict, origin=origin) is expected


def _config(tmp_path: Path, notify: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[tenants."{TENANT}"]\nnotify = [{notify}]\n')
    return path


def test_targets_are_read_from_the_tenant_table(tmp_path: Path) -> None:
    path = _config(tmp_path, '{ type = "slack", url_env = "SLACK_URL", when = ["PASS"] }, '
                   '{ type = "webhook", url = "https://h.example/x", secret_env = "S", '
                   'when = "alert", max_attempts = 3 }')
    targets = load_config(path).tenants[TENANT].notify
    assert [t.type for t in targets] == ["slack", "webhook"]
    planned = plan_deliveries("r1", targets, status="SUCCESS", verdict="PASS", origin="alert")
    assert [(d.kind, d.max_attempts) for d in planned] == [("slack", 8), ("webhook", 3)]
    again = plan_deliveries("r1", targets, status="SUCCESS", verdict="PASS", origin="alert")
    assert [d.delivery_id for d in planned] == [d.delivery_id for d in again]
    assert "SLACK_URL" in json.dumps(planned[0].target)  # the variable's name, never a URL


@pytest.mark.parametrize(("notify", "message"), [
    pytest.param('{ type = "slack", when = ["PASS"] }', "url_env", id="slack-without-url-env"),
    pytest.param('{ type = "slack", url_env = "U", when = ["GOOD"] }', "when",
                 id="unknown-verdict"),
    pytest.param('{ type = "slack", url_env = "U", when = [] }', "when", id="empty-when"),
    pytest.param('{ type = "webhook", url = "ftp://x", secret_env = "S", when = "always" }',
                 "url", id="not-http"),
    pytest.param('{ type = "webhook", url = "https://x", when = "always" }', "secret_env",
                 id="webhook-without-secret"),
    pytest.param('{ type = "webhook", url = "https://x", secret = "inline", secret_env = "S", '
                 'when = "always" }', "secret", id="inline-secret-refused"),
    pytest.param('{ type = "email", when = "always" }', "type", id="unknown-type"),
])
def test_bad_targets_are_one_line_errors(tmp_path: Path, notify: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_config(_config(tmp_path, notify))
    text = str(caught.value)
    assert "\n" not in text and message in text and "notify" in text


def test_slack_escape_makes_run_text_inert() -> None:
    escaped = slack_escape(INJECTION)
    assert "<" not in escaped and ">" not in escaped
    assert "&lt;!channel&gt;" in escaped and " &amp; " in escaped
    assert "@here" not in escaped and "https://" not in escaped


@pytest.mark.parametrize(("status", "headers", "outcome", "wait"), [
    pytest.param(200, {}, "delivered", None, id="ok"),
    pytest.param(204, {}, "delivered", None, id="no-content"),
    pytest.param(500, {}, "retry", None, id="server-error"),
    pytest.param(503, {"retry-after": "7"}, "retry", 7.0, id="unavailable-retry-after"),
    pytest.param(429, {"retry-after": "Thu, 03 Dec 2026 12:00:30 GMT"}, "retry", 30.0,
                 id="too-many-http-date"),
    pytest.param(429, {"retry-after": "99999"}, "retry", 3600.0, id="retry-after-capped"),
    pytest.param(301, {"location": "https://elsewhere.example/"}, "failed", None,
                 id="redirect-not-followed"),
    pytest.param(404, {}, "failed", None, id="not-found-is-final"),
])
def test_receiver_answers(status: int, headers: dict[str, str], outcome: str,
                          wait: float | None) -> None:
    now = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
    result = classify(status, headers, now=now)
    assert (result.outcome, result.retry_after_s) == (outcome, wait)


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff(n, 2.0) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert backoff(40, 2.0) == 600.0
    assert retry_after("soon") is None


def _released(store: RunStore, *targets_toml: str, tmp_path: Path) -> tuple[str, list[str]]:
    """A released run whose summary carries an injection attempt, with its deliveries."""
    targets = load_config(_config(tmp_path, ", ".join(targets_toml))).tenants[TENANT].notify
    run_id = store.create_run(tenant_id=TENANT, query=f"why 500s? {INJECTION}",
                              intent=Intent.DIAGNOSIS)
    result = make_result(run_id)
    result = result.model_copy(update={"final_answer": FinalAnswer(
        answer_summary=f"Upstream timeouts. {INJECTION}", recommended_actions=[],
        user_facing_answer="x")})
    planned = plan_deliveries(run_id, targets, status="SUCCESS", verdict="PASS", origin="run")
    assert store.finalize(run_id, result, deliveries=planned)
    return run_id, [d.delivery_id for d in planned]


def test_slack_and_signed_webhook_reach_a_local_receiver(store: RunStore,
                                                         tmp_path: Path) -> None:
    receiver = Receiver()
    with serve(receiver) as base:
        run_id, (slack_id, hook_id) = _released(
            store, '{ type = "slack", url_env = "SLACK_URL", when = ["PASS"] }',
            f'{{ type = "webhook", url = "{base}/hook", secret_env = "HOOK_SECRET", '
            'when = "always" }', tmp_path=tmp_path)
        env = {"SLACK_URL": f"{base}/slack", "HOOK_SECRET": SECRET}
        for delivery_id in (slack_id, hook_id):
            done = deliver(store, delivery_id, owner="w", lease_s=30,
                           public_url="https://verity.example/", env=env)
            assert done is not None and done.status is DeliveryStatus.DELIVERED
    slack, hook = receiver.delivered[slack_id], receiver.delivered[hook_id]
    assert (slack.path, hook.path) == ("/slack", "/hook")

    text = slack.json()["text"]
    assert "*Verity: PASS*" in text and "Upstream timeouts." in text
    assert "checkout-service returned HTTP 500 after upstream timeouts" in text  # finding
    assert "`search_logs`: HTTP 500 upstream timeout" in text  # its evidence
    assert "no deploy history" in text  # the gap
    assert text.endswith(f"<https://verity.example/#/runs/{run_id}|Open run {run_id}>")
    # the only link and no mention: run text was escaped
    assert text.count("<") == 1 and "<!" not in text and "@here" not in text

    assert signature_ok(SECRET.encode(), hook.headers, hook.body)
    assert not signature_ok(b"another secret", hook.headers, hook.body)
    assert not signature_ok(SECRET.encode(), hook.headers, hook.body + b" ")
    document = hook.json()
    assert (document["delivery_id"], document["run_id"], document["verdict"]) == (
        hook_id, run_id, "PASS")
    assert document["findings"][0]["evidence"] == [
        {"tool": "search_logs", "text": "HTTP 500 upstream timeout"}]
    assert document["gaps"] == ["no deploy history"]
    assert document["url"] == f"https://verity.example/#/runs/{run_id}"
    # a redelivered task posts nothing more
    assert deliver(store, hook_id, owner="w2", lease_s=30, public_url=None, env=env) is None
    assert len(receiver.requests) == 2


def test_without_a_public_url_there_is_no_link(store: RunStore, tmp_path: Path) -> None:
    receiver = Receiver()
    with serve(receiver) as base:
        _, (slack_id,) = _released(
            store, '{ type = "slack", url_env = "SLACK_URL", when = "always" }',
            tmp_path=tmp_path)
        deliver(store, slack_id, owner="w", lease_s=30, public_url=None,
                env={"SLACK_URL": f"{base}/slack"})
    assert "<" not in receiver.delivered[slack_id].json()["text"]


def test_a_missing_secret_fails_the_delivery_in_one_line(store: RunStore,
                                                         tmp_path: Path) -> None:
    _, (hook_id,) = _released(
        store, '{ type = "webhook", url = "http://127.0.0.1:9/h", secret_env = "NOPE", '
        'when = "always" }', tmp_path=tmp_path)
    done = deliver(store, hook_id, owner="w", lease_s=30, public_url=None, env={})
    assert done is not None and done.status is DeliveryStatus.FAILED
    assert done.last_error == "NOPE is not set (the webhook secret)"


def test_a_server_error_then_retry_after_then_success(store: RunStore, tmp_path: Path) -> None:
    receiver = Receiver([Reply(500), Reply(429, {"Retry-After": "0"})])
    with serve(receiver) as base:
        _, (hook_id,) = _released(
            store, f'{{ type = "webhook", url = "{base}/h", secret_env = "S", '
            'when = "always", backoff_s = 0.01 }', tmp_path=tmp_path)
        env = {"S": SECRET}
        statuses = []
        for _ in range(3):
            deadline = time.monotonic() + 5
            done = None
            while done is None and time.monotonic() < deadline:  # until the retry is due
                done = deliver(store, hook_id, owner="w", lease_s=30, public_url=None, env=env)
            assert done is not None
            statuses.append(done.status)
    assert statuses == [DeliveryStatus.PENDING, DeliveryStatus.PENDING,
                        DeliveryStatus.DELIVERED]
    assert [(a.outcome, a.status_code) for a in done.history] == [
        ("retry", 500), ("retry", 429), ("delivered", 200)]
    assert done.history[1].retry_after_s == 0.0
    assert len(receiver.delivered) == 1
