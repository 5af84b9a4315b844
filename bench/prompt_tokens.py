"""Prompt-size benchmark: tokens the Verifier and the Composer are sent, against a naive prompt.

For every shipped DIAGNOSIS scenario (or those named): the investigation runs offline in this
process (`run_in_process`), then `verify_bundle` runs the Claude Verifier and Composer — built
by `claude_agents` over a recording provider that answers as Claude would (the `claude_like`
responders) — so the requests counted are the ones the agents themselves build and send. The
naive request of each role is built by the same agent (`answer_request`: same system prompt,
same answer tool, same framing) with a user message carrying the query, the raw Executor output
and the complete tool trace (every stored invocation, projection included).

Every count is the fake server's `count_input_tokens` (its usage reporting). Prints one JSON
object on stdout, progress on stderr.

    python bench/prompt_tokens.py [--scenarios NAME[,NAME...]] [--no-sdk-check]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fake_anthropic import FakeAnthropic, count_input_tokens, estimate_tokens  # noqa: E402
from models.bundle import RunBundle  # noqa: E402
from models.common import Intent  # noqa: E402
from pipeline.agents.claude import ClaudeSingleTurn, dumps, frame_data  # noqa: E402
from pipeline.agents.offline_verifier import OfflineVerifier  # noqa: E402
from pipeline.agents.template_composer import TemplateComposer  # noqa: E402
from pipeline.config import VeritySettings  # noqa: E402
from pipeline.factory import claude_agents  # noqa: E402
from pipeline.inprocess import run_in_process  # noqa: E402
from pipeline.prompts import load_prompt  # noqa: E402
from pipeline.providers.messages import (  # noqa: E402
    MessagesRequest,
    MessagesResponse,
    Usage,
    tool_use_response,
)
from pipeline.run.attempts import Retrying  # noqa: E402
from pipeline.scenarios import list_scenarios, load_scenario, scenario_path  # noqa: E402
from pipeline.sources.scenario import ScenarioSource  # noqa: E402
from pipeline.verification import verify_bundle  # noqa: E402
from tests.providers import claude_like  # noqa: E402

TARGET = 0.25
ROLES = ("verifier", "composer")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class RecordingProvider:
    """A `MessagesProvider` that records every request and answers as Claude would."""

    requests: list[MessagesRequest] = field(default_factory=list)

    def send(self, request: MessagesRequest) -> MessagesResponse:
        self.requests.append(request)
        body = request.body()
        answer = getattr(claude_like, request.role)(body)["tool_use"]
        usage = Usage(input_tokens=count_input_tokens(body), output_tokens=1)
        return tool_use_response(answer["name"], answer["input"], usage=usage)


def main() -> None:
    args = _arguments()
    names = _scenario_names(args.scenarios)
    settings = VeritySettings(provider="anthropic", anthropic_api_key="bench-key")
    rows: dict[str, Any] = {}
    checked: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        log(f"{name}: investigating and verifying")
        row, bodies = _scenario(name, settings)
        rows[name] = row
        checked += [(f"{name}:{label}", body) for label, body in bodies.items()]
        log(f"{name}: ratio {row['ratio']}")
    ratios = [row["ratio"] for row in rows.values()]
    report = {
        "benchmark": "prompt_tokens",
        "python": sys.version.split()[0],
        "estimator": {
            "name": "fake_anthropic.count_input_tokens",
            "rule": "per segment (each tool definition, each system block, each message content "
                    "block) ceil(len(compact sorted-key JSON) / 4), summed; the figure the fake "
                    "server reports as usage, cache reads and writes included",
            "anthropic_sdk_count_tokens": _sdk_check(checked) if args.sdk_check else {
                "checked": False, "reason": "--no-sdk-check"},
        },
        "models": {role: settings.model_for(role) for role in ROLES},
        "naive_request": "the agent's own answer_request: the role's system prompt and answer "
                         "tool, the user message framing as data (<{role}_input>) a compact JSON "
                         "object {query, executor_output (the raw output, parsed), tool_trace "
                         "(every invocation as stored: arguments, statuses, full projection)}",
        "ratio_formula": "(verifier_tokens + composer_tokens) / "
                         "(naive_verifier_tokens + naive_composer_tokens)",
        "scenarios": rows,
        "max_ratio": max(ratios),
        "mean_ratio": round(statistics.fmean(ratios), 4),
        "target_max_ratio": TARGET,
        "meets_target": all(r <= TARGET for r in ratios),
    }
    print(json.dumps(report, indent=2))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", action="append", default=[],
                        help="scenario names, comma-separated or repeated (default: every "
                             "DIAGNOSIS scenario)")
    parser.add_argument("--no-sdk-check", dest="sdk_check", action="store_false",
                        help="skip counting the requests again with the anthropic SDK's "
                             "count_tokens against an in-process fake server")
    return parser.parse_args()


def _scenario_names(given: list[str]) -> list[str]:
    diagnosis = [i.name for i in list_scenarios() if i.intent is Intent.DIAGNOSIS]
    names = [n.strip() for item in given for n in item.split(",") if n.strip()]
    unknown = [n for n in names if n not in diagnosis]
    if unknown:
        raise SystemExit(f"not a DIAGNOSIS scenario: {', '.join(unknown)} "
                         f"(known: {', '.join(diagnosis)})")
    return names or diagnosis


def _scenario(name: str, settings: VeritySettings) -> tuple[dict[str, Any], dict[str, Any]]:
    """One scenario's row, and every request body counted in it (for the SDK check)."""
    from pipeline.tools import default_registry

    scenario = load_scenario(scenario_path(name))
    loop = run_in_process(scenario.meta.question, source=ScenarioSource(scenario),
                          registry=default_registry(),
                          known_services=scenario.services)
    bundle = RunBundle(query=scenario.meta.question, intent=loop.plan.intent,
                       invocations=loop.invocations, executor_output_raw=loop.final_output)
    recorder = RecordingProvider()
    agents = claude_agents(settings, provider=recorder)
    claude = verify_bundle(bundle, verifier=agents.verifier, composer=agents.composer).result
    offline = verify_bundle(bundle, verifier=OfflineVerifier(), composer=TemplateComposer()).result
    sent = {role: [r for r in recorder.requests if r.role == role] for role in ROLES}
    agent_of = {"verifier": agents.verifier, "composer": agents.composer}
    naive_content = dumps({
        "query": bundle.query,
        "executor_output": json.loads(bundle.executor_output_raw),
        "tool_trace": [i.model_dump(mode="json") for i in bundle.invocations],
    })
    row: dict[str, Any] = {
        "status": claude.status, "verdict": claude.verdict, "fallback_type": claude.fallback_type,
        "same_outcome_as_offline_agents": (claude.status, claude.verdict, claude.fallback_type)
        == (offline.status, offline.verdict, offline.fallback_type),
        "tool_invocations": len(bundle.invocations),
    }
    bodies: dict[str, Any] = {}
    for role in ROLES:
        if not sent[role]:
            raise SystemExit(f"{name}: no {role} request was sent ({claude.status}, "
                             f"{claude.fallback_type}): the ratio would be meaningless")
        wrapped = agent_of[role]
        assert isinstance(wrapped, Retrying) and isinstance(wrapped.inner, ClaudeSingleTurn)
        agent = wrapped.inner
        real = sent[role][0].body()
        naive = _naive_request(agent, role, naive_content).body()
        bodies[role], bodies[f"naive_{role}"] = real, naive
        row[f"{role}_tokens"] = count_input_tokens(real)
        row[f"naive_{role}_tokens"] = count_input_tokens(naive)
        row[f"{role}_payload_tokens"] = _payload_tokens(real)
        row[f"naive_{role}_payload_tokens"] = _payload_tokens(naive)
        row[f"{role}_requests_sent"] = len(sent[role])
        row[f"{role}_payload_blocks"] = _blocks(sent[role][0])
    row["static_prefix_tokens"] = {
        role: row[f"{role}_tokens"] - row[f"{role}_payload_tokens"] for role in ROLES}
    row["ratio"] = round((row["verifier_tokens"] + row["composer_tokens"])
                         / (row["naive_verifier_tokens"] + row["naive_composer_tokens"]), 4)
    row["static_prefix_floor_ratio"] = round(
        sum(row["static_prefix_tokens"].values())
        / (row["naive_verifier_tokens"] + row["naive_composer_tokens"]), 4)
    row["payload_ratio"] = round(
        (row["verifier_payload_tokens"] + row["composer_payload_tokens"])
        / (row["naive_verifier_payload_tokens"] + row["naive_composer_payload_tokens"]), 4)
    return row, bodies


