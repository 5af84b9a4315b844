"""On call, end to end, on the real Debian servers: a metrics endpoint of the test's own serves
a connection-pool gauge at a firing value, `/usr/bin/prometheus` scrapes it every second and
fires a rule (`for: 1s`) to `/usr/bin/prometheus-alertmanager`, whose webhook receiver is
`verity serve`'s `/hooks/alertmanager` (Bearer token from a `credentials_file`). The group
starts one run (origin `alert`, its source the tenant's route pinned at the alert's
`startsAt`), an offline `verity worker` on real PostgreSQL and Redis diagnoses it, and the
answer reaches a local Slack-format receiver and a signed generic receiver, whose signature the
test checks with its own code. Alertmanager's repeat notifications of the same group
(`repeat_interval`) and the same notification posted again start nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any, TypeVar

import httpx
import pytest

from pipeline.data.records import iso
from pipeline.store import open_store
from tests.api.conftest import ROOT, World
from tests.conftest import fresh_schema, own_redis_db
from tests.receiver import Receiver, free_port, serve
from tests.sources.prom_harness import missing_binaries, service_missing

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.prometheus,
              pytest.mark.slow]

TENANT = "team-oncall"
SECRET = "on-call-signing-secret"
PUBLIC_URL = "https://verity.example"
ALERT = "CheckoutPoolExhausted"

CONFIG = """
[sources.prod]
scenario = "checkout-pool-exhaustion"

[sources.staging]
scenario = "inventory-oom-crashloop"

[tenants."@TENANT@"]
notify = [
  { type = "slack", url_env = "SLACK_WEBHOOK_URL", when = "always" },
  { type = "webhook", url = "@WEBHOOK@", secret_env = "HOOK_SECRET", when = "alert" },
]

[tenants."@TENANT@".alerts]
window = "4h"
max_runs_per_hour = 20
default_source = "staging"
routes = [{ match = { cluster = "prod" }, source = "prod" }]
"""
"""The sources file: the alert routing and both notify targets of the tenant (@TENANT@ and
@WEBHOOK@ filled in)."""

RULES = f"""
groups:
  - name: checkout
    interval: 1s
    rules:
      - alert: {ALERT}
        expr: checkout_db_pool_in_use_ratio > 0.9
        for: 1s
        labels: {{cluster: prod, severity: page}}
        annotations: {{summary: "checkout-service database pool above 90% in use"}}
"""

T = TypeVar("T")


def until(probe: Callable[[], T | None], *, what: str, timeout: float,
          logs: list[Path]) -> T:
    """`probe()` once it answers something truthy; AssertionError naming `what` with the
    logs' tails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}"
                              for log in logs if log.exists())
            raise AssertionError(f"no {what} after {timeout:g} s\n{tails}")
        time.sleep(0.2)


@contextmanager
def exporter() -> Iterator[str]:
    """A metrics endpoint: the text exposition of one gauge at a firing value; its address."""
    page = (b"# HELP checkout_db_pool_in_use_ratio Share of the database pool in use.\n"
            b"# TYPE checkout_db_pool_in_use_ratio gauge\n"
            b'checkout_db_pool_in_use_ratio{service="checkout-service"} 0.98\n')

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("content-type", "text/plain; version=0.0.4")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def start_server(argv: list[str], *, folder: Path, name: str,
                 started: list[subprocess.Popen[bytes]]) -> tuple[str, Path]:
    """Start a Prometheus-family server (`--web.listen-address` added, kept in `started`) and
    wait until it is ready; its URL and log."""
    port = free_port()
    log = folder / f"{name}.log"
    with log.open("wb") as out:  # the child keeps its own copy
        process = subprocess.Popen([*argv, f"--web.listen-address=127.0.0.1:{port}"],
                                   stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=folder)
    started.append(process)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert process.poll() is None, log.read_text(errors="replace")[-2000:]
        try:
            return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    until(ready, what=f"{name} ready", timeout=30, logs=[log])
    return url, log


