"""A live monitoring stack on free ports, as a new SRE would find one: the live test service
(tests/live/webservice.py), Debian's Prometheus scraping it every second with real alert
rules, Alertmanager receiving those alerts, and node-exporter when installed.

    with LiveStack.start("job") as stack:
        stack.incident("pool-leak")
        stack.wait_for_alert("HighErrorRate")
        stack.sources_table()        # the [sources.NAME] backends pointing at it

Two label conventions. `"service"`: the service's scrape job is `web` and relabeling adds
`service="checkout"` (Alertmanager's default `service_label`). `"job"`: the scrape job is
`checkout`, series carry only `job` and `instance` (Prometheus's default selector). Either
way node-exporter is scraped as `job="node-exporter"` with no `service` label, as most setups
have it. The alert rules keep every label but the ones they aggregate away, so an alert carries
`job` (and `service` where the series have one):

    HighErrorRate   more than half the requests answered 5xx           for 3s
    HighLatency     p95 of http_request_duration_seconds above 0.3 s   for 3s
    TargetDown      up == 0                                            for 3s

Scrape and evaluation run every second, and the rates look back 10 s, so an incident shows in
alerts within about 15 s. Everything lives in a temporary folder removed when the stack stops;
every process is ended by its own handle.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from tests.sources.prom_harness import HarnessError, Process, free_port

ROOT = Path(__file__).resolve().parents[2]
SERVICE = "checkout"
Convention = Literal["service", "job"]
CONVENTIONS: tuple[Convention, ...] = ("service", "job")
BINARIES = ("prometheus", "prometheus-alertmanager", "prometheus-node-exporter")
READY_TIMEOUT_S = 30.0
RATE_WINDOW = "10s"
RULES: dict[str, Any] = {"groups": [{"name": "live", "interval": "1s", "rules": [
    {"alert": "HighErrorRate",
     "expr": f'sum without (code, method, handler, instance) '
             f'(rate(http_requests_total{{code=~"5.."}}[{RATE_WINDOW}])) '
             f'/ sum without (code, method, handler, instance) '
             f'(rate(http_requests_total[{RATE_WINDOW}])) > 0.5',
     "for": "3s", "labels": {"severity": "critical"},
     "annotations": {"summary": "More than half of the requests fail with 5xx"}},
    {"alert": "HighLatency",
     "expr": f"histogram_quantile(0.95, sum without (handler, instance) "
             f"(rate(http_request_duration_seconds_bucket[{RATE_WINDOW}]))) > 0.3",
     "for": "3s", "labels": {"severity": "warning"},
     "annotations": {"summary": "p95 request latency above 300ms"}},
    {"alert": "TargetDown", "expr": "up == 0", "for": "3s",
     "labels": {"severity": "critical"},
     "annotations": {"summary": "A scrape target is down"}},
]}]}


def missing_binaries() -> list[str]:
    """The binaries the stack needs that are not installed (scripts/ensure_prometheus.sh)."""
    return [name for name in BINARIES if shutil.which(name) is None]


def spawn(name: str, args: list[str], workdir: Path, *, port: int, ready: str,
          cwd: Path | None = None) -> Process:
    """Start `args` (logging into `workdir`), then wait until GET `ready` on its port
    answers 200."""
    log = workdir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=cwd or workdir)
    server = Process(name, process, log, f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise HarnessError(f"{name} exited ({process.returncode}): {server.log_tail()}")
        try:
            if httpx.get(f"{server.url}{ready}", timeout=1.0).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    server.stop()
    raise HarnessError(f"{name} not ready after {READY_TIMEOUT_S:g} s: {server.log_tail()}")


@dataclass
class LiveStack:
    """The running stack of one label convention."""

    convention: Convention
    workdir: Path
    web: Process
    prometheus: Process
    alertmanager: Process
    node_exporter: Process | None
    started: list[Process] = field(default_factory=list)

    @classmethod
    @contextmanager
    def start(cls, convention: Convention) -> Iterator[LiveStack]:
        """Start every server; stop them all and remove the folder after."""
        missing = missing_binaries()
        if missing:
            raise HarnessError(f"not installed: {', '.join(missing)} "
                               "(scripts/ensure_prometheus.sh installs them)")
        workdir = Path(tempfile.mkdtemp(prefix="verity-live-"))
        started: list[Process] = []
        try:
            port = free_port()
            web = spawn("web", [sys.executable, "-m", "tests.live.webservice", "--port",
                                str(port)], workdir, port=port, ready="/control", cwd=ROOT)
            started.append(web)
            node = None
            if shutil.which("prometheus-node-exporter"):
                port = free_port()
                node = spawn("node-exporter", [
                    "prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{port}",
                    "--collector.disable-defaults", "--collector.loadavg",
                    "--collector.meminfo", "--collector.cpu"], workdir, port=port,
                    ready="/metrics")
                started.append(node)
            manager = _start_alertmanager(workdir)
            started.append(manager)
            prometheus = _start_prometheus(workdir, convention, web=web, node=node,
                                           manager=manager)
            started.append(prometheus)
            yield cls(convention, workdir, web, prometheus, manager, node, started)
        finally:
            for server in reversed(started):
                server.stop()
            shutil.rmtree(workdir, ignore_errors=True)

    # -- driving the incident ---------------------------------------------------------------

    def incident(self, name: str) -> None:
        """Start an incident of the service (`pool-leak`, `latency`) or end it (`recover`)."""
        answer = httpx.post(f"{self.web.url}/control/{name}", timeout=5.0)
        if answer.status_code != 200:
            raise HarnessError(f"the test service refused incident {name!r}")

    def stop_node_exporter(self) -> None:
        """Stop node-exporter: its target goes down."""
        if self.node_exporter is None:
            raise HarnessError("node-exporter is not installed")
        self.node_exporter.stop()

    def alerts_now(self) -> list[dict[str, Any]]:
        """Alertmanager's alerts active now (its v2 API)."""
        answer = httpx.get(f"{self.alertmanager.url}/api/v2/alerts", timeout=5.0)
        answer.raise_for_status()
        alerts: list[dict[str, Any]] = answer.json()
        return alerts

    def wait_for_alert(self, name: str, *, firing: bool = True, timeout_s: float = 60.0) -> None:
        """Wait until Alertmanager holds alert `name` (or, `firing=False`, no longer does)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            names = {a["labels"].get("alertname") for a in self.alerts_now()}
            if (name in names) == firing:
                return
            time.sleep(0.5)
        state = "firing" if firing else "resolved"
        raise HarnessError(f"alert {name} not {state} after {timeout_s:g} s")

    def selector(self) -> str:
        """The label matcher of the test service's series under this convention."""
        return f'service="{SERVICE}"' if self.convention == "service" else f'job="{SERVICE}"'

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        params = {"query": promql, **({"time": str(at)} if at is not None else {})}
        answer = httpx.get(f"{self.prometheus.url}/api/v1/query", params=params, timeout=10.0)
        answer.raise_for_status()
        result: list[dict[str, Any]] = answer.json()["data"]["result"]
        return result

    # -- as a Verity source -----------------------------------------------------------------

    def sources_table(self, *, alertmanager: bool = True, step_s: int = 5) -> dict[str, Any]:
        """The backends of a `[sources.NAME]` pointing at the stack. Convention `service`
        selects and names services by the `service` label; `job` keeps every default (a
        `job` selector on Prometheus, a `service` label on Alertmanager), as a new user's
        file would."""
        prometheus: dict[str, Any] = {"url": self.prometheus.url, "step_s": step_s}
        if self.convention == "service":
            prometheus |= {"service_selector": 'service="{service}"', "service_label": "service"}
        table: dict[str, Any] = {"prometheus": prometheus}
        if alertmanager:
            table["alertmanager"] = {"url": self.alertmanager.url}
        return table


