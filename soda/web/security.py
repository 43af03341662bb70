"""What every request must pass before a page is served or an input written.

- Bound to loopback by default; another address only with an access token
  (`Guard.token`): asked once as `?token=...`, then kept in an HttpOnly,
  SameSite=Strict cookie.
- The `Host` header must name this server (`Guard.hosts`): a page of another
  site whose name was rebound to 127.0.0.1 (DNS rebinding) is refused.
- A state-changing request (POST) needs the server's CSRF token in its form
  (checked by `soda.web.actions`), and is refused here when the browser says it
  comes from another site (`Origin`, `Sec-Fetch-Site`).
- Every response carries a strict Content-Security-Policy: scripts, styles and
  requests from this origin only, no inline script, no frames.

A refusal is one line of plain text and changes nothing.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, urlencode

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")
TOKEN_COOKIE = "soda_web_token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
    " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
SAFE_SITES = ("same-origin", "none")
"""`Sec-Fetch-Site` values a state-changing request may carry."""


def is_loopback(host: str) -> bool:
    """Whether `host` (a bind address or name) stays on this machine."""
    bare = host.strip("[]")
    return bare in ("localhost", "::1") or bare.startswith("127.")


@dataclass(frozen=True)
class Guard:
    """One server's rules: the Host values it answers, its CSRF token, and the
    access token a non-loopback server asks for."""

    hosts: frozenset[str]
    csrf: str = field(repr=False)
    token: str | None = field(default=None, repr=False)

    @classmethod
    def create(
        cls, host: str, port: int, token: str | None = None, names: tuple[str, ...] = ()
    ) -> Guard:
        """The guard of a server bound to `host`:`port`; `names` are further host
        names people reach it by (a remote server's)."""
        bound = () if host in WILDCARD_HOSTS or is_loopback(host) else (host,)
        allowed = set()
        for name in (*LOOPBACK_HOSTS, *bound, *names):
            shown = f"[{name}]" if ":" in name and not name.startswith("[") else name
            allowed.add(f"{shown}:{port}")
            if port == 80:
                allowed.add(shown)
        return cls(frozenset(allowed), secrets.token_urlsafe(32), token)

    def csrf_ok(self, given: str | None) -> bool:
        """Whether `given` is this server's CSRF token (compared in constant time)."""
        return bool(given) and hmac.compare_digest(str(given), self.csrf)

    def token_ok(self, given: str | None) -> bool:
        """Whether `given` opens this server (always, when it asks no token)."""
        return self.token is None or (bool(given) and hmac.compare_digest(str(given), self.token))


class Guarded:
    """ASGI middleware applying a `Guard` to every HTTP request (streams too)."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = self._refusal(scope)
        if answer is not None:
            await _secured(answer)(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_secured)

    def _refusal(self, scope: Scope) -> Response | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if host not in self.guard.hosts:
            return refuse(400, f"refused a request for host {host!r}: this server is not that host")
        if self.guard.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            offered = (query.get("token") or [None])[0]
            if offered is not None and self.guard.token_ok(offered):
                return _keep_token(scope["path"], query, offered)
            if not self.guard.token_ok(_cookie(headers, TOKEN_COOKIE)):
                return refuse(
                    401, "this dashboard needs its access token: open the URL `soda web` printed"
                )
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and origin != f"http://{host}":
                return refuse(403, f"refused a request from another site ({origin})")
            if headers.get("sec-fetch-site", "none") not in SAFE_SITES:
                return refuse(403, "refused a request from another site")
        return None


def refuse(status: int, line: str) -> Response:
    """A refusal: one line, nothing changed."""
    return PlainTextResponse(f"soda web: {line}\n", status_code=status)


def _secured(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def _cookie(headers: Headers, name: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except CookieError:  # a malformed cookie header is no token
        return None
    morsel = jar.get(name)
    return morsel.value if morsel else None


def _keep_token(path: str, query: dict[str, list[str]], token: str) -> Response:
    """The token offered in the URL, kept in a cookie; the URL without it."""
    rest = {key: values for key, values in query.items() if key != "token"}
    target = path + (f"?{urlencode(rest, doseq=True)}" if rest else "")
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path="/")
    return response
