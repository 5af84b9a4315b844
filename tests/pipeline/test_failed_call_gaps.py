"""A gap may say why a call failed in the words its tool answered, whoever wrote the gap
(issue 23, item 5): the verify node gives the failed calls' errors to the gap check as part of
what the run holds. The Executor output here is written as a model would write it (not by the
offline investigator): one gap restates a failure's reason, one smuggles a cause into a gap
beside that reason, one names a backend error no call answered; only the first is published."""

from __future__ import annotations

import json

from models.bundle import RunBundle
from models.invocation import EvidenceStatus, LifecycleStatus, ToolInvocation
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.inprocess import run_in_process
from pipeline.scenarios import load_scenario, scenario_path
from pipeline.sources.scenario import ScenarioSource
from pipeline.tools import default_registry
from pipeline.verification import verify_bundle

QUESTION = "Why is checkout-service returning 500s?"
REASON = "SourceError: prod has no logs backend (configure [sources.prod.loki])"
SAID = ("The search_logs call for payment-db failed (prod has no logs backend): its evidence "
        "is missing.")
CAUSAL = ("The search_logs call for payment-db failed (prod has no logs backend), so the "
          "payment-db outage caused the errors.")
INVENTED = ("The query_metrics call for payment-db failed (prometheus returned HTTP 503): its "
            "evidence is missing.")


def test_a_gap_restating_a_failed_call_is_published_and_nothing_beside_it() -> None:
    scenario = load_scenario(scenario_path("checkout-pool-exhaustion"))
    loop = run_in_process(QUESTION, source=ScenarioSource(scenario), registry=default_registry(),
                          known_services=scenario.services)
    failed = ToolInvocation(tool_call_id="toolu_01FAILEDLOGSxxxxxxxxxxxxx", tool_name="search_logs",
                            arguments={"service": "payment-db", "level": "WARN"},
                            status=LifecycleStatus.ERROR, evidence_status=EvidenceStatus.ERROR,
                            error=REASON)
    output = json.loads(loop.final_output)
    output["missing_info"] = [SAID, CAUSAL, INVENTED, *output["missing_info"]]
    bundle = RunBundle(query=QUESTION, intent=loop.plan.intent,
                       invocations=[*loop.invocations, failed],
                       executor_output_raw=json.dumps(output))
    answer = verify_bundle(bundle, verifier=OfflineVerifier(),
                           composer=TemplateComposer()).result.final_answer
    assert answer is not None
    text = answer.user_facing_answer
    assert SAID in text
    assert "caused the errors" not in text and "HTTP 503" not in text
