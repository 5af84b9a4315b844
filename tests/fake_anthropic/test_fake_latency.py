"""Latency, global and per role, and concurrency: requests in flight overlap instead of
queueing behind each other."""

from __future__ import annotations

import http.client
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import anthropic

from fake_anthropic import FakeAnthropic
from tests.fake_anthropic.helpers import MODEL, USER, ask


def _timed(client: anthropic.Anthropic, role: str) -> float:
    started = time.monotonic()
    ask(client, role)
    return time.monotonic() - started


def test_latency__per_role_overrides_global(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.set_default_responder(lambda request: "ok")
    fake.set_latency(0.3, role="verifier")
    assert _timed(client, "verifier") >= 0.3
    assert _timed(client, "planner") < 0.2
    fake.set_latency(0.15)
    assert 0.15 <= _timed(client, "planner") < 0.3
    assert _timed(client, "verifier") >= 0.3


def test_latency__set_at_start_and_restored_by_reset() -> None:
    with (
        FakeAnthropic(latency=0.2, role_latency={"composer": 0.0}) as fake,
        anthropic.Anthropic(api_key="t", base_url=fake.base_url, max_retries=0) as client,
    ):
        fake.set_default_responder(lambda request: "ok")
        assert _timed(client, "planner") >= 0.2
        assert _timed(client, "composer") < 0.15
        fake.set_latency(0.0)
        assert _timed(client, "planner") < 0.15
        fake.reset()
        fake.set_default_responder(lambda request: "ok")
        assert _timed(client, "planner") >= 0.2


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def test_latency__50_sdk_requests_with_half_a_second_overlap(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script("executor", [f"reply {n}" for n in range(50)])
    fake.set_latency(0.5)
    intervals: list[tuple[float, float]] = []
    lock = threading.Lock()

    def call(_: int) -> str:
        started = time.monotonic()
        text: str = ask(client, "executor").content[0].text
        with lock:
            intervals.append((started, time.monotonic()))
        return text

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=50) as pool:
        texts = list(pool.map(call, range(50)))
    elapsed = time.monotonic() - started
    assert sorted(texts) == sorted(f"reply {n}" for n in range(50))
    assert elapsed < 3.0, f"50 x 0.5 s took {elapsed:.2f} s: requests serialized"
    assert _max_overlap(intervals) >= 40
    assert all(end - start >= 0.5 for start, end in intervals)


def _raw_call(port: int) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        body = json.dumps({"model": MODEL, "max_tokens": 8, "messages": USER})
        connection.request("POST", "/v1/messages", body, {"x-api-key": "k"})
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_latency__150_connections_in_flight_at_once(fake: FakeAnthropic) -> None:
    fake.set_default_responder(lambda request: "ok")
    fake.set_latency(0.5)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=150) as pool:
        statuses = list(pool.map(_raw_call, [fake.port] * 150))
    elapsed = time.monotonic() - started
    assert statuses == [200] * 150
    assert elapsed < 3.0, f"150 x 0.5 s took {elapsed:.2f} s"
