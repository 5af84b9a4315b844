"""One HTTP client per backend (httpx): auth from the environment, TLS, headers, timeouts, a
byte bound on every body, and every failure as a one-line `SourceError` without credentials.

    client = BackendClient("prod", "prometheus", config)
    body, size = client.get_json("/api/v1/query_range", {"query": "up", ...})
    client.query_text("/api/v1/query_range", params)   # 'GET /api/v1/query_range?query=up&...'
    client.probe("/api/v1/status/buildinfo", lambda body: body["data"]["version"])

Two failures have their own type, so that `verity sources check` can tell them apart without
reading messages:

    SourceError
    ├── BackendUnreachableError   connection refused, DNS, TLS handshake: nothing answered
    └── BackendAuthError          HTTP 401 or 403: it answered and refused the credentials
"""

from __future__ import annotations

import dataclasses
import json
import os
import ssl
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from pipeline.data.source import BackendStatus
from pipeline.errors import BackendAuthError, BackendUnreachableError, SourceError
from pipeline.sources.config import Backend, BasicAuth, BearerAuth

REASON_CHARS = 200
ERROR_BODY_BYTES = 2000
"""How much of a non-2xx body is read for its error message."""

# Kept readable in recorded query texts (PromQL/LogQL punctuation); `&`, `#`, `%`, `+` and
# spaces are still escaped, so the text stays one unambiguous URL a reader can rerun.
_READABLE = '{}[]()"=~!,:*^$|?/@.<>\\'


