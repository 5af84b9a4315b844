"""Real Prometheus and Alertmanager servers holding shipped scenarios' data.

    with PromStack.start(["checkout-pool-exhaustion"]) as stack:
        stack.prometheus_config()        # a PrometheusBackend pointing at the server
        stack.alertmanager_config(name)  # the Alertmanager of that scenario

One Prometheus holds every scenario's metrics (they lie on different days): each `metrics.csv`
becomes OpenMetrics text (`metric{service="..."} value ts`), plus an
`ALERTS{alertname,alertstate="firing",service,severity}` sample each minute while each alert of
`alerts.json` fires (through its `ends_at`, or through the scenario's `now` when still firing),
backfilled with `promtool tsdb create-blocks-from openmetrics`. Backfilled data has no
staleness markers, so a series would seem to go on for Prometheus's 5-minute lookback after
its last sample; the harness writes a NaN sample one step after each series' last sample (and
after each resolved alert), as a scrape or rule evaluation that stops would leave a stale
marker, and the client drops NaN points. A rules file declares every scenario alert as a rule
that never fires, with its summary annotation, so `/api/v1/rules` answers summaries.

Each scenario gets its own Alertmanager (clustering off), to which its alerts are POSTed. An
alert still firing is posted with `endsAt` a day past both the wall clock and the scenario's
`now` (Prometheus itself always sends a future `endsAt` and resends it), otherwise
Alertmanager would drop it at its resolve timeout, or refuse it when the scenario lies in the
future (`endsAt` before `startsAt`). A resolved alert is posted with its real `ends_at`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from pipeline.data.records import Alert, iso
from pipeline.scenarios import Scenario, load_scenario, scenario_path
from pipeline.sources.config import AlertmanagerBackend, PrometheusBackend

SCENARIOS = ("checkout-pool-exhaustion", "inventory-oom-crashloop",
             "orders-latency-payment-gateway")
BINARIES = {"prometheus": "prometheus", "promtool": "promtool",
            "alertmanager": "prometheus-alertmanager"}
STEP_S = 60
READY_TIMEOUT_S = 30.0


class HarnessError(RuntimeError):
    """A server could not be prepared or did not come up."""


def missing_binaries() -> list[str]:
    """The server binaries not on PATH."""
    return [name for name in BINARIES.values() if shutil.which(name) is None]


def free_port() -> int:
    """A port nothing listens on right now (bound to 0, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _seconds(moment: datetime) -> int:
    return int(moment.timestamp())


def _labels(pairs: dict[str, str]) -> str:
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in sorted(pairs.items())) + "}"


