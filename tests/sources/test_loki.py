"""The Loki connector against the replay Loki serving the shipped scenarios: the same lines as
filtering the scenario folder, totals, the LogQL it ran, paging past the server's cap, the
faults, and bounded memory on a query matching 1,000,000 lines."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from pipeline.data.records import LEVEL_RANK, LogEntry
from pipeline.data.source import LogQuery
from pipeline.errors import SourceError
from pipeline.scenarios import load_scenario, scenario_path
from pipeline.sources.config import BearerAuth, LokiBackend
from pipeline.sources.loki import Loki, build_logql, level_regex, regex_literal
from tests.sources.replay import LokiFlood, LokiReplay, flood_process, free_port

SCENARIOS = ["checkout-pool-exhaustion", "inventory-oom-crashloop",
             "orders-latency-payment-gateway"]
TOKEN_ENV = "VERITY_TEST_LOKI_TOKEN"
TOKEN = "loki-s3cret-7f3a9c"


def _folder_matches(name: str, q: LogQuery) -> list[LogEntry]:
    entries = load_scenario(scenario_path(name)).log_entries(q.service)
    rank = LEVEL_RANK[q.min_level] if q.min_level else 0
    return [e for e in entries if q.start <= e.at <= q.end and e.rank >= rank
            and all(t in e.lowered for t in q.terms)]


def _key(e: LogEntry) -> tuple[object, ...]:
    return (e.at, e.ts, e.service, e.level, e.message, e.pod, e.trace_id)


def _assert_same(got: Sequence[LogEntry], matches: list[LogEntry], limit: int) -> None:
    """`got` is the first `limit` matches in time order; among the lines sharing the cut-off
    second, any of them may be the ones returned."""
    assert [e.at for e in got] == sorted(e.at for e in got)
    expected = matches[:limit]
    assert len(got) == len(expected)
    if not expected:
        return
    cut = expected[-1].at
    before = sorted(_key(e) for e in got if e.at < cut)
    assert before == sorted(_key(e) for e in matches if e.at < cut)
    at_cut = [_key(e) for e in matches if e.at == cut]
    assert all(_key(e) in at_cut for e in got if e.at == cut)


def _cases(name: str) -> Iterator[tuple[str, LogQuery]]:
    scenario = load_scenario(scenario_path(name))
    now, service = scenario.now, scenario.meta.service
    day = now.replace(hour=0, minute=0, second=0)
    errors = [e for e in scenario.log_entries(service) if e.rank >= LEVEL_RANK["WARN"]]
    words = [w for w in errors[len(errors) // 2].lowered.split() if len(w) >= 4]
    special = next((w for w in words if not w.isalnum()), words[0])
    yield "service-2h", LogQuery(start=now - timedelta(hours=2), end=now, service=service)
    yield "service-errors-day", LogQuery(start=day, end=now, service=service, min_level="ERROR")
    yield "all-warn-1h", LogQuery(start=now - timedelta(hours=1), end=now, min_level="WARN")
    yield "terms", LogQuery(start=day, end=now, service=service, terms=(words[0],))
    yield "term-regex-chars", LogQuery(start=day, end=now, terms=(special, words[-1]),
                                       min_level="WARN")
    yield "limit-cut", LogQuery(start=day, end=now, limit=37)
    yield "window-edges", LogQuery(start=errors[0].at, end=errors[-1].at, service=service,
                                   min_level="WARN")
    yield "no-match", LogQuery(start=day, end=now, service=service, terms=("zzqx-nothing",))


CASES = [(name, case_id) for name in SCENARIOS for case_id, _ in _cases(name)]


@pytest.fixture(params=[False, True], ids=["label-levels", "json-lines"])
def json_lines(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.mark.parametrize(("name", "case_id"), CASES, ids=[f"{n}-{c}" for n, c in CASES])
def test_search_logs__matches_the_folder(name: str, case_id: str, json_lines: bool) -> None:
    q = dict(_cases(name))[case_id]
    with LokiReplay(scenario_path(name), max_entries=100, json_lines=json_lines) as replay:
        with Loki("t", LokiBackend(url=replay.url, json_lines=json_lines,
                                   max_entries_per_query=100)) as loki:
            fetched = loki.search_logs(q)
    matches = _folder_matches(name, q)
    _assert_same(fetched.items, matches, q.limit)
    assert fetched.total == len(matches)
    assert fetched.truncated == (len(matches) > q.limit)
    logql = build_logql(loki.config, q)
    sent = [parse_qs(urlsplit(text).query) for text in fetched.queries]
    assert all(s["query"] == [logql] for s in sent[:-1])
    assert sent[-1]["query"][0].startswith(f"sum(count_over_time({logql} [")
    assert len(replay.requests) == len(fetched.queries)
    assert fetched.fetched_bytes > 0


def test_paging__crosses_the_server_cap_without_gaps_or_repeats() -> None:
    name = "checkout-pool-exhaustion"
    scenario = load_scenario(scenario_path(name))
    q = LogQuery(start=scenario.now - timedelta(hours=6), end=scenario.now, limit=5000)
    with LokiReplay(scenario_path(name), max_entries=100) as replay:
        with Loki("t", LokiBackend(url=replay.url, max_entries_per_query=100)) as loki:
            fetched = loki.search_logs(q)
    matches = _folder_matches(name, q)
    assert len(matches) > 5000
    _assert_same(fetched.items, matches, 5000)
    assert len({_key(e) for e in fetched.items}) == 5000  # nothing read twice at a boundary
    pages = [r for r in replay.requests if r.path.endswith("query_range")]
    assert len(pages) >= 50 and all(int(p.params["limit"]) <= 100 for p in pages)
    # each page starts at the previous page's last timestamp (logcli's way)
    assert len({p.params["start"] for p in pages}) == len(pages)
    assert fetched.total == len(matches) and fetched.truncated


def test_paging__over_the_cap_is_loki_s_own_400() -> None:
    name = "checkout-pool-exhaustion"
    now = load_scenario(scenario_path(name)).now
    with LokiReplay(scenario_path(name), max_entries=100) as replay:
        with Loki("t", LokiBackend(url=replay.url)) as loki, \
                pytest.raises(SourceError) as caught:  # it asks for 5000 a page
            loki.search_logs(LogQuery(start=now - timedelta(hours=1), end=now))
    assert str(caught.value) == ("t/loki answered HTTP 400: max entries limit per query "
                                 "exceeded, limit > max_entries_limit_per_query (5000 > 100)")


def test_replay__rejects_logql_it_does_not_understand() -> None:
    with LokiReplay(scenario_path(SCENARIOS[0])) as replay:
        answer = httpx.get(f"{replay.url}/loki/api/v1/query_range", params={
            "query": '{app="x"} | logfmt', "start": "0", "end": "1", "limit": "10"})
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.text.startswith("parse error at line 1, col")


@pytest.mark.parametrize(("level", "matches", "rejects"), [
    ("WARN", ["warn", "WARNING", "Error", "err", "fatal", "CRITICAL"], ["info", "debug"]),
    ("ERROR", ["error", "ERR", "fatal"], ["warn", "warning", "info"]),
    ("DEBUG", ["trace", "debug", "info", "fatal"], ["notice"]),
])
def test_level_regex__levels_at_or_above_in_any_spelling(
        level: str, matches: list[str], rejects: list[str]) -> None:
    import re
    pattern = re.compile(level_regex(level))
    assert all(pattern.fullmatch(m) for m in matches)
    assert not any(pattern.fullmatch(r) for r in rejects)


def test_build_logql__escapes_terms_and_rejects_injection() -> None:
    config = LokiBackend(url="http://loki")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    q = LogQuery(start=now, end=now, service="checkout", terms=('a"b\\c', "(max 20)."),
                 min_level="ERROR")
    assert build_logql(config, q) == (
        '{app="checkout", level=~"(?i)(error|err|fatal|critical)"} '
        '|~ "(?i)a\\"b\\\\\\\\c" |~ "(?i)\\\\(max 20\\\\)\\\\."')
    assert regex_literal("a.b*c") == "a\\.b\\*c"
    json_config = LokiBackend(url="http://loki", json_lines=True)
    assert build_logql(json_config, q).endswith(
        '| json | level=~"(?i)(error|err|fatal|critical)"')
    for bad in ['x"} or {app=~".+', "a b", "{svc}", ""]:
        with pytest.raises(SourceError, match="not a plain name"):
            build_logql(config, LogQuery(start=now, end=now, service=bad))


def test_check__version_and_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    auth = BearerAuth(type="bearer", token_env=TOKEN_ENV)
    with LokiReplay(scenario_path(SCENARIOS[0]), token=TOKEN) as replay:
        with Loki("t", LokiBackend(url=replay.url, auth=auth)) as loki:
            good = loki.check()
            replay.token = "another"
            refused = loki.check()
    assert (good.reachable, good.auth_ok, good.version) == (True, True, LokiReplay.version)
    assert (refused.reachable, refused.auth_ok) == (True, False)
    with Loki("t", LokiBackend(url=f"http://127.0.0.1:{free_port()}")) as loki:
        down = loki.check()
    assert (down.reachable, down.auth_ok) == (False, None)


FAULTS = ["unreachable", "401", "500", "timeout", "big", "malformed"]
REASONS = {
    "unreachable": "t/loki unreachable: ",
    "401": "t/loki refused the credentials (HTTP 401)",
    "500": "t/loki answered HTTP 500: rpc error: code = Internal desc = failed to get chunks",
    "timeout": "t/loki timed out after 0.5 s",
    "big": "t/loki answered more than 1048576 bytes (the bound)",
    "malformed": "t/loki answered something that is not its documented format: the body is "
                 "not valid JSON",
}


@pytest.mark.parametrize("fault", FAULTS)
def test_faults__one_line_reason_without_the_credential(
        fault: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    scenario = load_scenario(scenario_path(SCENARIOS[0]))
    q = LogQuery(start=scenario.now - timedelta(hours=1), end=scenario.now)
    with LokiReplay(scenario_path(SCENARIOS[0]), token=TOKEN) as replay:
        replay.fault = fault if fault not in ("unreachable", "401") else None
        replay.delay_s = 2.0
        if fault == "401":
            replay.token = "the-server-wants-another"
        url = f"http://127.0.0.1:{free_port()}" if fault == "unreachable" else replay.url
        loki = Loki("t", LokiBackend(url=url, timeout_s=0.5, max_bytes=1024 * 1024,
                                     auth=BearerAuth(type="bearer", token_env=TOKEN_ENV)))
        with pytest.raises(SourceError) as caught:
            loki.search_logs(q)
        loki.close()
    message = str(caught.value)
    assert message.startswith(REASONS[fault])
    assert "\n" not in message and len(message) <= 220
    assert TOKEN not in message


def test_memory__a_million_matching_lines_stay_bounded() -> None:
    """The replay streams all 1,000,000 matching lines whatever `limit` says; the connector
    reads 5,000, hangs up, and holds a few MiB (measured: about 3.3 MiB traced peak, against
    an 80 MB answer)."""
    lines = 1_000_000
    with flood_process(lines) as url:
        loki = Loki("t", LokiBackend(url=url, timeout_s=60))
        start = datetime.fromtimestamp(LokiFlood.start_ns / 1e9, UTC)
        q = LogQuery(start=start, end=start + timedelta(milliseconds=lines), service="flood",
                     min_level="ERROR", terms=("timeout",), limit=5000)
        tracemalloc.start()
        try:
            fetched = loki.search_logs(q)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            loki.close()
        sent = httpx.get(f"{url}/replay/stats").json()["lines_sent"]
    assert len(fetched.items) == 5000 and fetched.total == lines and fetched.truncated
    assert [e.at for e in fetched.items] == sorted(e.at for e in fetched.items)
    assert fetched.items[0].message == "request r-0000000 failed: upstream timeout after 3 s"
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert sent < lines // 10  # it stopped reading: the server could not send the rest
    assert fetched.fetched_bytes < 4 * 2**20


def test_bench__prints_one_json_object() -> None:
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "bench" / "sources_loki.py"),
                           "--lines", "20000", "--limit", "500"],
                          capture_output=True, text=True, cwd=root, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["returned"], report["total"], report["truncated"]) == (500, 20000, True)
    assert 0 < report["peak_traced_mib"] < 16
    assert 500 <= report["lines_sent_by_server"] <= 20000
