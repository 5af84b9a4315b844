"""The fake's state and what it decides for each request, free of HTTP.

Every request is attributed to a role: the `x-verity-role` header (Verity's callers send
planner, executor, verifier, composer or knowledge), else the forced tool's name with a
`submit_` prefix and `_output` suffix stripped (`submit_verifier_output` → verifier), else
`default`. Per role the server keeps a FIFO of faults and a FIFO of scripted replies; a request
consumes one fault if its role has any, else one reply, else asks the role's default responder
(then the global one), else answers 500 api_error "no scripted reply for role X".

Order of checks: the request is recorded; `x-api-key` or `Authorization: Bearer` (401; the 2.x
SDK sends its api_key as the latter); the body (400); then the latency (per role, else global)
is waited and the fault or reply is sent.

A recorded request is a JSON object: `seq` (0, 1, ... since start or reset), `path`, `role`,
`headers` (lower-case names), `body` (the parsed JSON, None when it is not JSON), `time` (unix
seconds), `request_id` (also sent as the `request-id` header), `status` (None for hang and
drop_connection), `outcome` (`scripted`, `default`, `fault:<kind>`, `invalid_request`,
`authentication`, `count_tokens`) and `response` (the JSON body sent, else None).
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fake_anthropic.actions import Action, Decision, Drop, Hang, Respond
from fake_anthropic.batches import BATCH_ROLE, DEFAULT_BATCH_DELAY, BatchBook, BatchReply
from fake_anthropic.faults import (
    BATCH_FAULTS,
    Fault,
    broken_input,
    error_body,
    parse_fault,
    retry_after_header,
)
from fake_anthropic.replies import IdMint, ReplyError, build_message, check_reply
from fake_anthropic.responders import Responder, load_responder
from fake_anthropic.sse import stream_body
from fake_anthropic.tokens import JSON, PromptCache, count_input_tokens
from fake_anthropic.validation import validate_request

ROLE_HEADER = "x-verity-role"
DEFAULT_ROLE = "default"
_DOCUMENT_KEYS = frozenset(
    {"latency", "role_latency", "replies", "faults", "responders", "batch_delay"}
)


def forced_tool_role(tool_name: str) -> str:
    """`submit_verifier_output` → `verifier`; any other name is its own role."""
    role = tool_name.removeprefix("submit_").removesuffix("_output")
    return role or tool_name


def role_of(headers: Mapping[str, str], body: object) -> str:
    """The role a request is attributed to (see the module doc)."""
    named = headers.get(ROLE_HEADER, "").strip().lower()
    if named:
        return named
    choice = body.get("tool_choice") if isinstance(body, Mapping) else None
    if isinstance(choice, Mapping) and choice.get("type") == "tool":
        name = choice.get("name")
        if isinstance(name, str) and name:
            return forced_tool_role(name)
    return DEFAULT_ROLE


def _json_response(status: int, body: JSON, request_id: str, **headers: str) -> Respond:
    encoded = json.dumps(body, separators=(",", ":")).encode()
    base = {"content-type": "application/json", "request-id": request_id}
    return Respond(status, encoded, base | {k.replace("_", "-"): v for k, v in headers.items()})


def _error(status: int, message: str | None, request_id: str, **headers: str) -> Respond:
    return _json_response(status, error_body(status, message, request_id), request_id, **headers)


def _parse(raw: bytes) -> tuple[object, str | None]:
    try:
        return json.loads(raw), None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"The request body is not valid JSON: {exc}"


class FakeState:
    """Scripts, faults, latency, recorded requests and the prompt cache of one server."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        role_latency: Mapping[str, float] | None = None,
        required_key: str | None = None,
        default_responder: Responder | None = None,
        hang_seconds: float = 30.0,
        seed: int | None = None,
        script: Mapping[str, Any] | None = None,
        record_limit: int | None = None,
        batch_delay: float = DEFAULT_BATCH_DELAY,
    ) -> None:
        self._initial_batch_delay = float(batch_delay)
        self._initial_latency = (float(latency), dict(role_latency or {}))
        self._initial_responder = default_responder
        self._initial_script = copy.deepcopy(dict(script or {}))
        self.required_key = required_key
        self.hang_seconds = hang_seconds
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._mint = IdMint(seed)
        self._cache = PromptCache()
        self._latency = 0.0
        self._role_latency: dict[str, float] = {}
        self._responders: dict[str | None, Responder] = {}
        self._replies: dict[str, deque[object]] = {}
        self._faults: dict[str, deque[Fault]] = {}
        self._requests: deque[JSON] = deque(maxlen=record_limit)
        self._seq = 0
        self.batches = BatchBook(
            answer=self.answer, role_of=role_of, mint=self._mint, record_limit=record_limit
        )
        self.reset()

    # -- control ------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the state the server started in: recorded requests, queues and cached
        prefixes emptied; the start latency, default responder and script document (if any)
        applied again."""
        with self._lock:
            self._seq = 0
            self._latency, role_latency = self._initial_latency
            self._role_latency = dict(role_latency)
            self._responders = {}
            if self._initial_responder is not None:
                self._responders[None] = self._initial_responder
            self._replies.clear()
            self._faults.clear()
            self._requests.clear()
        self._cache.clear()
        self.batches.clear(self._initial_batch_delay)
        self.load(self._initial_script)

    def script(self, role: str, replies: Sequence[object]) -> int:
        """Append replies to the role's queue (all checked first); the queue's new length."""
        for reply in replies:
            check_reply(reply)
        with self._lock:
            queue = self._replies.setdefault(role, deque())
            queue.extend(copy.deepcopy(list(replies)))
            return len(queue)

    def fault(self, role: str, faults: Sequence[object]) -> int:
        """Append faults to the role's queue (all parsed first); the queue's new length."""
        parsed = [f if isinstance(f, Fault) else parse_fault(f) for f in faults]
        with self._lock:
            queue = self._faults.setdefault(role, deque())
            queue.extend(parsed)
            return len(queue)

    def set_latency(self, seconds: float, role: str | None = None) -> None:
        """Seconds to wait before answering: for one role, or globally (role None)."""
        if seconds < 0:
            raise ValueError("latency is not negative")
        with self._lock:
            if role is None:
                self._latency = float(seconds)
            else:
                self._role_latency[role] = float(seconds)

    def set_default_responder(self, responder: Responder | None, role: str | None = None) -> None:
        """The responder for a role's empty queue (role None: for every role without its own)."""
        with self._lock:
            if responder is None:
                self._responders.pop(role, None)
            else:
                self._responders[role] = responder

    def load(self, document: Mapping[str, Any]) -> None:
        """Apply a script document (the `--script FILE` format), every part optional:

        `{"latency": s, "role_latency": {role: s}, "replies": {role: [reply]},
        "faults": {role: [fault]}, "responders": {role or "*": "module:function" | "minimal"},
        "batch_delay": s}`
        """
        unknown = set(document) - _DOCUMENT_KEYS
        if unknown:
            raise ValueError(f"unknown script document keys: {sorted(unknown)}")
        if document.get("batch_delay") is not None:
            self.batches.set_delay(float(document["batch_delay"]))
        if document.get("latency") is not None:
            self.set_latency(float(document["latency"]))
        for role, seconds in (document.get("role_latency") or {}).items():
            self.set_latency(float(seconds), role)
        for role, replies in (document.get("replies") or {}).items():
            self.script(role, list(replies))
        for role, faults in (document.get("faults") or {}).items():
            self.fault(role, list(faults))
        for role, spec in (document.get("responders") or {}).items():
            self.set_default_responder(load_responder(spec), None if role == "*" else role)

    def requests(self, role: str | None = None) -> list[JSON]:
        """The recorded requests in arrival order (copies), optionally of one role."""
        with self._lock:
            chosen = [r for r in self._requests if role is None or r["role"] == role]
            return copy.deepcopy(chosen)

    def batch_requests(self, role: str | None = None) -> list[JSON]:
        """The requests inside every batch, in batch order (copies), optionally of one role."""
        items = [item for batch in self.batches.snapshot() for item in batch["requests"]]
        return [item for item in items if role is None or item["role"] == role]

    def pending(self) -> JSON:
        """Replies and faults still queued, per role (empty queues left out)."""
        with self._lock:
            return {
                "replies": {role: len(q) for role, q in self._replies.items() if q},
                "faults": {role: [f.to_json() for f in q] for role, q in self._faults.items() if q},
            }

    # -- requests -----------------------------------------------------------------------

    def _record(self, path: str, headers: Mapping[str, str], body: object, role: str) -> JSON:
        record: JSON = {
            "path": path,
            "role": role,
            "headers": dict(headers),
            "body": body,  # parsed for this request alone; requests() hands out copies
            "time": time.time(),
            "request_id": self._mint.mint("req"),
            "status": None,
            "outcome": None,
            "response": None,
        }
        with self._lock:
            record["seq"] = self._seq
            self._seq += 1
            self._requests.append(record)
        return record

    def _finish(self, record: JSON, outcome: str, decision: Decision) -> Decision:
        action = decision.action
        with self._lock:
            record["outcome"] = outcome
            if isinstance(action, Respond):
                record["status"] = action.status
                if action.headers.get("content-type") == "application/json":
                    try:
                        record["response"] = json.loads(action.body)
                    except json.JSONDecodeError:
                        record["response"] = None
        return decision

    def _check_key(self, headers: Mapping[str, str]) -> str | None:
        key = headers.get("x-api-key", "")
        if not key:
            bearer = headers.get("authorization", "")
            key = bearer.removeprefix("Bearer ").strip() if bearer.startswith("Bearer ") else ""
        if not key:
            return "x-api-key header is required"
        if self.required_key is not None and key != self.required_key:
            return "invalid x-api-key"
        return None

    def _next(self, role: str) -> tuple[Fault | None, object, bool, float]:
        with self._lock:
            delay = self._role_latency.get(role, self._latency)
            faults = self._faults.get(role)
            if faults:
                return faults.popleft(), None, False, delay
            replies = self._replies.get(role)
            if replies:
                return None, replies.popleft(), True, delay
            return None, None, False, delay

    def _responder(self, role: str) -> Responder | None:
        with self._lock:
            return self._responders.get(role) or self._responders.get(None)

    def handle_messages(self, path: str, headers: Mapping[str, str], raw: bytes) -> Decision:
        """What to do for one POST /v1/messages (or /v1/messages/count_tokens)."""
        body, parse_error = _parse(raw)
        role = role_of(headers, body)
        record = self._record(path, headers, body, role)
        request_id = str(record["request_id"])
        key_error = self._check_key(headers)
        if key_error:
            return self._finish(
                record, "authentication", Decision(0.0, _error(401, key_error, request_id))
            )
        if path.endswith("/count_tokens"):
            return self._count_tokens(record, body, parse_error)
        invalid = parse_error or validate_request(body)
        if invalid:
            return self._finish(
                record, "invalid_request", Decision(0.0, _error(400, invalid, request_id))
            )
        assert isinstance(body, dict)
        outcome, decision = self.answer(role, body, raw, request_id)
        return self._finish(record, outcome, decision)

    def answer(self, role: str, body: JSON, raw: bytes, request_id: str) -> tuple[str, Decision]:
        """The outcome and decision for a valid Messages body of `role` (`raw` is its bytes):
        the role's next fault, else its next reply, else its default responder's answer."""
        fault, reply, scripted, delay = self._next(role)
        if fault is not None:
            return f"fault:{fault.kind}", Decision(delay, self._fault(fault, body, request_id))
        if not scripted:
            return "default", Decision(delay, self._default(role, body, raw, request_id))
        return "scripted", Decision(delay, self._reply(reply, body, request_id, role))

    def handle_batch(
        self, method: str, url: str, headers: Mapping[str, str], raw: bytes, base_url: str
    ) -> Decision:
        """What to do for one call of the Message Batches API (`batches`); `url` is the path
        with its query, `base_url` what `results_url` starts with."""
        parts = urlsplit(url)
        body, parse_error = _parse(raw) if raw.strip() else (None, None)
        record = self._record(parts.path, headers, body, BATCH_ROLE)
        request_id = str(record["request_id"])
        key_error = self._check_key(headers)
        if key_error:
            return self._finish(
                record, "authentication", Decision(0.0, _error(401, key_error, request_id))
            )
        fault = self._next_fault(BATCH_ROLE)
        if fault is not None:
            action = (
                _error(500, f"Injected fault: {fault.kind!r} does not apply here", request_id)
                if fault.kind in BATCH_FAULTS or fault.kind == "schema_break"
                else self._fault(fault, {}, request_id)
            )
            return self._finish(record, f"fault:{fault.kind}", Decision(0.0, action))
        if parse_error:
            return self._finish(
                record, "invalid_request", Decision(0.0, _error(400, parse_error, request_id))
            )
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        reply = self.batches.handle(method, parts.path, query, body, base_url)
        decision = Decision(0.0, _batch_response(reply, request_id))
        return self._finish(record, reply.outcome, decision)

    def _next_fault(self, role: str) -> Fault | None:
        with self._lock:
            faults = self._faults.get(role)
            return faults.popleft() if faults else None

    def _count_tokens(self, record: JSON, body: object, parse_error: str | None) -> Decision:
        request_id = str(record["request_id"])
        if parse_error or not isinstance(body, dict) or "messages" not in body:
            message = parse_error or "messages: Field required"
            return self._finish(
                record, "invalid_request", Decision(0.0, _error(400, message, request_id))
            )
        counted = {"input_tokens": count_input_tokens(body)}
        return self._finish(
            record, "count_tokens", Decision(0.0, _json_response(200, counted, request_id))
        )

    def _default(self, role: str, body: JSON, raw: bytes, request_id: str) -> Respond:
        responder = self._responder(role)
        if responder is None:
            return _error(500, f"no scripted reply for role {role!r}", request_id)
        try:
            # the responder's own copy of the request, parsed again from its bytes: the
            # recorded body stays as sent whatever it does (and a parse is far cheaper than a
            # deep copy of a long transcript)
            reply = responder(json.loads(raw))
        except Exception as exc:  # a broken responder is the test's bug: say so, keep serving
            return _error(500, f"default responder for role {role!r} raised {exc!r}", request_id)
        if reply is None:
            return _error(500, f"no scripted reply for role {role!r}", request_id)
        return self._reply(reply, body, request_id, role)

    def _reply(self, reply: object, body: JSON, request_id: str, role: str) -> Respond:
        try:
            message = build_message(
                reply, request=body, usage=self._cache.account(body), mint=self._mint
            )
        except ReplyError as exc:
            return _error(500, f"bad reply for role {role!r}: {exc}", request_id)
        if body.get("stream"):
            headers = {"content-type": "text/event-stream", "request-id": request_id}
            return Respond(200, stream_body(message), headers)
        return _json_response(200, message, request_id)

    def _fault(self, fault: Fault, body: JSON, request_id: str) -> Action:
        extra = (
            {}
            if fault.retry_after is None
            else {"retry_after": retry_after_header(fault.retry_after)}
        )
        if fault.status is not None:
            return _error(fault.status, fault.message, request_id, **extra)
        if fault.kind in BATCH_FAULTS:
            message = f"Injected fault: {fault.kind!r} applies only to a request in a Message Batch"
            return _error(500, message, request_id)
        if fault.kind == "hang":
            return Hang(self.hang_seconds if fault.seconds is None else fault.seconds)
        if fault.kind == "drop_connection":
            return Drop()
        if fault.kind == "malformed_json":
            cut = (
                b'{"id":"' + self._mint.mint("msg").encode() + b'","type":"message","content":[{"ty'
            )
            return Respond(200, cut, {"content-type": "application/json", "request-id": request_id})
        name, broken = broken_input(body)
        if fault.input is not None:
            broken = fault.input
        return self._reply({"tool_use": {"name": name, "input": broken}}, body, request_id, "")


def _batch_response(reply: BatchReply, request_id: str) -> Respond:
    if reply.lines is None:
        body = dict(reply.body or {})
        if body.get("type") == "error":
            body["request_id"] = request_id
        return _json_response(reply.status, body, request_id)
    headers = {"content-type": "application/binary", "request-id": request_id}
    return Respond(reply.status, reply.jsonl(), headers)