def alert_minutes(alert: Alert, now: datetime) -> list[datetime]:
    """The minutes at which `alert` fires: from its start through its end (or `now`)."""
    last = alert.ends_at if alert.ends_at is not None else now
    first = datetime.fromtimestamp(math.ceil(alert.starts_at.timestamp() / STEP_S) * STEP_S, UTC)
    count = max(0, int((last - first).total_seconds() // STEP_S) + 1)
    return [first + timedelta(seconds=STEP_S * i) for i in range(count)]


def openmetrics(scenarios: Sequence[Scenario]) -> str:
    """The scenarios' metrics and ALERTS history as one OpenMetrics text."""
    families: dict[str, list[str]] = {}
    for scenario in scenarios:
        for series in scenario.series:
            lines = families.setdefault(series.metric, [])
            labels = _labels({"service": series.service})
            lines += [f"{series.metric}{labels} {value!r} {_seconds(at)}"
                      for at, value in zip(series.times, series.values, strict=True)]
            if series.times:
                lines.append(f"{series.metric}{labels} NaN {_seconds(series.times[-1]) + STEP_S}")
        for alert in scenario.alert_list:
            labels = _labels({"alertname": alert.name, "alertstate": "firing",
                              "service": alert.service, "severity": alert.severity})
            minutes = alert_minutes(alert, scenario.now)
            lines = families.setdefault("ALERTS", [])
            lines += [f"ALERTS{labels} 1 {_seconds(at)}" for at in minutes]
            if alert.ends_at is not None and minutes:
                lines.append(f"ALERTS{labels} NaN {_seconds(minutes[-1]) + STEP_S}")
    out = []
    for name, lines in sorted(families.items()):
        out.append(f"# TYPE {name} gauge")
        out += lines
    out.append("# EOF")
    return "\n".join(out) + "\n"


def rules_yaml(scenarios: Sequence[Scenario]) -> str:
    """One never-firing alerting rule per scenario alert, carrying its summary (JSON is YAML)."""
    rules = [{"alert": alert.name, "expr": "vector(0) > 1",
              "labels": {"severity": alert.severity},
              "annotations": {"summary": alert.summary}}
             for scenario in scenarios for alert in scenario.alert_list]
    return json.dumps({"groups": [{"name": "scenarios", "rules": rules}]}, indent=1)


@dataclass
class Process:
    """One server of a test stack: its process, log and base URL."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _spawn(name: str, args: list[str], workdir: Path, url: str) -> Process:
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=workdir)
    return Process(name, process, log, url)


def _wait_ready(server: Process) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise HarnessError(f"{server.name} exited ({server.process.returncode}): "
                               f"{server.log_tail()}")
        try:
            if httpx.get(f"{server.url}/-/ready", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise HarnessError(f"{server.name} not ready after {READY_TIMEOUT_S:g} s: "
                       f"{server.log_tail()}")


def post_alerts(url: str, scenario: Scenario, wall: datetime) -> None:
    """POST the scenario's alerts to an Alertmanager (see the module docstring for endsAt)."""
    far = max(wall, scenario.now) + timedelta(days=1)
    body = [{"labels": {"alertname": a.name, "service": a.service, "severity": a.severity},
             "annotations": {"summary": a.summary},
             "startsAt": iso(a.starts_at),
             "endsAt": iso(a.ends_at if a.ends_at is not None else far)}
            for a in scenario.alert_list]
    response = httpx.post(f"{url}/api/v2/alerts", json=body, timeout=10.0)
    if response.status_code != 200:
        raise HarnessError(f"alertmanager refused the alerts: {response.status_code} "
                           f"{response.text[:300]}")


@dataclass
class PromStack:
    """One Prometheus with every scenario's data, one Alertmanager per scenario."""

    workdir: Path
    scenarios: dict[str, Scenario]
    prometheus: Process
    alertmanagers: dict[str, Process] = field(default_factory=dict)

    @classmethod
    @contextmanager
    def start(cls, names: Sequence[str] = SCENARIOS) -> Iterator[PromStack]:
        """Backfill, start and fill the servers; stop them and remove their data after."""
        missing = missing_binaries()
        if missing:
            raise HarnessError(f"not installed: {', '.join(missing)} "
                               "(scripts/ensure_prometheus.sh installs them)")
        workdir = Path(tempfile.mkdtemp(prefix="verity-prom-"))
        started: list[Process] = []
        try:
            scenarios = {name: load_scenario(scenario_path(name)) for name in names}
            prometheus = _start_prometheus(workdir, list(scenarios.values()))
            started.append(prometheus)
            stack = cls(workdir, scenarios, prometheus)
            wall = datetime.now(UTC)
            for name, scenario in scenarios.items():
                manager = _start_alertmanager(workdir / f"am-{name}", name)
                started.append(manager)
                stack.alertmanagers[name] = manager
                post_alerts(manager.url, scenario, wall)
            yield stack
        finally:
            for server in reversed(started):
                server.stop()
            shutil.rmtree(workdir, ignore_errors=True)

    def prometheus_config(self, **overrides: Any) -> PrometheusBackend:
        """A backend config for the Prometheus: `service` label, the scenarios' units."""
        units = {s.metric: s.unit for scenario in self.scenarios.values()
                 for s in scenario.series}
        fields: dict[str, Any] = {"url": self.prometheus.url, "service_label": "service",
                                  "service_selector": 'service="{service}"', "step_s": STEP_S,
                                  "units": units, **overrides}
        return PrometheusBackend.model_validate(fields)

    def alertmanager_config(self, name: str, **overrides: Any) -> AlertmanagerBackend:
        """A backend config for the Alertmanager holding scenario `name`'s alerts."""
        return AlertmanagerBackend.model_validate(
            {"url": self.alertmanagers[name].url, **overrides})


def _start_prometheus(workdir: Path, scenarios: Sequence[Scenario]) -> Process:
    data = workdir / "tsdb"
    source = workdir / "scenarios.om"
    source.write_text(openmetrics(scenarios), encoding="utf-8")
    done = subprocess.run(
        [BINARIES["promtool"], "tsdb", "create-blocks-from", "openmetrics", str(source),
         str(data)], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise HarnessError(f"promtool failed: {(done.stderr or done.stdout)[-800:]}")
    (workdir / "rules.yml").write_text(rules_yaml(scenarios), encoding="utf-8")
    (workdir / "prometheus.yml").write_text(
        json.dumps({"global": {"evaluation_interval": "1m"}, "rule_files": ["rules.yml"]}),
        encoding="utf-8")
    port = free_port()
    server = _spawn("prometheus", [
        BINARIES["prometheus"], f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ], workdir, f"http://127.0.0.1:{port}")
    _wait_ready(server)
    return server


def _start_alertmanager(workdir: Path, name: str) -> Process:
    workdir.mkdir(parents=True)
    config = workdir / "alertmanager.yml"
    config.write_text(json.dumps({"route": {"receiver": "null"},
                                  "receivers": [{"name": "null"}]}), encoding="utf-8")
    port = free_port()
    server = _spawn(f"alertmanager-{name}", [
        BINARIES["alertmanager"], f"--config.file={config}",
        f"--storage.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=", "--log.level=warn",
    ], workdir, f"http://127.0.0.1:{port}")
    _wait_ready(server)
    return server


def service_missing(name: str, reason: str) -> None:
    """Skip, or fail under CI (as tests/conftest.py does for PostgreSQL and Redis)."""
    import pytest

    message = f"{name} not available: {reason}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)
