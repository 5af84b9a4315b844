"""Message Batches in the fake: create, retrieve, list, results, cancel and delete, free of HTTP.

Endpoints (`handler` routes them here through `FakeState.handle_batch`):

| method and path | answer |
|---|---|
| `POST /v1/messages/batches` `{"requests": [{"custom_id", "params"}, ...]}` | the batch |
| `GET /v1/messages/batches[?limit&after_id&before_id]` | a page, newest first |
| `GET /v1/messages/batches/{id}` | the batch |
| `GET /v1/messages/batches/{id}/results` | JSONL, one `{"custom_id", "result"}` a line |
| `POST /v1/messages/batches/{id}/cancel` | the batch, `canceling` (unless it ended) |
| `DELETE /v1/messages/batches/{id}` | `{"id", "type": "message_batch_deleted"}` (ended only) |

**Processing.** A batch is `in_progress` for the book's `delay` seconds after its creation
(default 0.05 s, so callers really poll), then it ends; the first request that observes it
after that processes every request in order. Each request is answered by exactly the machinery
of `POST /v1/messages` (`FakeState.answer`): its role's next fault, else its next scripted
reply, else the default responder; token counting and the prompt cache included; latency is
not waited. A params object the Messages API would refuse (or one asking to stream) is
`errored` with invalid_request_error. A cancelled batch is `canceling` until it is next
observed, then `ended` with every request `canceled` (nothing of theirs is consumed).

**Roles.** A request inside a batch has no headers of its own. Its role is the part of its
`custom_id` before a double underscore (`verifier__0007` → verifier), else the forced tool's
name (`submit_verifier_output` → verifier), else `default`: the same rules as `role_of`, with
the custom_id in the place of the `x-verity-role` header.

**Results.** A fault maps onto a result: a status fault (`429`, `500`/`errored`, ...) is
`errored` with that status's error object (`{"type": "error", "error": {...}}`), `expired` and
`canceled` are themselves, `hang` is `expired`, `drop_connection` and `malformed_json` are
`errored` api_error, `schema_break` succeeds with the broken input.

**Faults on the endpoints.** The batch endpoints themselves are requests of role `batch`: a
fault queued for role `batch` is consumed by the next batch API call (create, retrieve, list,
results, cancel, delete), so `fake.fault("batch", "429")` makes the next create a 429.

**Records.** Every batch API call is recorded with the other requests (`FakeState.requests`,
role `batch`). `BatchBook.snapshot()` gives every batch as the API shows it, plus `requests`:
one record per request in it — `seq` (0, 1, ... over all batches), `batch_id`, `custom_id`,
`role`, `body` (its params), `request_id`, `outcome` (as `/v1/messages` records it; None until
the batch ends) and `result` (its results line's `result`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fake_anthropic.actions import Action, Decision, Drop, Hang
from fake_anthropic.faults import BATCH_FAULTS, error_body
from fake_anthropic.replies import IdMint
from fake_anthropic.tokens import JSON
from fake_anthropic.validation import validate_request

BATCH_ROLE = "batch"
"""The role of the batch endpoints' own requests (their faults are queued under it)."""
ROLE_SEPARATOR = "__"
DEFAULT_BATCH_DELAY = 0.05
BATCHES_PATH = "/v1/messages/batches"
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_PAGE_LIMIT = (1, 1000)
_DAY = 24 * 3600.0

Answer = Callable[[str, JSON, bytes, str], tuple[str, Decision]]
"""`FakeState.answer`: (role, body, raw body, request id) → (outcome, Decision)."""
RoleOf = Callable[[Mapping[str, str], object], str]


@dataclass(frozen=True)
class BatchReply:
    """What a batch endpoint answers: a status and a JSON body, or JSONL lines; `outcome` is
    what the request's record says (`batch:create`, `batch:results` ..., `invalid_request`,
    `not_found`)."""

    status: int
    body: JSON | None = None
    lines: list[JSON] | None = None
    outcome: str = ""

    def jsonl(self) -> bytes:
        """The lines as JSON Lines, each ended by a newline."""
        return "".join(json.dumps(line, separators=(",", ":")) + "\n"
                       for line in self.lines or []).encode()


def batch_role(custom_id: str, params: object, role_of: RoleOf) -> str:
    """The role of a request in a batch (see the module doc)."""
    named, separator, _ = custom_id.partition(ROLE_SEPARATOR)
    if separator and named:
        return named.lower()
    return role_of({}, params)


