"""The Claude agents over real HTTP against the fake Messages API server (127.0.0.1).

Each role's request as the server received it (headers, caching marks, tool choice), and each
retry rule with the attempt rows asserted: the fake injects the faults, the SDK maps them, the
runtime's policy retries (with a recording sleep: nothing really waits except a timeout).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from models.agent import ExecutorTurn, Plan, PlanStep, ToolCallRequest, Transcript
from models.common import Intent
from models.verifier import VerifierOutput
from pipeline.agents.claude import ClaudeComposer, ClaudePlanner, ClaudeVerifier
from pipeline.agents.claude_executor import SUBMIT_EVIDENCE, ClaudeExecutor
from pipeline.errors import (
    AttemptsExhaustedError,
    ConfigurationError,
    ProviderRejectedError,
)
from pipeline.prompts import load_prompt
from pipeline.providers.anthropic import AnthropicProvider
from pipeline.rules.executor_output import parse_executor_output
from pipeline.run.attempts import AttemptLog, call_with_retry
from pipeline.tools import default_registry
from tests.providers.helpers import MODEL, Sleeps, log
from tests.spec.helpers import QUERY, good_output, logs_invocation, verifier_reply

PAYLOAD = b'{"claims":[{"claim_id":"c1"}]}'
GOOD = verifier_reply("PASS", {"c1": "direct_observation"})


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(hang_seconds=5.0) as running:
        yield running


@pytest.fixture
def provider(fake: FakeAnthropic) -> Iterator[AnthropicProvider]:
    built = AnthropicProvider(api_key="sk-test", base_url=fake.base_url, timeout_s=0.5,
                              connect_timeout_s=0.5)
    yield built
    built.close()


def tool(name: str, arguments: Any) -> dict[str, Any]:
    """A scripted tool_use reply; `arguments` may be a JSON string."""
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    return {"tool_use": {"name": name, "input": arguments}}


def verify(provider: AnthropicProvider, attempts: AttemptLog, model: str = MODEL
           ) -> VerifierOutput:
    return call_with_retry(ClaudeVerifier(provider, model).retrying(), role="verifier",
                           payload=PAYLOAD, parse=VerifierOutput.model_validate_json, log=attempts)


def outcomes(attempts: AttemptLog) -> list[str]:
    return [a.outcome for a in attempts.attempts]


# -- request shape per role ------------------------------------------------------------------


def test_http__verifier_request_headers_caching_and_usage(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script("verifier", [tool("submit_verification", GOOD)] * 2)
    attempts = log()
    verify(provider, attempts)
    verify(provider, attempts)
    first, second = fake.requests_for("verifier")
    assert first["headers"]["x-verity-role"] == "verifier"
    body = first["body"]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["tool_choice"] == {"type": "auto"} and body["model"] == MODEL
    assert first["body"] == second["body"]
    one, two = attempts.attempts
    assert one.cache_write_tokens > 0 and one.cache_read_tokens == 0
    assert two.cache_read_tokens == one.cache_write_tokens and two.cache_write_tokens == 0
    assert all(a.input_tokens > 0 and a.output_tokens > 0 and a.cost_usd > 0 for a in (one, two))
    assert two.cost_usd < one.cost_usd  # the cached prefix is cheaper to read than to write


def test_http__forced_tool_for_a_model_that_accepts_it(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.script("composer", [tool("submit_answer", {"answer_summary": "a",
                                                    "recommended_actions": [],
                                                    "user_facing_answer": "a"})])
    ClaudeComposer(provider, "claude-haiku-4-5").respond(load_prompt("composer"), b"{}")
    (request,) = fake.requests_for("composer")
    assert request["body"]["tool_choice"] == {"type": "tool", "name": "submit_answer"}
    assert request["headers"]["x-verity-role"] == "composer"


def test_http__planner_over_http(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    plan = Plan(intent=Intent.DIAGNOSIS, service="checkout-service", steps=[
        PlanStep(tool_name="search_logs", arguments={"service": "checkout-service"},
                 reason="errors")])
    fake.script("planner", [tool("submit_plan", plan.model_dump(mode="json"))])
    attempts = log()
    got = ClaudePlanner(provider, MODEL).plan(QUERY, registry=default_registry(), log=attempts)
    assert got == plan
    (request,) = fake.requests_for("planner")
    assert request["headers"]["x-verity-role"] == "planner"
    assert [(a.role, a.outcome) for a in attempts.attempts] == [("planner", "ok")]


def test_http__executor_turns_with_minted_ids_pass_the_pairing_checks(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    args = {"service": "checkout-service", "level": "ERROR"}
    fake.script("executor", [tool("search_logs", args), tool(SUBMIT_EVIDENCE, good_output())])
    registry = default_registry()
    plan = Plan(intent=Intent.DIAGNOSIS, steps=[])
    transcript = Transcript(query=QUERY, plan=plan)
    attempts = log()
    executor = ClaudeExecutor(provider, MODEL)
    step = executor.step(transcript, registry=registry, log=attempts)
    (call,) = step.tool_calls
    assert call.tool_call_id.startswith("toolu_01") and call.arguments == args
    result = logs_invocation().model_copy(update={"tool_call_id": call.tool_call_id})
    transcript = transcript.model_copy(update={"turns": [
        ExecutorTurn(tool_calls=[ToolCallRequest(tool_call_id=call.tool_call_id,
                                                 tool_name=call.tool_name,
                                                 arguments=call.arguments)],
                     results=[result])]})
    final = executor.step(transcript, registry=registry, log=attempts)
    assert final.final_output is not None and parse_executor_output(final.final_output).ok
    first, second = fake.requests_for("executor")
    assert second["body"]["messages"][1]["content"][0]["id"] == call.tool_call_id
    assert second["body"]["messages"][2]["content"][0]["tool_use_id"] == call.tool_call_id
    assert [a.attempt_number for a in attempts.attempts] == [1, 2]


# -- retry rules -----------------------------------------------------------------------------


def test_http__schema_breaking_reply_then_valid_is_the_technical_retry(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fault("verifier", "schema_break")
    fake.script("verifier", [tool("submit_verification", GOOD)])
    attempts = log()
    verify(provider, attempts)
    assert outcomes(attempts) == ["invalid_output", "ok"]
    assert attempts.attempts[0].input_sha256 == attempts.attempts[1].input_sha256
    first, second = fake.requests_for("verifier")
    assert first["body"] == second["body"]  # byte-identical input on the retry


def test_http__malformed_json_is_invalid_output(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fault("verifier", "malformed_json")
    fake.script("verifier", [tool("submit_verification", GOOD)])
    attempts = log()
    verify(provider, attempts)
    assert outcomes(attempts) == ["invalid_output", "ok"]
    assert attempts.attempts[0].error_type == "ProviderOutputInvalidError"


def test_http__429_retry_after_is_honoured(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fault("verifier", 429, retry_after=3)
    fake.script("verifier", [tool("submit_verification", GOOD)])
    sleeps = Sleeps()
    attempts = log(sleeps)
    verify(provider, attempts)
    assert sleeps.waits == [3.0]
    assert outcomes(attempts) == ["unavailable", "ok"]


def test_http__529_and_500_back_off(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.faults("verifier", ["529", "500"])
    fake.script("verifier", [tool("submit_verification", GOOD)])
    sleeps = Sleeps()
    attempts = log(sleeps)
    verify(provider, attempts)
    assert sleeps.waits == [1.0, 2.0]
    assert outcomes(attempts) == ["unavailable", "unavailable", "ok"]
    assert [a.attempt_number for a in attempts.attempts] == [1, 2, 3]


@pytest.mark.parametrize("fault", [{"fault": "hang", "seconds": 2}, "drop_connection"],
                         ids=["hang-past-the-timeout", "dropped-connection"])
def test_http__timeouts_and_dropped_connections_are_transient(
    fake: FakeAnthropic, provider: AnthropicProvider, fault: object
) -> None:
    fake.faults("verifier", [fault])
    fake.script("verifier", [tool("submit_verification", GOOD)])
    attempts = log()
    verify(provider, attempts)
    assert outcomes(attempts) == ["unavailable", "ok"]
    assert attempts.attempts[0].error_type == "ProviderUnavailableError"


def test_http__transient_budget_exhausted(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fault("verifier", 529, times=5)
    sleeps = Sleeps()
    attempts = log(sleeps)
    with pytest.raises(AttemptsExhaustedError):
        verify(provider, attempts)
    assert outcomes(attempts) == ["unavailable"] * 5
    assert len(fake.requests_for("verifier")) == 5 and len(sleeps.waits) == 4


@pytest.mark.parametrize("status", [400, 404])
def test_http__400_and_404_fail_at_once(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int
) -> None:
    fake.fault("verifier", status)
    attempts = log()
    with pytest.raises(ProviderRejectedError):
        verify(provider, attempts)
    assert outcomes(attempts) == ["rejected"]
    assert len(fake.requests_for("verifier")) == 1


@pytest.mark.parametrize(("status", "start"), [(401, "ANTHROPIC_API_KEY was rejected (401)"),
                                                (403, "ANTHROPIC_API_KEY may not use")])
def test_http__rejected_key_is_one_line(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int, start: str
) -> None:
    fake.fault("verifier", status)
    attempts = log()
    with pytest.raises(ConfigurationError) as raised:
        verify(provider, attempts)
    assert str(raised.value).startswith(start) and "\n" not in str(raised.value)
    assert outcomes(attempts) == ["error"]


def test_http__wrong_key_against_a_server_that_checks_it() -> None:
    with FakeAnthropic(required_key="sk-right") as fake:
        wrong = AnthropicProvider(api_key="sk-wrong", base_url=fake.base_url)
        with pytest.raises(ConfigurationError, match=r"rejected \(401\)"):
            verify(wrong, log())
        right = AnthropicProvider(api_key="sk-right", base_url=fake.base_url)
        fake.script("verifier", [tool("submit_verification", GOOD)])
        assert verify(right, log()).verdict == "PASS"
