"""Who may read and write through the viewer: host, token and same-site checks.

On a loopback address the ``Host`` header must name loopback with the server's port
(`gateway.access.host_allowed`), so a page that rebinds its DNS name to 127.0.0.1 reads
nothing. On any other address every request needs the token printed at start-up (as
``?token=`` once, then a cookie), compared in constant time. A write must also look like it
comes from one of the viewer's own pages (``Origin`` and ``Sec-Fetch-Site``).
"""

from __future__ import annotations

import hmac
import ipaddress
from email.message import Message
from http.cookies import SimpleCookie

from metaeval.gateway.access import host_allowed

COOKIE = "metaeval_view_token"
MAX_FORM_BYTES = 64 << 10


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 maybe in brackets) is loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refusal(
    headers: Message, params: dict[str, str], token: str | None, port: int
) -> tuple[int, str] | None:
    """Why a request may not read (status, message), or None when it may."""
    hosts = headers.get_all("Host") or []
    if len(hosts) != 1:
        return 400, "exactly one Host header is needed"
    if token is None:
        if not host_allowed(hosts[0], port):
            return 421, f"Host {hosts[0]!r} is not this viewer (loopback only)"
        return None
    if not token_given(headers, params, token):
        return 401, "this viewer needs the token printed when it started (?token=...)"
    return None


def token_given(headers: Message, params: dict[str, str], token: str) -> bool:
    """Whether the request carries `token` (query or cookie), each compared in full, in
    constant time."""
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(headers.get("Cookie") or "")
    except Exception:  # noqa: BLE001 - a malformed cookie header is no token
        cookie = SimpleCookie()
    given = [params.get("token", "")] + ([cookie[COOKIE].value] if COOKIE in cookie else [])
    ok = False
    for value in given:
        ok |= hmac.compare_digest(value.encode("utf-8", "surrogateescape"), token.encode())
    return ok


def cross_site(headers: Message) -> str:
    """Why a write looks like it comes from another site's page ("" when it does not)."""
    origin = headers.get("Origin")
    site = (headers.get("Sec-Fetch-Site") or "same-origin").strip().lower()
    if site not in ("same-origin", "none"):
        return f"a write from another site (Sec-Fetch-Site: {site}) is refused"
    # a browser that hides the origin (``null``) still says where the request came from in
    # Sec-Fetch-Site, which no page can set; the form token is checked after this as well
    vouched = origin == "null" and headers.get("Sec-Fetch-Site") is not None
    if origin is not None and origin != f"http://{headers.get('Host')}" and not vouched:
        return f"a write from another origin ({origin!r}) is refused"
    return ""


def form_length(headers: Message) -> int | None:
    """The byte length of an acceptable url-encoded form body, or None when the request is not
    one (wrong type, no or bad length, over MAX_FORM_BYTES)."""
    media = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    try:
        length = int(headers.get("Content-Length") or "-1")
    except ValueError:
        return None
    if media != "application/x-www-form-urlencoded" or not 0 <= length <= MAX_FORM_BYTES:
        return None
    return length