def verified(secret: bytes, headers: dict[str, str], body: bytes) -> bool:
    """The receiver's check, as the README documents it: `v1=` hex HMAC-SHA256 of
    `<X-Verity-Timestamp>.<raw body>` under the secret, the timestamp within 5 minutes."""
    stamp = headers["x-verity-timestamp"]
    mac = "v1=" + hmac.new(secret, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return abs(time.time() - int(stamp)) < 300 \
        and hmac.compare_digest(mac, headers["x-verity-signature"])


def test_an_alert_from_prometheus_is_diagnosed_once_and_announced_once(
        postgres_server_url: str, redis_url: str, tmp_path: Path) -> None:
    if missing_binaries():
        service_missing(", ".join(missing_binaries()), "scripts/ensure_prometheus.sh installs them")
    began = datetime.now(UTC)
    slack, webhook, tap = Receiver(), Receiver(), Receiver()
    with ExitStack() as stack:
        url = stack.enter_context(fresh_schema(postgres_server_url, "verity_oncall"))
        redis_db = stack.enter_context(own_redis_db(redis_url))
        slack_url = stack.enter_context(serve(slack))
        webhook_url = stack.enter_context(serve(webhook))
        tap_url = stack.enter_context(serve(tap))
        target = stack.enter_context(exporter())
        open_store(url).close()

        config = tmp_path / "config.toml"
        config.write_text(CONFIG.replace("@TENANT@", TENANT).replace(
            "@WEBHOOK@", f"{webhook_url}/verity"), encoding="utf-8")
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("VERITY_", "ANTHROPIC_", "OTEL_", "PROMETHEUS_"))}
        api_port = free_port()
        env = {**clean,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           clean.get("PYTHONPATH")])),
               "VERITY_BROKER_URL": redis_db, "VERITY_RESULT_BACKEND": redis_db,
               "VERITY_DATABASE_URL": url, "VERITY_HOME": str(tmp_path / "home"),
               "VERITY_CONFIG": str(config), "VERITY_PROVIDER": "offline",
               "VERITY_PUBLIC_URL": PUBLIC_URL, "SLACK_WEBHOOK_URL": f"{slack_url}/slack",
               "HOOK_SECRET": SECRET}
        world = World(base_url=f"http://127.0.0.1:{api_port}", env=env, database_url=url,
                      fake=None, log_dir=tmp_path)
        stack.callback(world.stop)
        world.start("worker", "worker", "--concurrency", "4", ready=b"ready.")
        world.start("serve", "serve", "--port", str(api_port), ready=b"Verity on http")
        token = world.token(TENANT)
        (tmp_path / "verity-token").write_text(token, encoding="utf-8")

        servers: list[subprocess.Popen[bytes]] = []

        def stop_servers() -> None:
            for process in servers:
                process.terminate()
            for process in servers:
                process.wait(15)
        stack.callback(stop_servers)

        # Alertmanager: Verity as the webhook receiver, and a tap keeping what it sends
        am_config = {
            "route": {"receiver": "verity", "group_by": ["alertname", "cluster"],
                      "group_wait": "1s", "group_interval": "1s", "repeat_interval": "2s"},
            "receivers": [{"name": "verity", "webhook_configs": [
                {"url": f"{world.base_url}/hooks/alertmanager", "send_resolved": True,
                 "max_alerts": 50, "http_config": {"authorization": {
                     "type": "Bearer", "credentials_file": str(tmp_path / "verity-token")}}},
                {"url": f"{tap_url}/tap", "send_resolved": True}]}]}
        (tmp_path / "alertmanager.yml").write_text(json.dumps(am_config), encoding="utf-8")
        am_url, am_log = start_server(
            ["prometheus-alertmanager", f"--config.file={tmp_path / 'alertmanager.yml'}",
             f"--storage.path={tmp_path / 'am-data'}", "--cluster.listen-address=",
             "--log.level=warn"], folder=tmp_path, name="alertmanager",
            started=servers)

        # Prometheus: scrapes the gauge every second, evaluates the rule, alerts Alertmanager
        (tmp_path / "rules.yml").write_text(RULES, encoding="utf-8")
        (tmp_path / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(tmp_path / "rules.yml")],
            "alerting": {"alertmanagers": [{"static_configs": [
                {"targets": [am_url.removeprefix("http://")]}]}]},
            "scrape_configs": [{"job_name": "checkout",
                                "static_configs": [{"targets": [target]}]}]}),
            encoding="utf-8")
        _, prom_log = start_server(
            ["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}"], folder=tmp_path, name="prometheus",
            started=servers)
        logs = [prom_log, am_log, tmp_path / "serve.log", tmp_path / "worker.log"]

        with world.http(token) as http:
            def receipt() -> dict[str, Any] | None:
                found = http.get("/hooks/alertmanager/receipts").json()["receipts"]
                mine = [r for r in found if r["alertname"] == ALERT and r["run_id"]]
                return mine[0] if mine else None

            started = until(receipt, what="run started by the alert", timeout=40, logs=logs)
            run_id = started["run_id"]

            def ended() -> dict[str, Any] | None:
                record: dict[str, Any] = http.get(f"/runs/{run_id}").json()
                done = record["status"] in {"SUCCESS", "FALLBACK", "FAILED", "CANCELLED"}
                return record if done else None

            record = until(ended, what="end of the run", timeout=60, logs=logs)

            def delivered() -> list[Any] | None:
                found: list[Any] = http.get(f"/runs/{run_id}/deliveries").json()["deliveries"]
                final = len(found) == 2 and all(d["status"] in {"DELIVERED", "FAILED"}
                                                for d in found)
                return found if final else None

            deliveries = until(delivered, what="both deliveries ended", timeout=30, logs=logs)

            # Alertmanager repeats the group every repeat_interval: each reaches Verity and is
            # deduplicated onto the receipt, starting nothing
            def repeated() -> dict[str, Any] | None:
                found = receipt()
                return found if found and found["duplicates"] >= 2 else None

            after_repeats = until(repeated, what="two repeat notifications deduplicated",
                                  timeout=30, logs=logs)

            # the exact notification Alertmanager sent, posted again: a retry starts nothing
            sent = [seen for seen in list(tap.requests) if seen.json()["status"] == "firing"]
            assert len(sent) >= 3, [seen.json()["status"] for seen in tap.requests]
            retried = http.post("/hooks/alertmanager", content=sent[0].body,
                                headers={"content-type": "application/json"})
            assert retried.status_code == 200, retried.text
            receipts = http.get("/hooks/alertmanager/receipts").json()["receipts"]
            metrics = http.get("/metrics").text
            final_deliveries = http.get(f"/runs/{run_id}/deliveries").json()["deliveries"]
        runs = world.query("SELECT run_id, data_source FROM diagnosis_run")

    # one alert group, one run, pinned at the alert's startsAt on the routed source
    payload = sent[0].json()
    assert payload["groupKey"] == after_repeats["group_key"]
    assert all(seen.json()["groupKey"] == payload["groupKey"] for seen in sent)
    assert {a["labels"]["alertname"] for a in payload["alerts"]} == {ALERT}
    starts_at = datetime.fromisoformat(payload["alerts"][0]["startsAt"]).astimezone(UTC)
    assert began - timedelta(seconds=5) <= starts_at <= datetime.now(UTC)  # live, not canned
    assert record["data_source"] == f"prod@{iso(starts_at)}"
    assert datetime.fromisoformat(record["alert"]["starts_at"]) == starts_at
    assert record["source"] == "alert"
    assert record["query"].startswith(f"Why is the alert {ALERT} firing? Labels: ")
    assert "cluster=prod" in record["query"].splitlines()[0]
    assert record["status"] == "SUCCESS", record
    verdict = record["verdict"]
    assert verdict
    summary = record["final_answer"]["answer_summary"]
    assert summary

    # repeats and the retry: deduplicated onto the one receipt, still one run
    assert retried.json() == {"outcome": "deduplicated", "receipt_id": started["receipt_id"],
                              "run_id": run_id}
    (only,) = [r for r in receipts if r["alertname"] == ALERT]
    assert only["duplicates"] >= after_repeats["duplicates"] + 1 >= 3
    assert [r["run_id"] for r in receipts] == [run_id]
    assert [tuple(row) for row in runs] == [(run_id, record["data_source"])]
    assert 'verity_webhook_alerts_total{outcome="received"} 1.0' in metrics
    dedup = [line for line in metrics.splitlines()
             if line.startswith('verity_webhook_alerts_total{outcome="deduplicated"}')]
    assert dedup and float(dedup[0].split()[-1]) >= 3

    # each receiver got exactly one message, the webhook's signed
    assert [(d["status"], d["attempts"]) for d in deliveries] == [("DELIVERED", 1)] * 2, \
        json.dumps(deliveries)
    assert final_deliveries == deliveries
    link = f"{PUBLIC_URL}/#/runs/{run_id}"
    (message,) = slack.requests
    assert message.path == "/slack"
    text = message.json()["text"]
    assert f"*Verity: {verdict}*" in text
    escaped = summary.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert f"*Summary:* {escaped[:120]}" in text
    assert f"<{link}|Open run {run_id}>" in text
    (post,) = webhook.requests
    assert post.path == "/verity"
    assert verified(SECRET.encode(), post.headers, post.body)
    assert not verified(b"another-secret", post.headers, post.body)
    assert not verified(SECRET.encode(), post.headers, post.body + b" ")
    body = post.json()
    assert post.headers["idempotency-key"] == body["delivery_id"]
    assert (body["run_id"], body["tenant_id"], body["status"], body["verdict"],
            body["summary"], body["url"]) == (run_id, TENANT, "SUCCESS", verdict, summary, link)
