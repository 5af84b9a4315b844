"""Injected faults: their names, their options and the error bodies of the real API.

A fault is a name, or `{"fault": name, ...options}`:

| name | what the client sees |
|---|---|
| `400` (`invalid_request`) | 400 invalid_request_error |
| `401` (`authentication`) | 401 authentication_error |
| `403` (`permission`) | 403 permission_error |
| `404` (`not_found`) | 404 not_found_error |
| `429` (`rate_limit`) | 429 rate_limit_error, `retry-after: N` (option `retry_after`, 1) |
| `500` (`api_error`) | 500 api_error |
| `529` (`overloaded`) | 529 overloaded_error |
| `hang` | no answer for `seconds` (default: the server's hang_seconds), then the socket closes |
| `drop_connection` | the socket closes at once, no response |
| `malformed_json` | 200, `content-type: application/json`, a body cut off mid-object |
| `schema_break` | 200, a well-formed tool_use whose input breaks the tool's input_schema |
| `expired` | in a Message Batch: the request's result is `expired` (elsewhere: a 500) |
| `canceled` | in a Message Batch: the request's result is `canceled` (elsewhere: a 500) |

`errored` is another name for `500`. In a Message Batch (`batches`) a status fault makes the
request's result `errored` with that status's error object, `hang` makes it `expired`,
`drop_connection` and `malformed_json` make it `errored` (api_error), and `schema_break`
succeeds with the broken input.

Options: `retry_after` (status faults: a `retry-after` header), `message` (status faults),
`seconds` (hang), `input` (schema_break: the exact input to send).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fake_anthropic.tokens import JSON

STATUS_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Injected fault: invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Injected fault: permission denied"),
    404: ("not_found_error", "Injected fault: not found"),
    429: ("rate_limit_error", "Injected fault: rate limited"),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}
_ALIASES = {
    "invalid_request": "400",
    "authentication": "401",
    "permission": "403",
    "not_found": "404",
    "rate_limit": "429",
    "api_error": "500",
    "overloaded": "529",
    "errored": "500",
}
BEHAVIOUR_FAULTS = frozenset({"hang", "drop_connection", "malformed_json", "schema_break"})
BATCH_FAULTS = frozenset({"expired", "canceled"})
"""Faults that only mean something for a request inside a Message Batch."""
FAULT_NAMES = frozenset(
    {str(code) for code in STATUS_ERRORS} | BEHAVIOUR_FAULTS | BATCH_FAULTS | set(_ALIASES)
)
_OPTIONS = frozenset({"fault", "retry_after", "seconds", "message", "input"})


class FaultError(ValueError):
    """A fault specification that names no known fault or carries unknown options."""


@dataclass(frozen=True)
class Fault:
    """One injected fault, consumed by one request."""

    kind: str
    """A status code as a string ("429") or a behaviour fault name ("hang")."""
    retry_after: float | None = None
    seconds: float | None = None
    message: str | None = None
    input: JSON | None = None

    @property
    def status(self) -> int | None:
        """The HTTP status of a status fault, None for a behaviour fault."""
        return int(self.kind) if self.kind.isdigit() else None

    def to_json(self) -> JSON:
        """The fault as its JSON specification."""
        spec: JSON = {"fault": self.kind}
        for key in ("retry_after", "seconds", "message", "input"):
            if getattr(self, key) is not None:
                spec[key] = getattr(self, key)
        return spec


def parse_fault(spec: object) -> Fault:
    """A Fault from a name (str or int) or a `{"fault": name, ...}` object."""
    options: Mapping[str, Any] = {}
    if isinstance(spec, Mapping):
        unknown = set(spec) - _OPTIONS
        if unknown:
            raise FaultError(f"unknown fault options: {sorted(unknown)}")
        options = spec
        spec = spec.get("fault")
    if isinstance(spec, int) and not isinstance(spec, bool):
        spec = str(spec)
    if not isinstance(spec, str) or spec not in FAULT_NAMES:
        raise FaultError(f"unknown fault {spec!r}; known: {sorted(FAULT_NAMES)}")
    kind = _ALIASES.get(spec, spec)
    retry_after = options.get("retry_after", 1 if kind == "429" else None)
    if options.get("input") is not None and not isinstance(options["input"], Mapping):
        raise FaultError("a schema_break 'input' is an object")
    return Fault(
        kind,
        retry_after=None if retry_after is None else float(retry_after),
        seconds=None if options.get("seconds") is None else float(options["seconds"]),
        message=options.get("message"),
        input=None if options.get("input") is None else dict(options["input"]),
    )


def error_body(status: int, message: str | None, request_id: str) -> JSON:
    """The real API's error shape for `status`."""
    error_type, default_message = STATUS_ERRORS.get(status, ("api_error", "error"))
    return {
        "type": "error",
        "error": {"type": error_type, "message": message or default_message},
        "request_id": request_id,
    }


def retry_after_header(seconds: float) -> str:
    """Whole seconds as the real API sends them; a fraction is kept ("0.5"), which the SDK reads."""
    return f"{seconds:g}"


def _wrong_type(schema: object) -> object:
    declared = schema.get("type") if isinstance(schema, Mapping) else None
    return 12345 if declared == "string" else "not a " + str(declared or "value")


def broken_input(request: JSON) -> tuple[str, JSON]:
    """A tool name and an input that breaks that tool's input_schema.

    The tool is the forced one, else the first tool. The input leaves out every required
    property (`{}`); a schema without required properties gets a wrong-typed value for each
    declared property; a schema with neither gets an unexpected property."""
    tools = [t for t in request.get("tools") or [] if isinstance(t, Mapping)]
    choice = request.get("tool_choice") or {}
    forced = choice.get("name") if isinstance(choice, Mapping) else None
    tool = next((t for t in tools if t.get("name") == forced), tools[0] if tools else {})
    name = str(forced or tool.get("name") or "unknown_tool")
    schema = tool.get("input_schema") or {}
    if schema.get("required"):
        return name, {}
    properties = schema.get("properties") or {}
    if properties:
        return name, {key: _wrong_type(value) for key, value in properties.items()}
    return name, {"__schema_break__": True}
