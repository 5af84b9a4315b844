"""The one door to a model: `pipeline.model` stands below the agents and the run machinery, and
retries wrap a model instead of being looked up on it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from pipeline.errors import AttemptsExhaustedError, ProviderUnavailableError
from pipeline.prompts import load_prompt
from pipeline.run.attempts import (
    IMMEDIATE,
    AttemptLog,
    Retrying,
    RetryPolicy,
    call_with_retry,
)
from tests.doubles import Scripted
from tests.providers.helpers import Sleeps

ROOT = Path(__file__).resolve().parents[2]


def _pipeline_imports(relative: str) -> set[str]:
    tree = ast.parse((ROOT / relative).read_text(encoding="utf-8"))
    return {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            and node.module.startswith("pipeline.")}


@pytest.mark.parametrize("module", ["pipeline/model.py", "pipeline/run/attempts.py"])
def test_door__the_door_and_the_attempts_import_nothing_from_the_agents(module: str) -> None:
    imported = _pipeline_imports(module)
    assert imported and not any(m.startswith("pipeline.agents") for m in imported)


def test_door__the_model_imports_no_run_machinery_nor_provider() -> None:
    assert _pipeline_imports("pipeline/model.py") == {"pipeline.prompts"}


def test_door__a_wrapped_model_is_a_model_and_respond_is_one_plain_call() -> None:
    inner = Scripted(model="m").enqueue(ProviderUnavailableError("down"))
    wrapped = Retrying(inner, policy=IMMEDIATE, remote=True)
    assert wrapped.model == "m"
    with pytest.raises(ProviderUnavailableError):  # no retry, no row
        wrapped.respond(load_prompt("verifier"), b"{}")
    assert len(inner.calls) == 1


def test_door__the_wrapper_brings_its_policy_and_a_bare_model_has_none() -> None:
    patient = RetryPolicy(transient_max_retries=3, sleep=Sleeps())
    for model, tries in ((Retrying(Scripted(), policy=patient), 4), (Scripted(), 2)):
        inner = model.inner if isinstance(model, Retrying) else model
        inner.enqueue(*[ProviderUnavailableError("down") for _ in range(4)])
        log = AttemptLog("run-1")
        with pytest.raises(AttemptsExhaustedError):
            call_with_retry(model, role="verifier", payload=b"{}", parse=str, log=log)
        assert len(log.attempts) == tries  # IMMEDIATE for the bare model: one retry
