"""Bounded input: every limit of `load_bundle`, crossed, is one line in a BundleError; the
shipped samples load under the defaults; the crashes of issue 11 are refused, not raised."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from models.gatekeeper import VerifiedClaim
from pipeline.agents.offline_verifier import evidence_gap
from pipeline.config import VeritySettings
from pipeline.errors import BundleError
from pipeline.rules.facts import Fact, FactKind
from pipeline.verification import load_bundle

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "bundles"
PASS: dict[str, Any] = json.loads((SAMPLES / "pass.json").read_text(encoding="utf-8"))


def _nest(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def _with_output(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    bundle = copy.deepcopy(PASS)
    output = json.loads(bundle["executor_output_raw"])
    edit(output)
    bundle["executor_output_raw"] = json.dumps(output)
    return bundle


def _first_binding(output: dict[str, Any]) -> dict[str, Any]:
    binding: dict[str, Any] = output["claims"][0]["evidence_bindings"][0]
    return binding


def _load(bundle: Any, **limits: Any) -> None:
    text = bundle if isinstance(bundle, str) else json.dumps(bundle)
    load_bundle(text, settings=VeritySettings(**limits))


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_shipped_samples_load_under_the_default_limits(sample: Path) -> None:
    load_bundle(sample.read_text(encoding="utf-8"), settings=VeritySettings())


@pytest.mark.parametrize(
    ("bundle", "limits", "message"),
    [
        (PASS, {"bundle_max_bytes": 1000}, "VERITY_BUNDLE_MAX_BYTES"),
        (dict(PASS, run_id=None, retry_context=None), {"bundle_max_depth": 4},
         "VERITY_BUNDLE_MAX_DEPTH"),
        (PASS, {"bundle_max_invocations": 2}, "VERITY_BUNDLE_MAX_INVOCATIONS"),
        (PASS, {"bundle_max_claims": 1}, "VERITY_BUNDLE_MAX_CLAIMS"),
        (PASS, {"bundle_max_bindings": 2}, "VERITY_BUNDLE_MAX_BINDINGS"),
        (PASS, {"query_max_chars": 10}, "VERITY_QUERY_MAX_CHARS"),
        (PASS, {"executor_output_max_bytes": 100}, "VERITY_EXECUTOR_OUTPUT_MAX_BYTES"),
        (PASS, {"executor_text_max_chars": 20}, "VERITY_EXECUTOR_TEXT_MAX_CHARS"),
        (PASS, {"input_projection_max_bytes": 100}, "VERITY_INPUT_PROJECTION_MAX_BYTES"),
        (PASS, {"input_projection_max_depth": 2}, "VERITY_INPUT_PROJECTION_MAX_DEPTH"),
        (PASS, {"path_max_length": 5}, "VERITY_PATH_MAX_LENGTH"),
        (_with_output(lambda o: _first_binding(o).update(path="$.hits[123]")),
         {"path_max_index_digits": 2}, "VERITY_PATH_MAX_INDEX_DIGITS"),
    ],
    ids=["bundle-bytes", "bundle-depth", "invocations", "claims", "bindings", "query-length",
         "executor-output-bytes", "executor-text-length", "projection-bytes",
         "projection-depth", "path-length", "path-index-digits"],
)
def test_each_limit_crossed_is_one_line_bundle_error(
    bundle: Any, limits: dict[str, Any], message: str
) -> None:
    _load(bundle)  # within the defaults
    with pytest.raises(BundleError, match=message) as caught:
        _load(bundle, **limits)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("bundle", "message"),
    [
        ('{"query": "q", "invocations": [], "executor_output_raw": "", "x": '
         + "[" * 5000 + "]" * 5000 + "}", "nests deeper"),
        (dict(PASS, executor_output_raw="[" * 5000 + "]" * 5000), "nests deeper"),
        (_with_output(lambda o: _first_binding(o).update(path="$.hits[" + "9" * 5000 + "]")),
         "longer than"),
        (_with_output(lambda o: _first_binding(o).update(path="$.hits[" + "9" * 100 + "]")),
         "index of more than 16 digits"),
        (dict(PASS, invocations=[dict(PASS["invocations"][0],
                                      projection=dict(PASS["invocations"][0]["projection"],
                                                      deep=_nest(600)))]),
         "nests deeper"),
        (dict(PASS, query="why " * 3_000_000), "larger than"),
        ('{"query": "\\ud800", "invocations": [], "executor_output_raw": ""}', "lone surrogate"),
    ],
    ids=["nesting-5000", "executor-output-nesting-5000", "index-of-5000-digits",
         "index-of-100-digits", "projection-nesting-600", "query-of-12-MB", "lone-surrogate"],
)
def test_issue_11_crashes_are_bundle_errors(bundle: Any, message: str) -> None:
    with pytest.raises(BundleError, match=message):
        _load(bundle)


def test_a_16_digit_index_is_left_to_the_gatekeeper() -> None:
    _load(_with_output(lambda o: _first_binding(o).update(path="$.hits[9007199254740992]")))


def test_output_that_is_not_json_is_left_to_the_parse_step() -> None:
    _load(dict(PASS, executor_output_raw="not json {"))


@pytest.mark.parametrize("kind", list(FactKind), ids=lambda k: k.value)
def test_offline_verifier_gap_suggests_a_tool_for_every_kind_of_fact(kind: FactKind) -> None:
    claim = VerifiedClaim(claim_id="c1", text="t", kind="FINDING", critical=True,
                          status="CONFIRMED")
    gap = evidence_gap(claim, [Fact(kind, "x", "x")])
    assert gap.suggested_tool


def _verified(bundle: dict[str, Any]) -> Any:
    from pipeline.agents.offline_verifier import OfflineVerifier
    from pipeline.agents.template_composer import TemplateComposer
    from pipeline.verification import verify_bundle

    loaded = load_bundle(json.dumps(bundle), settings=VeritySettings())
    return verify_bundle(loaded, verifier=OfflineVerifier(), composer=TemplateComposer()).result


def test_a_claim_naming_a_camel_case_name_absent_from_its_evidence_verifies() -> None:
    """Issue 11's `KeyError: FactKind.NAME`: the missing fact is a name, which had no tool."""
    def edit(output: dict[str, Any]) -> None:
        output["claims"][0]["text"] += " (alert CheckoutPoolSaturated)"

    result = _verified(_with_output(edit))
    assert result.status in ("SUCCESS", "FALLBACK")


def test_an_index_beyond_2_53_fails_the_binding_under_evidence_path() -> None:
    result = _verified(_with_output(
        lambda o: _first_binding(o).update(path="$.hits[9007199254740992]")))
    gatekeeper = result.self_evaluation.verifier_evaluation.gatekeeper_result
    first = gatekeeper.checked_bindings[0]
    assert (first.status, first.rule) == ("fail", "evidence.path")


def test_a_tool_result_nested_past_the_depth_limit_is_cut_and_marked() -> None:
    from models.invocation import QueryScope
    from pipeline.rules.jsonpath import resolve
    from pipeline.rules.projection import bound_projection

    projection = bound_projection({"deep": _nest(900)}, scope=QueryScope(service="s"),
                                  max_items=50, max_bytes=1_000_000)
    document = projection.model_dump(mode="json")  # no "Maximum serialization depth exceeded"
    assert projection.truncated
    assert resolve(document, "$.deep" + "[0]" * 24) == "…"
    assert json.dumps(document).count("[") == 24