def _start_alertmanager(workdir: Path) -> Process:
    folder = workdir / "alertmanager"
    folder.mkdir()
    config = folder / "alertmanager.yml"
    config.write_text(json.dumps({
        "route": {"receiver": "null", "group_wait": "1s", "group_interval": "1s"},
        "receivers": [{"name": "null"}]}), encoding="utf-8")
    port = free_port()
    return spawn("alertmanager", [
        "prometheus-alertmanager", f"--config.file={config}",
        f"--storage.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=", "--log.level=warn"], folder, port=port, ready="/-/ready")


def scrape_configs(convention: Convention, *, web: str, node: str | None) -> list[dict[str, Any]]:
    """The scrape jobs of a convention (see the module docstring); targets host:port."""
    if convention == "service":
        service_job: dict[str, Any] = {
            "job_name": "web", "static_configs": [{"targets": [web]}],
            "relabel_configs": [{"target_label": "service", "replacement": SERVICE}]}
    else:
        service_job = {"job_name": SERVICE, "static_configs": [{"targets": [web]}]}
    jobs = [service_job]
    if node is not None:
        jobs.append({"job_name": "node-exporter", "static_configs": [{"targets": [node]}]})
    return jobs


def _start_prometheus(workdir: Path, convention: Convention, *, web: Process,
                      node: Process | None, manager: Process) -> Process:
    (workdir / "rules.yml").write_text(json.dumps(RULES, indent=1), encoding="utf-8")
    host = web.url.removeprefix("http://")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                   "evaluation_interval": "1s"},
        "rule_files": ["rules.yml"],
        "alerting": {"alertmanagers": [{"static_configs": [
            {"targets": [manager.url.removeprefix("http://")]}]}]},
        "scrape_configs": scrape_configs(
            convention, web=host,
            node=node.url.removeprefix("http://") if node is not None else None),
    }
    (workdir / "prometheus.yml").write_text(json.dumps(config, indent=1), encoding="utf-8")
    port = free_port()
    return spawn("prometheus", [
        "prometheus", f"--config.file={workdir / 'prometheus.yml'}",
        f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
        "--log.level=warn"], workdir, port=port, ready="/-/ready")
