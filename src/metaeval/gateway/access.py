"""Who may use a gateway: the holder of its token, over a loopback name, never a web page.

Checked on every request before its body is read, in this order:

1. ``Host`` must name loopback (``127.0.0.1``, ``localhost``, ``[::1]``) with the listener's
   port, so a page that rebinds its own DNS name to 127.0.0.1 is refused (421). On a Unix
   socket any port is fine (the sandbox relay's), and a missing ``Host`` too.
2. A browser's request is refused (403): any ``Origin`` header (browsers send it on every
   cross-origin POST, ``no-cors`` fetches and form posts included), or a ``Sec-Fetch-Site``
   other than ``none``/``same-origin`` (a page on another 127.0.0.1 port is "same-site").
3. The token (401): sent as ``Authorization: Bearer T`` (OpenAI clients, Codex,
   mini-swe-agent), ``x-api-key: T`` (Anthropic clients, Claude Code), ``x-goog-api-key: T``
   or ``?key=T`` (Gemini clients), i.e. as the API key each CLI is given. Compared in
   constant time. Only the health probes (``HEAD``, ``GET /``, ``GET /health``) need none.
4. A POST body must be declared JSON (415): ``application/json`` or ``*+json``. Browsers can
   only send ``text/plain``, form or multipart bodies without a CORS preflight.
"""

from __future__ import annotations

import hmac
import secrets
from email.message import Message
from urllib.parse import parse_qsl

from metaeval.records.redact import add_secret

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
KEY_HEADERS = ("x-api-key", "x-goog-api-key")
TOKEN_PREFIX = "mgw-"
MIN_TOKEN_CHARS = 16


class Refused(Exception):
    """A request turned away before its body is read; `status` is the HTTP answer."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


def new_token() -> str:
    """A fresh gateway token (256 random bits), scrubbed in every encoded form from whatever
    the records layer writes from now on (`redact.add_secret`)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    add_secret(token)
    return token


def check(
    headers: Message,
    query: str,
    *,
    token: str,
    port: int | None,
    needs_token: bool,
    json_body: bool,
) -> None:
    """Raise `Refused` unless the request may go on (`port` None: a Unix socket)."""
    hosts = headers.get_all("Host") or []
    if len(hosts) > 1:
        raise Refused(400, "more than one Host header")
    if not host_allowed(hosts[0] if hosts else None, port):
        raise Refused(421, f"Host {hosts[0] if hosts else None!r} is not this gateway")
    if headers.get("Origin") is not None:
        raise Refused(403, "requests from web pages (with an Origin header) are refused")
    site = (headers.get("Sec-Fetch-Site") or "none").strip().lower()
    if site not in ("none", "same-origin"):
        raise Refused(403, f"requests from web pages (Sec-Fetch-Site: {site}) are refused")
    if needs_token and not token_matches(headers, query, token):
        raise Refused(401, "missing or wrong gateway token (give it as the API key)")
    if json_body:
        media = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise Refused(415, f"Content-Type must be application/json, not {media!r}")


def host_allowed(host: str | None, port: int | None) -> bool:
    """True for a loopback ``Host`` with the listener's port (any port on a Unix socket)."""
    if host is None:
        return port is None
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        name += "]"
        if rest and not rest.startswith(":"):
            return False
        given = rest[1:] if rest else None
    else:
        name, colon, given_text = host.partition(":")
        given = given_text if colon else None
    if name not in LOOPBACK_NAMES:
        return False
    if given is not None and not (given.isascii() and given.isdigit()):
        return False
    if port is None:
        return True
    return int(given) == port if given is not None else port == 80


def presented_keys(headers: Message, query: str) -> list[str]:
    """Every value a client may have sent as its API key."""
    keys = []
    auth = headers.get("Authorization") or ""
    scheme, _, value = auth.strip().partition(" ")
    if scheme.lower() == "bearer":
        keys.append(value.strip())
    keys += [v.strip() for name in KEY_HEADERS for v in headers.get_all(name) or []]
    if "key=" in query:
        keys += [v for k, v in parse_qsl(query, keep_blank_values=True) if k == "key"]
    return keys


def token_matches(headers: Message, query: str, token: str) -> bool:
    expected = token.encode()
    found = False
    for key in presented_keys(headers, query):
        # every candidate is compared in full: no early exit on the first match
        found |= hmac.compare_digest(key.encode("utf-8", "surrogateescape"), expected)
    return found
