"""Who may talk to a loopback server: its own ``Host``, no web page, the token's holder.

Each rule raises `Refused` with the HTTP status it answers; a server checks the rules it
needs, in this order, before it reads a request's body:

1. `check_host`: one ``Host`` header at most (400), naming loopback (``127.0.0.1``,
   ``localhost``, ``[::1]``) with the listener's port (421), so a page that rebinds its own
   DNS name to 127.0.0.1 is refused. On a Unix socket (`port` None) any port is fine, and a
   missing ``Host`` too.
2. `refuse_web_pages` (APIs no browser should call): any ``Origin`` header (browsers send it on
   every cross-origin POST, ``no-cors`` fetches and form posts included), or a
   ``Sec-Fetch-Site`` other than ``none``/``same-origin`` (a page on another 127.0.0.1 port
   is "same-site") is refused (403). `check_same_origin` is the rule for a server's own pages
   writing back to it (the viewer's review form).
3. `check_token`: one of the values the client presented equals the token (401), each
   compared in full and in constant time.
4. `check_media`: a body declared as a type the server reads (415). Browsers can send only
   ``text/plain``, form or multipart bodies without a CORS preflight.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from email.message import Message

from metaeval.records.redact import add_secret

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")  # addresses a loopback-only server binds
MIN_TOKEN_CHARS = 16


class Refused(Exception):
    """A request turned away before its body is read; `status` is the HTTP answer."""

    def __init__(self, status: int, message: str):
        self.status = status
        super().__init__(message)


def new_token(prefix: str = "mgw-") -> str:
    """A fresh token (256 random bits), scrubbed in every encoded form from whatever the
    records layer writes from now on (`redact.add_secret`)."""
    token = prefix + secrets.token_urlsafe(32)
    add_secret(token)
    return token


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 maybe in brackets) is loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def the_host(headers: Message) -> str | None:
    """The request's one ``Host`` header (None when absent); more than one is refused."""
    hosts = headers.get_all("Host") or []
    if len(hosts) > 1:
        raise Refused(400, "more than one Host header")
    return hosts[0] if hosts else None


def check_host(headers: Message, port: int | None, server: str) -> None:
    """Refuse a ``Host`` that does not name loopback with `port` (None: a Unix socket)."""
    host = the_host(headers)
    if not host_allowed(host, port):
        raise Refused(421, f"Host {host!r} is not this {server} (loopback only)")


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


def refuse_web_pages(headers: Message) -> None:
    """Refuse a request a browser sent for a web page (an API is for programs only)."""
    if headers.get("Origin") is not None:
        raise Refused(403, "requests from web pages (with an Origin header) are refused")
    site = (headers.get("Sec-Fetch-Site") or "none").strip().lower()
    if site not in ("none", "same-origin"):
        raise Refused(403, f"requests from web pages (Sec-Fetch-Site: {site}) are refused")


def check_same_origin(headers: Message) -> None:
    """Refuse a write that looks like it comes from another site's page (the server's own
    pages, at ``http://HOST``, may write)."""
    origin = headers.get("Origin")
    site = (headers.get("Sec-Fetch-Site") or "same-origin").strip().lower()
    if site not in ("same-origin", "none"):
        raise Refused(403, f"a write from another site (Sec-Fetch-Site: {site}) is refused")
    # a browser that hides the origin (``null``) still says where the request came from in
    # Sec-Fetch-Site, which no page can set
    vouched = origin == "null" and headers.get("Sec-Fetch-Site") is not None
    if origin is not None and origin != f"http://{headers.get('Host')}" and not vouched:
        raise Refused(403, f"a write from another origin ({origin!r}) is refused")


def bearer(headers: Message) -> list[str]:
    """The token of an ``Authorization: Bearer T`` header, if one was sent."""
    scheme, _, value = (headers.get("Authorization") or "").strip().partition(" ")
    return [value.strip()] if scheme.lower() == "bearer" else []


def token_matches(presented: list[str], token: str) -> bool:
    """Whether any presented value is `token`; every one is compared in full (no early exit)."""
    expected = token.encode()
    found = False
    for value in presented:
        found |= hmac.compare_digest(value.encode("utf-8", "surrogateescape"), expected)
    return found


def check_token(presented: list[str], token: str, hint: str) -> None:
    """Refuse (401, saying `hint`) unless one of the `presented` values is `token`."""
    if not token_matches(presented, token):
        raise Refused(401, hint)


def media_type(headers: Message) -> str:
    return (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()


def check_media(headers: Message, accepted: tuple[str, ...]) -> None:
    """Refuse a body not declared as one of `accepted` (an entry ``+json`` matches any
    ``*/*+json``)."""
    media = media_type(headers)
    if not any(media == a or (a.startswith("+") and media.endswith(a)) for a in accepted):
        raise Refused(415, f"Content-Type must be {' or '.join(accepted)}, not {media!r}")
