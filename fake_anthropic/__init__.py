"""A fake Anthropic Messages API server for tests and benchmarks: real HTTP on 127.0.0.1.

Point the official SDK at it (`anthropic.Anthropic(api_key="test", base_url=fake.base_url,
max_retries=0)`, or `ANTHROPIC_BASE_URL`) and script what "Claude" answers, per role:

- **Roles.** Verity's callers tag every request with the header `x-verity-role`
  (`planner`, `executor`, `verifier`, `composer`, `knowledge`); without it the role is the
  forced tool's name less `submit_`/`_output` (`submit_verifier_output` → `verifier`), else
  `default`.
- **Replies** (`replies`): a FIFO per role of text replies, tool_use replies (ids minted in the
  real shape, `toolu_01` + 22 base62 characters, unique per server) or raw bodies; an empty
  queue asks the default responder, else answers 500 "no scripted reply for role X".
- **Faults** (`faults`): a FIFO per role, consumed one per request before replies: 400, 401,
  403, 404, 429 (with `retry-after`), 500, 529, hang, drop_connection, malformed_json,
  schema_break; `expired` and `canceled` for a request in a Message Batch.
- **Latency**: global and per role, at start or later.
- **Usage** (`tokens`): `estimate_tokens(obj)` = ceil(len(compact JSON)/4); prompt caching on
  `cache_control` breakpoints with the real read/write accounting.
- **Validation** (`validation`): missing model/max_tokens/messages, tool_use/tool_result
  pairing, a missing `x-api-key` (401) — answered as the real API would.
- **Message Batches** (`batches`): create, retrieve, list, results (JSONL at the batch's
  `results_url`), cancel and delete; a batch ends `batch_delay` seconds after creation (0.05 by
  default) and each request in it is answered as a `/v1/messages` call of its role would be. A
  batch request's role is its `custom_id` up to `__` (`verifier__0003`), else the forced tool's.
  Faults `expired`, `canceled` and the status faults shape a request's result; faults queued for
  role `batch` hit the batch endpoints themselves. `fake.batches` records every batch.
- **Control**: `FakeAnthropic` in process (a context manager), the `/_control/...` HTTP API
  (`handler`), `FakeAnthropic.spawn()` or `python -m fake_anthropic` for another process.

This package never imports `anthropic`: it is plain HTTP.
"""

from fake_anthropic.batches import BATCH_ROLE, DEFAULT_BATCH_DELAY, batch_role
from fake_anthropic.faults import FAULT_NAMES, Fault, parse_fault
from fake_anthropic.process import FakeControl, FakeControlError, SpawnedFake
from fake_anthropic.replies import IdMint, ReplyError
from fake_anthropic.responders import Responder, load_responder, minimal_instance, minimal_responder
from fake_anthropic.server import FakeAnthropic
from fake_anthropic.state import DEFAULT_ROLE, ROLE_HEADER, FakeState, role_of
from fake_anthropic.tokens import PromptCache, count_input_tokens, estimate_tokens

__all__ = [
    "BATCH_ROLE",
    "DEFAULT_BATCH_DELAY",
    "DEFAULT_ROLE",
    "FAULT_NAMES",
    "ROLE_HEADER",
    "FakeAnthropic",
    "FakeControl",
    "FakeControlError",
    "FakeState",
    "Fault",
    "IdMint",
    "PromptCache",
    "ReplyError",
    "Responder",
    "SpawnedFake",
    "batch_role",
    "count_input_tokens",
    "estimate_tokens",
    "load_responder",
    "minimal_instance",
    "minimal_responder",
    "parse_fault",
    "role_of",
]