def _naive_request(agent: ClaudeSingleTurn, role: str, content: str) -> MessagesRequest:
    """What a design without the verified-only payload would send to `role`."""
    tag = f"{role}_input"
    text = frame_data(tag, content, what=f"Your input ({tag})")
    return agent.answer_request(role, system=load_prompt(role).text,
                                content=[{"type": "text", "text": text}])


def _blocks(request: MessagesRequest) -> dict[str, int]:
    """estimate_tokens of each top-level block of the serialized payload the agent framed."""
    tag = f"{request.role}_input"
    text = claude_like.framed(request.messages[0]["content"][0]["text"], tag) or "{}"
    payload = json.loads(text.replace("<\\/", "</"))
    return {key: estimate_tokens(value) for key, value in payload.items()}


def _payload_tokens(body: dict[str, Any]) -> int:
    """The tokens of the messages alone (what varies per run; tools and system are cached)."""
    return count_input_tokens({"messages": body["messages"]})


def _sdk_check(bodies: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Count every request again through the anthropic SDK's `messages.count_tokens`, sent to
    an in-process fake server on 127.0.0.1 (the real endpoint is a network call)."""
    import anthropic

    reason = ("the SDK's messages.count_tokens is an API call (POST /v1/messages/count_tokens) "
              "and this benchmark makes no network call beyond 127.0.0.1, so Anthropic's own "
              "tokenizer is not used; the SDK call was sent to the fake server instead, which "
              "answers with the same estimator")
    mismatches = []
    with FakeAnthropic() as fake:
        client = anthropic.Anthropic(api_key="bench-key", base_url=fake.base_url, max_retries=0)
        try:
            for label, body in bodies:
                params = {k: v for k, v in body.items() if k != "max_tokens"}
                counted = client.messages.count_tokens(**params).input_tokens
                if counted != count_input_tokens(body):
                    mismatches.append(label)
        finally:
            client.close()
    return {"used_on_the_real_api": False, "reason": reason,
            "sdk_calls_to_the_fake": len(bodies), "agree_with_the_estimator": not mismatches,
            "mismatches": mismatches}


if __name__ == "__main__":
    main()
