"""The producer API over HTTP: `VerityClient.from_url(url, token)` returns one of these, with
the same methods and the same return types and errors as the in-process client, so a Python
caller chooses between importing Verity's runtime and talking to `verity serve`.

    client = VerityClient.from_url("http://127.0.0.1:8000", token=secret)
    run_id = client.submit("Why is checkout-service returning 500s?",
                           source="scenario:checkout-pool-exhaustion")
    record = client.wait(run_id, timeout=60)

Errors: 404 is RunNotFoundError or BatchNotFoundError; 400, 413 and 422 are InputError; 401
is ConfigurationError (the token is refused); 429 is RateLimitedError; 503, or a server that
cannot be reached, is StoreUnavailableError; any other answer is VerityError. Every message is
the server's one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx

from client.wait import wait_for_end
from models.batch import BatchRecord, Selection
from models.bundle import RunBundle
from models.check import CheckReport
from models.delivery import Delivery
from models.run import RunEvent, RunRecord
from pipeline.errors import (
    BatchNotFoundError,
    ConfigurationError,
    InputError,
    RateLimitedError,
    RunNotFoundError,
    StoreUnavailableError,
    VerityError,
)

DEFAULT_TIMEOUT_S = 30.0


class HttpVerityClient:
    """A tenant's producer client over the HTTP API; the tenant is the token's."""

    def __init__(self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT_S,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport,
                                  headers={"authorization": f"Bearer {token}"})

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> HttpVerityClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(self, method: str, path: str, *, not_found: type[Exception] = RunNotFoundError,
              ident: str = "", **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise StoreUnavailableError(f"Verity API unreachable at {self.url}: "
                                        f"{type(exc).__name__}") from None
        if response.status_code < 400:
            return response.json()
        raise _error(response, not_found=not_found, ident=ident)

    # -- runs ---------------------------------------------------------------------------------

    def submit(self, query: str, *, session_id: str | None = None, source: str | None = None,
               at: datetime | None = None, data_source: str | None = None,
               deadline_s: float | None = None) -> str:
        """Enqueue a run of `source` (a name `GET /sources` lists; `data_source` is taken as
        one too, never as a path) about the time `at` (default now); returns its id at once."""
        chosen = source or data_source
        if not chosen:
            raise InputError("submit needs a source: a name GET /sources lists")
        options: dict[str, Any] = {} if deadline_s is None else {"deadline_s": deadline_s}
        if at is not None:
            options["at"] = at.isoformat()
        body = {"question": query, "session": session_id, "source": chosen, "options": options}
        return str(self._call("POST", "/runs", json=body)["run_id"])

    def get(self, run_id: str) -> RunRecord:
        """The run as stored now; RunNotFoundError if the tenant has no such run."""
        return RunRecord.model_validate(self._call("GET", f"/runs/{run_id}", ident=run_id))

    def deliveries(self, run_id: str) -> list[Delivery]:
        """The run's notification deliveries with their attempts."""
        page = self._call("GET", f"/runs/{run_id}/deliveries", ident=run_id)
        return [Delivery.model_validate(d) for d in page["deliveries"]]

    def events(self, run_id: str, *, after: int = 0) -> list[RunEvent]:
        """The run's events with seq > after."""
        page = self._call("GET", f"/runs/{run_id}/events", ident=run_id,
                          params={"after": after, "follow": "false"})
        return [RunEvent.model_validate(e) for e in page["events"]]

    def wait(self, run_id: str, *, timeout: float = 120.0, poll: float = 0.2) -> RunRecord:
        """Block until the run is terminal; RunTimeoutError after `timeout` seconds."""
        return wait_for_end(self.get, run_id, timeout=timeout, poll=poll)

    def cancel(self, run_id: str) -> bool:
        """Cancel the run; False if it had already ended."""
        return bool(self._call("POST", f"/runs/{run_id}/cancel", ident=run_id)["cancelled"])

    def bundle(self, run_id: str) -> RunBundle:
        """The run as a bundle `verity verify` accepts."""
        return RunBundle.model_validate(self._call("GET", f"/runs/{run_id}/bundle", ident=run_id))

    # -- other agents' answers ----------------------------------------------------------------

    def check(self, *, format: str, transcript: str | None = None, answer: str | None = None,
              evidence: Sequence[tuple[str, str]] = (), question: str | None = None,
              provider: str | None = None) -> CheckReport:
        """Check another agent's answer and store the check (`POST /checks`)."""
        body: dict[str, Any] = {"format": format, "question": question, "provider": provider}
        if format == "files":
            body |= {"answer": answer,
                     "evidence": [{"name": n, "content": c} for n, c in evidence]}
        else:
            body["transcript"] = transcript
        return CheckReport.model_validate(self._call("POST", "/checks", json=body))

    def check_report(self, run_id: str) -> CheckReport:
        """A stored check's report."""
        return CheckReport.model_validate(self._call("GET", f"/checks/{run_id}", ident=run_id))

    # -- batches ------------------------------------------------------------------------------

    def reverify(self, selection: Selection | None = None, *, provider: str | None = None,
                 message_batches: bool = False, chunk_size: int = 50) -> BatchRecord:
        """Create a batch over the tenant's ended runs `selection` picks; returns it PENDING."""
        body = {"selection": (selection or Selection()).model_dump(mode="json"),
                "provider": provider, "message_batches": message_batches,
                "chunk_size": chunk_size}
        return BatchRecord.model_validate(self._call("POST", "/batches", json=body))

    def batch(self, batch_id: str) -> BatchRecord:
        """The batch as stored now; BatchNotFoundError otherwise."""
        return BatchRecord.model_validate(self._call(
            "GET", f"/batches/{batch_id}", not_found=BatchNotFoundError, ident=batch_id))

    def batch_report(self, batch_id: str) -> dict[str, Any]:
        """The batch's report with the batch itself."""
        report: dict[str, Any] = self._call("GET", f"/batches/{batch_id}/report",
                                            not_found=BatchNotFoundError, ident=batch_id)
        return report

    def cancel_batch(self, batch_id: str) -> bool:
        """Stop a batch; False if it had already ended."""
        return bool(self._call("POST", f"/batches/{batch_id}/cancel",
                               not_found=BatchNotFoundError, ident=batch_id)["cancelled"])

    def resume(self, batch_id: str) -> BatchRecord:
        """Send a batch's items left again."""
        return BatchRecord.model_validate(self._call(
            "POST", f"/batches/{batch_id}/resume", not_found=BatchNotFoundError, ident=batch_id))


def _error(response: httpx.Response, *, not_found: type[Exception], ident: str) -> Exception:
    """The Verity error of an error answer, with the server's one line."""
    try:
        message = str(response.json().get("error") or response.reason_phrase)
    except ValueError:
        message = response.reason_phrase or f"HTTP {response.status_code}"
    status = response.status_code
    if status == 404 and ident:
        return not_found(ident)
    if status in (400, 404, 405, 409, 413, 422):
        return InputError(message)
    if status == 401:
        return ConfigurationError(f"the Verity API refused the token: {message}")
    if status == 429:
        return RateLimitedError(message, retry_after_s=_retry_after(response))
    if status == 503:
        return StoreUnavailableError(message)
    return VerityError(f"Verity API answered {status}: {message}")


def _retry_after(response: httpx.Response) -> float:
    value = response.headers.get("retry-after", "")
    return float(value) if value.replace(".", "", 1).isdigit() else 1.0