def rfc3339(unix: float | None) -> str | None:
    """Unix seconds as the API's RFC 3339 UTC timestamp; None stays None."""
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class _Batch:
    id: str
    created: float
    delay: float
    ends_at: float
    """`time.monotonic()` when processing ends."""
    items: list[JSON]
    status: str = "in_progress"
    cancel_initiated: float | None = None
    ended: float | None = None
    base_url: str = ""
    deleted: bool = False
    raws: list[bytes] = field(default_factory=list)

    def view(self) -> JSON:
        """The MessageBatch object."""
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        for item in self.items:
            result = item["result"]
            counts["processing" if result is None else result["type"]] += 1
        ended = self.status == "ended"
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": counts,
            "ended_at": rfc3339(self.ended),
            "created_at": rfc3339(self.created),
            "expires_at": rfc3339(self.created + _DAY),
            "cancel_initiated_at": rfc3339(self.cancel_initiated),
            "archived_at": None,
            "results_url": f"{self.base_url}{BATCHES_PATH}/{self.id}/results" if ended else None,
        }


def _invalid(message: str) -> BatchReply:
    return BatchReply(400, error_body(400, message, ""), outcome="invalid_request")


def _not_found(batch_id: str) -> BatchReply:
    message = f"message batch {batch_id!r} not found"
    return BatchReply(404, error_body(404, message, ""), outcome="not_found")


def _errored(status: int, message: str, request_id: str) -> JSON:
    return {"type": "errored", "error": error_body(status, message, request_id)}


def _parse_requests(body: object) -> list[tuple[str, JSON]] | str:
    """The (custom_id, params) pairs of a create body, or the 400 message."""
    if not isinstance(body, Mapping):
        return "The request body is not a JSON object"
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        return "requests: at least one request is required"
    pairs: list[tuple[str, JSON]] = []
    for index, request in enumerate(requests):
        if not isinstance(request, Mapping):
            return f"requests.{index}: Input should be an object"
        custom_id, params = request.get("custom_id"), request.get("params")
        if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
            return f"requests.{index}.custom_id: String should match pattern '{_CUSTOM_ID.pattern}'"
        if not isinstance(params, Mapping):
            return f"requests.{index}.params: Field required"
        pairs.append((custom_id, dict(params)))
    ids = [custom_id for custom_id, _ in pairs]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        return f"Duplicate custom_id found: {duplicate}. custom_id values must be unique."
    return pairs


