"""Hypothesis strategies: realistic incident texts full of concrete facts.

Texts are built from tokens an SRE would write (services, counts with units, times, versions,
error codes, pod ids) so fact extraction, the guards and the leak filters see real material.
`distinct_texts` adds a unique tag to each text so no generated text contains another.
"""

from __future__ import annotations

from hypothesis import strategies as st

WORDS = ("pool", "exhausted", "connection", "latency", "rose", "dropped", "errors", "timeouts",
         "after", "during", "the", "deploy", "rollback", "queue", "backlog", "restarted",
         "saturated", "throttled", "spike", "baseline", "peak", "retries", "upstream", "logged",
         "evicted", "keys", "requests", "failed", "because", "slow", "disk", "memory")
SERVICES = ("checkout-service", "payment-db", "redis-cache", "api-gateway", "orders-worker",
            "inventory-service", "auth-api", "search-cluster")
UNITS = ("ms", "s", "%", " errors", " pods", " requests", "MiB", " GB", " rps", " minutes")
ERROR_CODES = ("ECONNREFUSED", "ECONNRESET", "OOMKilled", "CrashLoopBackOff", "CONNECTION_RESET",
               "NullPointerException", "SQLSTATE 40001")

services = st.sampled_from(SERVICES)
words = st.sampled_from(WORDS)
quantities = st.builds(
    lambda n, frac, unit: f"{n}{'.' + str(frac) if frac is not None else ''}{unit}",
    st.integers(10, 9999), st.one_of(st.none(), st.integers(1, 9)), st.sampled_from(UNITS),
)
times = st.builds(lambda h, m: f"{h:02d}:{m:02d}", st.integers(0, 23), st.integers(0, 59))
timestamps = st.builds(lambda d, h, m: f"2026-11-{d:02d}T{h:02d}:{m:02d}:00Z",
                       st.integers(1, 30), st.integers(0, 23), st.integers(0, 59))
versions = st.builds(lambda a, b, c: f"v{a}.{b}.{c}", st.integers(0, 9), st.integers(0, 20),
                     st.integers(0, 30))
http_codes = st.builds(lambda code: f"HTTP {code}", st.sampled_from((500, 502, 503, 504, 429)))
error_codes = st.sampled_from(ERROR_CODES)
pod_ids = st.builds(lambda s, h: f"{s.split('-')[0]}-{h:04x}-x{h % 7}",
                    services, st.integers(4096, 65535))
tokens = st.one_of(words, words, words, services, quantities, times, timestamps, versions,
                   http_codes, error_codes, pod_ids)

incident_texts = st.lists(tokens, min_size=3, max_size=12).map(" ".join)
"""One sentence of incident prose with a mix of concrete facts."""


def tagged(text: str, tag: int) -> str:
    """Make a text unique: a trailing tag no other text can contain."""
    return f"{text} (note {tag}q{tag}z)"


def distinct_texts(n_min: int, n_max: int) -> st.SearchStrategy[list[str]]:
    """Several incident texts, none a substring of another."""
    return st.lists(incident_texts, min_size=n_min, max_size=n_max).map(
        lambda texts: [tagged(t, 100 + i) for i, t in enumerate(texts)]
    )
