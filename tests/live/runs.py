"""Questions asked of a live stack as a user asks them: `verity run ... --json` in a subprocess
(offline agents, embedded worker, a tmp SQLite), then `verity export` for the claims and the
tool calls behind them.

The incident timeline (`play`) drives one stack through a quiet period, a connection-pool leak
behind 5xx, a latency regression, the recovery (every alert resolved) and a target down, and
asks at each moment the question an on-call engineer would. Each answer is kept as an `Answer`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.live.stack import LiveStack

ROOT = Path(__file__).resolve().parents[2]
QUIET_S = 40.0
"""Traffic before any fault: the baseline the quiet question sees."""


@dataclass(frozen=True)
class Answer:
    """One question's run: the `--json` record, the export bundle, seconds it took."""

    question: str
    run: dict[str, Any]
    bundle: dict[str, Any]
    seconds: float

    @property
    def claims(self) -> list[dict[str, Any]]:
        """The Executor's claims with their evidence bindings."""
        raw: list[dict[str, Any]] = json.loads(self.bundle["executor_output_raw"])["claims"]
        return raw

    @property
    def invocations(self) -> list[dict[str, Any]]:
        calls: list[dict[str, Any]] = self.bundle["invocations"]
        return calls

    @property
    def text(self) -> str:
        """The answer as a user reads it, and every claim's text, lower-cased."""
        parts = [json.dumps(self.run.get("final_answer") or {})]
        parts += [c.get("text", "") for c in self.claims]
        return "\n".join(parts).lower()

    def queries(self) -> list[str]:
        """Every backend request the run recorded, in order."""
        return [q for i in self.invocations
                for q in ((i.get("projection") or {}).get("scope") or {}).get("queries", [])]


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # strings, numbers: JSON is TOML here


def sources_file(path: Path, tables: dict[str, dict[str, Any]]) -> Path:
    """A sources file: one `[sources.NAME]` per entry, each backend an inline table."""
    lines = []
    for name, backends in tables.items():
        lines.append(f"[sources.{name}]")
        lines += [f"{kind} = {_toml(table)}" for kind, table in backends.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


class Asker:
    """Asks questions of the sources in one sources file, offline, in a tmp home."""

    def __init__(self, folder: Path, tables: dict[str, dict[str, Any]]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = sources_file(folder / "config.toml", tables)
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("VERITY_", "ANTHROPIC_"))}
        self.env = {**clean, "VERITY_CONFIG": str(config), "VERITY_PROVIDER": "offline",
                    "VERITY_HOME": str(folder / "home"),
                    "VERITY_DATABASE_URL": f"sqlite:///{folder / 'runs.db'}"}

    def verity(self, *args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                              text=True, env=self.env, cwd=ROOT, timeout=300, check=False)
        if done.returncode != 0:
            raise AssertionError(f"verity {args[0]} failed: {done.stderr[-2000:]}")
        return done.stdout

    def ask(self, question: str, source: str, *where: str) -> Answer:
        started = time.monotonic()
        run = json.loads(self.verity("run", question, "--source", source, *where, "--json"))
        seconds = time.monotonic() - started
        bundle = json.loads(self.verity("export", run["run_id"]))
        return Answer(question, run, bundle, seconds)


QUESTIONS = {
    "quiet": "Is anything wrong with checkout?",
    "pool": "Why is checkout returning 500s?",
    "latency": "Why is checkout slow?",
    "target": "Why is node-exporter down?",
    "after": "Is anything wrong with checkout?",
}
"""The question asked at each moment of the timeline."""


ALERTMANAGER_ONLY = "live-am"
"""The source of the stack's Alertmanager alone (no Prometheus), asked once after recovery."""


def play(stack: LiveStack, ask: Callable[[str, str], Answer]) -> dict[str, Answer]:
    """Drive the stack through the incident timeline, asking at each moment (see QUESTIONS)
    of source `live` (every backend), and after recovery of ALERTMANAGER_ONLY too
    (`after-am`)."""
    answers: dict[str, Answer] = {}
    time.sleep(QUIET_S)
    answers["quiet"] = ask(QUESTIONS["quiet"], "live")
    stack.incident("pool-leak")
    stack.wait_for_alert("HighErrorRate")
    time.sleep(5)
    answers["pool"] = ask(QUESTIONS["pool"], "live")
    stack.incident("recover")
    stack.wait_for_alert("HighErrorRate", firing=False)
    stack.wait_for_alert("HighLatency", firing=False)
    stack.incident("latency")
    stack.wait_for_alert("HighLatency")
    time.sleep(5)
    answers["latency"] = ask(QUESTIONS["latency"], "live")
    stack.incident("recover")
    stack.wait_for_alert("HighLatency", firing=False)
    answers["after"] = ask(QUESTIONS["after"], "live")
    answers["after-am"] = ask(QUESTIONS["after"], ALERTMANAGER_ONLY)
    stack.stop_node_exporter()
    stack.wait_for_alert("TargetDown")
    answers["target"] = ask(QUESTIONS["target"], "live")
    return answers
