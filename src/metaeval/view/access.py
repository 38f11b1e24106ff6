"""Who may read and write through the viewer (the rules of `metaeval.loopback.access`).

On a loopback address the ``Host`` header must name loopback with the server's port, so a page
that rebinds its DNS name to 127.0.0.1 reads nothing (421). On any other address every request
needs the token printed at start-up (as ``?token=`` once, then a cookie; 401). A write must
look like it comes from one of the viewer's own pages (``Origin`` and ``Sec-Fetch-Site``; 403)
and be a url-encoded form (415) of at most `MAX_FORM_BYTES` (413).
"""

from __future__ import annotations

from email.message import Message
from http.cookies import SimpleCookie

from metaeval.loopback import access

COOKIE = "metaeval_view_token"
MAX_FORM_BYTES = 64 << 10
FORM = ("application/x-www-form-urlencoded",)


def check_read(headers: Message, params: dict[str, str], token: str | None, port: int) -> None:
    """Raise `access.Refused` unless the request may read (`token` None: on loopback)."""
    if token is None:
        access.check_host(headers, port, "viewer")
        return
    if access.the_host(headers) is None:
        raise access.Refused(400, "a Host header is needed")
    hint = "this viewer needs the token printed when it started (?token=...)"
    access.check_token(presented(headers, params), token, hint)


def check_write(headers: Message) -> None:
    """Raise `access.Refused` unless a request that may read may also write."""
    access.check_same_origin(headers)
    access.check_media(headers, FORM)


def presented(headers: Message, params: dict[str, str]) -> list[str]:
    """The token values a request carries: its ``?token=`` and its cookie."""
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(headers.get("Cookie") or "")
    except Exception:  # noqa: BLE001 - a malformed cookie header is no token
        cookie = SimpleCookie()
    return [params.get("token", "")] + ([cookie[COOKIE].value] if COOKIE in cookie else [])
