"""Fuzzing `verity verify` through its CLI entry (issue 11): bundles mutated from the shipped
samples (deletions, type swaps, deep nesting, long strings, bad paths, duplicate ids, broken
Executor output) and raw garbage. Every case exits 0 or 2, prints no traceback and takes under
5 s. Bounded and derandomized, so CI sees the same cases every time."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main

SAMPLES = [json.loads(p.read_text(encoding="utf-8"))
           for p in sorted((Path(__file__).resolve().parents[2] / "samples" / "bundles")
                           .glob("*.json"))]
CASE_LIMIT_S = 5.0
BAD_PATHS = [
    "", "$", "$.", "$..hits", "$[*]", "$.hits[?@.level]", "$.hits[0:1]", "$['a','b']",
    "$.hits[" + "9" * 3000 + "]", "$.hits[9007199254740992]", "$.hits[-0]", "$.hits[01]",
    "$['\\ud800']", "$['\x01']", "$[\"\\'\"]", "$ ['hits'] [ 0 ]", "$.hits[0].message" * 60,
    "$.scope", "$.truncated", "$['hits'][-1]['message']", "hits[0]", "$.\u00e9t\u00e9",
]
FILLERS: list[Any] = [None, 0, -1, 2**63, 1.5e308, "", "x", True, [], {}, [[]], {"": None},
                      "a" * 5000, "0x1f 500 v1.2.3 10.0.0.1:80 " * 200, "[/]", "[bold]x[/x]",
                      "\ud83d\ude00 caf\u00e9", "\x00\x1b[31m",
                      "alert CheckoutPoolSaturated fired"]


_NEST = re.compile(r'"@nest:(\d+)"')


def _dumps(document: Any) -> str:
    """JSON text of a document, each "@nest:<depth>" marker written as arrays nested that deep
    (json.dumps itself cannot write a value deeper than the recursion limit)."""
    return _NEST.sub(lambda m: "[" * int(m[1]) + "0" + "]" * int(m[1]), json.dumps(document))


def _nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a node of a JSON value (the root included), down to 40 levels."""
    found = [path]
    if len(path) >= 40:
        return found
    if isinstance(value, dict):
        for key, child in value.items():
            found += _nodes(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _nodes(child, (*path, index))
    return found


def _replace(document: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = new
    return document


def _delete(document: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return document
    parent = document
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return document


@st.composite
def _mutated_document(draw: st.DrawFn, document: Any) -> Any:
    """A few random deletions, type swaps and deep nestings of a JSON document."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):  # a few mutations, each at a random node
        nodes = _nodes(document)
        where = nodes[draw(st.integers(0, len(nodes) - 1))]
        action = draw(st.sampled_from(["delete", "swap", "nest", "duplicate"]))
        if action == "delete":
            document = _delete(document, where)
        elif action == "swap":
            document = _replace(document, where, copy.deepcopy(draw(st.sampled_from(FILLERS))))
        elif action == "nest":
            depth = draw(st.sampled_from([2, 30, 70, 900, 1100, 5000]))
            document = _replace(document, where, f"@nest:{depth}")
        else:
            parent = document
            for part in where[:-1]:
                parent = parent[part]
            if isinstance(parent, list) and where:
                parent.append(copy.deepcopy(parent[where[-1]]))
    return document


@st.composite
def _mutated_output(draw: st.DrawFn, raw: str) -> str:
    try:
        output = json.loads(raw)
    except ValueError:
        output = {"claims": []}
    choice = draw(st.sampled_from(["paths", "mutate", "truncate", "garbage", "duplicate",
                                   "inflate"]))
    if choice == "paths" and isinstance(output, dict) and output.get("claims"):
        for claim in output["claims"]:
            for binding in claim.get("evidence_bindings", []):
                binding["path"] = draw(st.sampled_from(BAD_PATHS))
    elif choice == "mutate":
        output = draw(_mutated_document(output))
    elif choice == "truncate":
        return raw[: draw(st.integers(0, len(raw)))]
    elif choice == "garbage":
        return draw(st.text(max_size=200))
    elif choice == "inflate" and isinstance(output, dict) and output.get("claims"):
        # Many claims with long, fact-dense texts: near the limits, and over them.
        count = draw(st.sampled_from([40, 120, 2001]))
        words = draw(st.sampled_from([10, 80, 1000]))
        text = " ".join(["pool 0x1f 500 v1.2.3 10.0.0.1:80 41.8% 5000ms"] * words)
        first = output["claims"][0]
        output["claims"] = [dict(first, claim_id=f"f{i}", text=text) for i in range(count)]
    elif isinstance(output, dict) and output.get("claims"):
        output["claims"].append(copy.deepcopy(output["claims"][0]))
    return _dumps(output)


@st.composite
def _bundle_text(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["bundle", "bundle", "bundle", "output", "garbage", "json"]))
    sample = copy.deepcopy(draw(st.sampled_from(SAMPLES)))
    if kind == "garbage":
        return draw(st.text(max_size=300))
    if kind == "json":
        return json.dumps(draw(st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4)
            | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)))
    if kind == "output":
        sample["executor_output_raw"] = draw(_mutated_output(sample["executor_output_raw"]))
        return json.dumps(sample)
    return _dumps(draw(_mutated_document(sample)))


def _verify(text: str, *, as_json: bool) -> tuple[int, str]:
    """Run `verity verify - [--json]` in-process on `text`; the exit code and all output."""
    out, err = io.StringIO(), io.StringIO()
    argv, stdin = sys.argv, sys.stdin
    sys.argv = ["verity", "verify", "-", *(["--json"] if as_json else [])]
    sys.stdin = io.StringIO(text)
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.argv, sys.stdin = argv, stdin
    return (code if isinstance(code, int) else 1), out.getvalue() + err.getvalue()


@pytest.fixture(autouse=True)
def _no_verity_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VERITY_DEBUG", raising=False)
    monkeypatch.setenv("VERITY_HOME", str(tmp_path / "home"))


@settings(max_examples=500, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(text=_bundle_text(), as_json=st.booleans())
def test_verify_exits_0_or_2_without_traceback_within_5_s(text: str, as_json: bool) -> None:
    started = time.perf_counter()
    code, output = _verify(text, as_json=as_json)
    elapsed = time.perf_counter() - started
    assert code in (0, 2), output[-500:]
    assert "Traceback" not in output
    assert elapsed < CASE_LIMIT_S, f"{elapsed:.1f}s"
    if code == 2:
        assert output.startswith("verity: error: ") and output.count("\n") == 1, output[:300]


@pytest.mark.parametrize("sample", range(len(SAMPLES)))
def test_every_shipped_sample_verifies_with_exit_0(sample: int) -> None:
    code, output = _verify(json.dumps(SAMPLES[sample]), as_json=True)
    assert code == 0, output
    json.loads(output)


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_input_over_the_byte_limit_exits_2_before_parsing(
    source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("VERITY_BUNDLE_MAX_BYTES", "100")
    text = json.dumps(SAMPLES[0])
    if source == "stdin":
        code, output = _verify(text, as_json=True)
    else:
        bundle = tmp_path / "bundle.json"
        bundle.write_text(text, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "argv", ["verity", "verify", str(bundle), "--json"])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                pytest.raises(SystemExit) as exited:
            main()
        code, output = int(exited.value.code or 0), out.getvalue() + err.getvalue()
    assert code == 2
    assert output == ("verity: error: bundle is larger than 100 bytes "
                      "(VERITY_BUNDLE_MAX_BYTES)\n")
