"""The security headers every response carries, the page's and the API's alike, errors
included: a pure ASGI wrapper outside the whole app (Starlette's error middleware too), and the
same list for the refusals uvicorn answers itself (`api.server`).

The page (`api/static/`) is HTML, CSS and JavaScript modules of its own origin with no inline
script or style, so the policy allows exactly that: scripts, styles and `fetch` from `'self'`,
images from `'self'` and `data:` (the empty favicon), nothing framed, no plugin, no `<base>`.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
    "connect-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'"])

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)
"""Added to every response that does not set them itself."""


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every HTTP response `app` starts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {name.lower() for name, _ in headers}
                headers += [pair for pair in SECURITY_HEADERS if pair[0] not in present]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
