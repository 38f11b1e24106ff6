"""The viewer's HTTP server (the loopback kit, `metaeval.loopback`): access checks, then the
routes' page.

Access (`view/access.py`): loopback Host on a loopback address, else the start-up token.
Requests are read within the kit's bounds (a whole request within `timeout_s`, a form of
at most `access.MAX_FORM_BYTES`).
Every page is sent with a Content-Security-Policy that allows only the viewer's own script
and stylesheet, so even markup that escaped escaping could not run.

Writes: the one thing the viewer writes is an audit run's review sheet (`POST
/run/ID/review`, from a finding's review controls). Such a request passes the same access
checks, and must carry the form token of this server's pages (a secret a page of another site
cannot read) and, when the browser sends them, an ``Origin`` of this server (or ``null``
vouched for by ``Sec-Fetch-Site: same-origin``) and ``Sec-Fetch-Site: same-origin``.
"""

from __future__ import annotations

import logging
import secrets
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from metaeval.loopback.access import Refused, is_loopback
from metaeval.loopback.framing import FramingError
from metaeval.loopback.server import BoundedHandler, LoopbackServer
from metaeval.view.access import COOKIE, MAX_FORM_BYTES, check_read, check_write
from metaeval.view.pages import TEXT, NotFound, Page
from metaeval.view.render import render
from metaeval.view.routes import Viewer

log = logging.getLogger(__name__)

HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: under no-referrer Chromium sends ``Origin: null`` with the
    # review form's POST, which the origin rule must refuse; other sites still get no referrer
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _params(query: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}


class ViewHandler(BoundedHandler):
    """One request: access checks, then the viewer's page (GET and HEAD; POST to a review)."""

    server_version = "metaeval-view"
    sys_version = ""
    max_body_bytes = MAX_FORM_BYTES
    viewer: Viewer
    token: str | None = None
    port_of: Callable[[], int]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, page: Page, extra: dict[str, str] | None = None) -> None:
        self.send_body(
            page.status, page.body, page.ctype, {**HEADERS, **page.extra, **(extra or {})}
        )

    def send_problem(self, status: int, message: str, extra: dict[str, str]) -> None:
        self._send(Page(message + "\n", status, TEXT), extra)

    def _admitted(self, params: dict[str, str]) -> bool:
        try:
            check_read(self.headers, params, self.token, type(self).port_of())
        except Refused as exc:
            self.refuse(exc)
            return False
        return True

    def _serve(self) -> None:
        url = urlsplit(self.path)
        params = _params(url.query)
        if not self._admitted(params):
            return
        self.end_of_head()
        if self.token is not None and "token" in params:
            # the token moves into a cookie and out of the address bar (and history)
            rest = {k: v for k, v in params.items() if k != "token"}
            target = url.path + ("?" + urlencode(rest) if rest else "")
            cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
            self._send(Page("", 303), {"Location": target, "Set-Cookie": cookie})
            return
        self._answer(lambda: self.viewer.handle(url.path, params))

    def _answer(self, make: Callable[[], Page]) -> None:
        try:
            page = make()
        except NotFound as exc:
            page = Page(render("error.html", title="Not found", message=str(exc)), 404)
        except Exception as exc:  # noqa: BLE001 - a broken record shows as an error page
            log.warning("%s", traceback.format_exc())
            message = f"{type(exc).__name__}: {exc}"
            page = Page(render("error.html", title="Cannot show this page", message=message), 500)
        self._send(page)

    def do_GET(self) -> None:  # noqa: N802
        self._serve()

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        if not url.path.rstrip("/").endswith("/review"):
            self._not_allowed()
            return
        if not self._admitted(_params(url.query)):
            return
        try:
            check_write(self.headers)
            form = _params(self.body().decode("utf-8", "replace"))
        except (Refused, FramingError) as exc:
            self.refuse(exc)
            return
        self._answer(lambda: self.viewer.post(url.path, form))

    def _not_allowed(self) -> None:
        self.end_of_head()
        self._send(
            Page("GET and HEAD only (POST only to /run/ID/review)\n", 405, TEXT),
            {"Allow": "GET, HEAD"},
        )

    do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815


def make_handler(viewer: Viewer, token: str | None, port_of: Callable[[], int]) -> type:
    """A handler class bound to `viewer`, its token (None on loopback) and its bound port."""
    bound = {"viewer": viewer, "token": token, "port_of": staticmethod(port_of)}
    return type("Handler", (ViewHandler,), bound)


class ViewServer(LoopbackServer):
    viewer: Viewer


def start(paths: Sequence[Path], host: str, port: int) -> tuple[ViewServer, str, str | None]:
    """A listening server (not yet serving), its URL and its token (None on loopback)."""
    viewer = Viewer(paths)
    token = None if is_loopback(host) else secrets.token_urlsafe(32)
    holder: list[ViewServer] = []
    handler = make_handler(viewer, token, lambda: holder[0].server_address[1])
    family_host = host.strip("[]")
    server = ViewServer((family_host, port), handler)
    server.viewer = viewer
    holder.append(server)
    bound = server.server_address[1]
    shown = f"[{family_host}]" if ":" in family_host else family_host
    url = f"http://{shown}:{bound}/"
    return server, url, token