class BackendClient:
    """GET requests to one backend of one source."""

    def __init__(self, source: str, backend: str, config: Backend,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.source = source
        self.backend = backend
        self.config = config
        self._secrets: list[str] = []
        self._client = httpx.Client(
            base_url=config.url,
            headers={"User-Agent": "verity", **config.headers},
            auth=self._auth(config),
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            verify=self._verify(config),
            transport=transport,
            follow_redirects=False,
        )

    @property
    def label(self) -> str:
        """`prod/prometheus`: how errors name this backend."""
        return f"{self.source}/{self.backend}"

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    @staticmethod
    def query_text(path: str, params: Mapping[str, Any] | None = None) -> str:
        """The request as a scope records it: `GET /path?a=1&b=2` (parameters in order, a
        list value repeated), query languages' punctuation left readable."""
        if not params:
            return f"GET {path}"
        return f"GET {path}?" + urlencode(list(params.items()), doseq=True, safe=_READABLE,
                                          quote_via=quote)

    def probe(self, path: str, version: Callable[[Any], object]) -> BackendStatus:
        """One `verity sources check` line: GET `path`, the version read from its JSON body by
        `version` (None when it is not there). Never raises for the backend's faults."""
        status = BackendStatus(source=self.source, backend=self.backend, url=self.config.url,
                               reachable=False)
        try:
            body, _ = self.get_json(path)
        except BackendUnreachableError as exc:
            return _replace(status, detail=str(exc))
        except BackendAuthError as exc:
            return _replace(status, reachable=True, auth_ok=False, detail=str(exc))
        except SourceError as exc:
            return _replace(status, reachable=True, detail=str(exc))
        try:
            found = version(body)
        except (KeyError, IndexError, TypeError, AttributeError):
            found = None
        return _replace(status, reachable=True, auth_ok=True,
                        version=str(found) if found is not None else None)

    def get_json(self, path: str, params: Mapping[str, Any] | None = None,
                 *, max_bytes: int | None = None) -> tuple[Any, int]:
        """The decoded JSON body of a GET and its size in bytes; SourceError for anything
        else (connection, timeout, 401/403, other non-2xx, more than `max_bytes`, not JSON)."""
        with self.stream(path, params) as response:
            raw = self._read_bounded(response, max_bytes or self.config.max_bytes)
        try:
            return json.loads(raw), len(raw)
        except (ValueError, UnicodeDecodeError):
            raise self.error("answered something that is not JSON") from None

    @contextmanager
    def stream(self, path: str, params: Mapping[str, Any] | None = None
               ) -> Iterator[httpx.Response]:
        """A streamed GET whose status has been checked (SourceError unless 2xx)."""
        try:
            with self._client.stream("GET", path, params=params) as response:
                if response.status_code in (401, 403):
                    raise self.error(f"refused the credentials (HTTP {response.status_code})",
                                     kind=BackendAuthError)
                if not 200 <= response.status_code < 300:
                    raise self.error(f"answered HTTP {response.status_code}"
                                     + self._error_detail(response))
                yield response
        except SourceError:
            raise
        except httpx.ConnectTimeout:
            raise self.error(f"unreachable: no connection within "
                             f"{self.config.connect_timeout_s:g} s",
                             kind=BackendUnreachableError) from None
        except httpx.TimeoutException:
            raise self.error(f"timed out after {self.config.timeout_s:g} s") from None
        except httpx.ConnectError as exc:
            raise self.error(f"unreachable: {self._clean(str(exc)) or 'connection failed'}",
                             kind=BackendUnreachableError) from None
        except httpx.HTTPError as exc:
            raise self.error(f"request failed: {type(exc).__name__}: {self._clean(str(exc))}"
                             ) from None

    def error(self, reason: str, *, kind: type[SourceError] = SourceError) -> SourceError:
        """A SourceError (or `kind`) naming this backend, one line, secrets removed."""
        return kind(f"{self.label} {self._clean(reason)}")

    def _read_bounded(self, response: httpx.Response, limit: int) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise self.error(f"answered more than {limit} bytes (the bound)")
            chunks.append(chunk)
        return b"".join(chunks)

    def _error_detail(self, response: httpx.Response) -> str:
        # JSON errors (Prometheus `error`, Kubernetes Status `message`) or, as Loki answers
        # (`text/plain`, pkg/util/server/error.go WriteError), the first line of the text.
        head = b""
        try:
            for chunk in response.iter_bytes():  # a huge error page is not read whole
                head += chunk
                if len(head) >= ERROR_BODY_BYTES:
                    break
        except httpx.HTTPError:
            return ""
        text = head[:ERROR_BODY_BYTES].decode("utf-8", "replace")
        try:
            body = json.loads(text)
            if not isinstance(body, dict):
                return ""
            message = body.get("error") or body.get("message")
            kind = body.get("errorType")  # Prometheus and Loki name the error's class
        except ValueError:
            is_text = response.headers.get("content-type", "").startswith("text/plain")
            message = text.strip().splitlines()[0] if is_text and text.strip() else None
            kind = None
        if not message:
            return ""
        return f": {self._clean(f'{kind}: {message}' if kind else str(message))}"

    def _clean(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        line = " ".join(text.split())
        return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"

    def _auth(self, config: Backend) -> httpx.Auth | None:
        auth = config.auth
        if auth is None:
            return None
        if isinstance(auth, BasicAuth):
            user, password = self._env(auth.username_env), self._env(auth.password_env)
            self._secrets.append(password)
            return httpx.BasicAuth(user, password)
        assert isinstance(auth, BearerAuth)
        token = self._env(auth.token_env) if auth.token_env else self._file(auth.token_file)
        self._secrets.append(token)
        return _Bearer(token)

    def _env(self, name: str | None) -> str:
        value = os.environ.get(name or "")
        if not value:
            raise self.error(f"needs the environment variable {name}, which is not set")
        return value

    def _file(self, name: str | None) -> str:
        try:
            return Path(name or "").read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise self.error(f"cannot read its token file {name}: {exc.strerror}") from None

    def _verify(self, config: Backend) -> bool | ssl.SSLContext:
        tls = config.tls
        if not tls.verify and not tls.cert_file:
            return False
        try:
            context = ssl.create_default_context(cafile=tls.ca_file)
            if not tls.verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if tls.cert_file:
                context.load_cert_chain(tls.cert_file, tls.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise self.error(f"cannot load its TLS files: {exc}") from None
        return context


def _replace(status: BackendStatus, **changes: Any) -> BackendStatus:
    return dataclasses.replace(status, **changes)


class _Bearer(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request


__all__ = ["BackendAuthError", "BackendClient", "BackendUnreachableError"]