def batch_result(outcome: str, action: Action, request_id: str) -> JSON:
    """The results line's `result` for a request answered with `outcome` and `action`, as
    `/v1/messages` would have answered it (see the module doc)."""
    kind = outcome.removeprefix("fault:")
    if kind in BATCH_FAULTS:
        return {"type": kind}
    if isinstance(action, Hang):
        return {"type": "expired"}
    if isinstance(action, Drop):
        return _errored(500, "Injected fault: the request was dropped", request_id)
    try:
        answer = json.loads(action.body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return _errored(500, "Internal server error", request_id)
    if action.status == 200 and isinstance(answer, dict):
        return {"type": "succeeded", "message": answer}
    if isinstance(answer, dict) and answer.get("type") == "error":
        return {"type": "errored", "error": answer}
    return _errored(500, "Internal server error", request_id)


class BatchBook:
    """Every batch of one server, and the answers of its batch endpoints."""

    def __init__(self, *, answer: Answer, role_of: RoleOf, mint: IdMint,
                 record_limit: int | None = None) -> None:
        self._answer = answer
        self._role_of = role_of
        self._mint = mint
        self._lock = threading.Lock()
        self._batches: deque[_Batch] = deque(maxlen=record_limit)
        self._item_seq = 0
        self.delay = DEFAULT_BATCH_DELAY

    def clear(self, delay: float) -> None:
        """Forget every batch; processing takes `delay` seconds from now on."""
        with self._lock:
            self._batches.clear()
            self._item_seq = 0
            self.delay = float(delay)

    def set_delay(self, seconds: float) -> None:
        """Seconds a new batch stays in_progress."""
        if seconds < 0:
            raise ValueError("the batch delay is not negative")
        with self._lock:
            self.delay = float(seconds)

    def snapshot(self) -> list[JSON]:
        """Every batch as it stands (not processed by looking), oldest first, with its
        request records (copies)."""
        with self._lock:
            return [b.view() | {"requests": copy.deepcopy(b.items)} for b in self._batches]

    # -- endpoints ----------------------------------------------------------------------

    def handle(self, method: str, path: str, query: Mapping[str, str], body: object,
               base_url: str) -> BatchReply:
        """The answer of one batch endpoint call (the path starts with BATCHES_PATH)."""
        parts = path.removeprefix(BATCHES_PATH).strip("/").split("/")
        batch_id, action = parts[0], "/".join(parts[1:])
        with self._lock:
            if not batch_id:
                if method == "POST":
                    return self._create(body, base_url)
                return self._list(query, base_url) if method == "GET" else _not_found("")
            batch = next((b for b in self._batches if b.id == batch_id and not b.deleted), None)
            if batch is None:
                return _not_found(batch_id)
            batch.base_url = base_url
            self._settle(batch)
            return self._on_batch(batch, method, action)

    def _on_batch(self, batch: _Batch, method: str, action: str) -> BatchReply:
        if (method, action) == ("GET", ""):
            return BatchReply(200, batch.view(), outcome="batch:retrieve")
        if (method, action) == ("GET", "results"):
            if batch.status != "ended":
                return _invalid(f"Message Batch {batch.id} has not ended: {batch.status}")
            lines = [{"custom_id": i["custom_id"], "result": i["result"]} for i in batch.items]
            return BatchReply(200, lines=copy.deepcopy(lines), outcome="batch:results")
        if (method, action) == ("POST", "cancel"):
            if batch.status == "in_progress":
                batch.status, batch.cancel_initiated = "canceling", time.time()
            return BatchReply(200, batch.view(), outcome="batch:cancel")
        if (method, action) == ("DELETE", ""):
            if batch.status != "ended":
                return _invalid(f"Message Batch {batch.id} is still processing: cancel it first")
            batch.deleted = True
            deleted = {"id": batch.id, "type": "message_batch_deleted"}
            return BatchReply(200, deleted, outcome="batch:delete")
        return _not_found(batch.id)

    def _create(self, body: object, base_url: str) -> BatchReply:
        pairs = _parse_requests(body)
        if isinstance(pairs, str):
            return _invalid(pairs)
        batch = _Batch(id=self._mint.mint("msgbatch"), created=time.time(), delay=self.delay,
                       ends_at=time.monotonic() + self.delay, items=[], base_url=base_url)
        for custom_id, params in pairs:
            batch.items.append({
                "seq": self._item_seq, "batch_id": batch.id, "custom_id": custom_id,
                "role": batch_role(custom_id, params, self._role_of), "body": params,
                "request_id": self._mint.mint("req"), "outcome": None, "result": None,
            })
            # the responder's own copy, as for /v1/messages: the recorded body stays as sent
            batch.raws.append(json.dumps(params).encode())
            self._item_seq += 1
        self._batches.append(batch)
        return BatchReply(200, batch.view(), outcome="batch:create")

    def _list(self, query: Mapping[str, str], base_url: str) -> BatchReply:
        try:
            limit = min(max(int(query.get("limit", 20)), _PAGE_LIMIT[0]), _PAGE_LIMIT[1])
        except ValueError:
            return _invalid("limit: Input should be a valid integer")
        newest = [b for b in reversed(self._batches) if not b.deleted]
        for batch in newest:
            batch.base_url = batch.base_url or base_url
            self._settle(batch)
        ids = [b.id for b in newest]
        if query.get("after_id") in ids:
            newest = newest[ids.index(query["after_id"]) + 1:]
            page = newest[:limit]
        elif query.get("before_id") in ids:
            newest = newest[: ids.index(query["before_id"])]
            page = newest[-limit:]
        else:
            page = newest[:limit]
        data = [b.view() for b in page]
        return BatchReply(200, {
            "data": data, "has_more": len(newest) > len(page),
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }, outcome="batch:list")

    # -- processing ---------------------------------------------------------------------

    def _settle(self, batch: _Batch) -> None:
        """End a batch whose time has come, or a cancelled one (under the lock)."""
        if batch.status == "canceling":
            for item in batch.items:
                item["result"] = {"type": "canceled"}
                item["outcome"] = "canceled"
            batch.status, batch.ended = "ended", time.time()
        elif batch.status == "in_progress" and time.monotonic() >= batch.ends_at:
            for item, raw in zip(batch.items, batch.raws, strict=True):
                item["outcome"], item["result"] = self._process(item, raw)
            # it ended when its time came, whenever someone looked
            batch.status, batch.ended = "ended", batch.created + batch.delay

    def _process(self, item: JSON, raw: bytes) -> tuple[str, JSON]:
        params, request_id = item["body"], str(item["request_id"])
        invalid = validate_request(params)
        if invalid is None and params.get("stream"):
            invalid = "stream: streaming is not supported in a Message Batch"
        if invalid is not None:
            return "invalid_request", _errored(400, invalid, request_id)
        outcome, decision = self._answer(str(item["role"]), params, raw, request_id)
        return outcome, batch_result(outcome, decision.action, request_id)
