"""The viewer's HTTP server (standard library), its access checks and its routes.

Access: on a loopback address the ``Host`` header must name loopback with the server's port
(`gateway.access.host_allowed`), so a page that rebinds its DNS name to 127.0.0.1 reads
nothing. On any other address every request needs the token printed at start-up (as
``?token=`` once, then a cookie), compared in constant time. Every page is sent with a
Content-Security-Policy that allows only the viewer's own script and stylesheet, so even
markup that escaped escaping could not run.

Writes: the one thing the viewer writes is an audit run's review sheet (`POST
/run/ID/review`, from a finding's review controls). Such a request passes the same access
checks, and must carry the form token of this server's pages (a secret a page of another site
cannot read) and, when the browser sends them, an ``Origin`` of this server and
``Sec-Fetch-Site: same-origin``.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import threading
import traceback
from collections.abc import Callable, Sequence
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from metaeval.errors import ConfigError
from metaeval.gateway.access import host_allowed
from metaeval.protocols.audit import review
from metaeval.view import api, audit_pages
from metaeval.view.lazy import LazyModule
from metaeval.view.render import render, static_file
from metaeval.view.runs import Run, discover

log = logging.getLogger(__name__)
buildfind_pages = LazyModule("metaeval.view.buildfind_pages")
improve_pages = LazyModule("metaeval.view.improve_pages")
question_pages = LazyModule("metaeval.view.question_pages")
diff_pages = LazyModule("metaeval.view.diff_pages")

COOKIE = "metaeval_view_token"
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class NotFound(Exception):
    pass


TEXT = "text/plain; charset=utf-8"
MAX_FORM_BYTES = 64 << 10


class Page:
    """A response: status, content type, body, extra headers."""

    def __init__(
        self,
        body: str | bytes,
        status: int = 200,
        ctype: str = "text/html; charset=utf-8",
        extra: dict[str, str] | None = None,
    ):
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.status = status
        self.ctype = ctype
        self.extra = extra or {}


class Viewer:
    """The runs under `paths` and the pages about them (runs are looked for again whenever
    the runs list is shown)."""

    def __init__(self, paths: Sequence[Path]):
        self.paths = [Path(p) for p in paths]
        self.form_token = secrets.token_urlsafe(24)
        self._lock = threading.Lock()
        self._runs: dict[str, Run] = {}
        self.refresh()

    def refresh(self) -> list[Run]:
        runs = discover(self.paths)
        with self._lock:
            self._runs = {r.id: r for r in runs}
        return runs

    def count(self) -> int:
        with self._lock:
            return len(self._runs)

    def run(self, run_id: str) -> Run:
        with self._lock:
            run = self._runs.get(run_id)
        if run is None:
            raise NotFound(f"no run {run_id!r} (the runs list is refreshed on its page)")
        return run

    # ------------------------------------------------------------------- routes

    def handle(self, path: str, params: dict[str, str]) -> Page:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return self.runs_page()
        if parts[0] == "static" and len(parts) == 2:
            found = static_file(parts[1])
            if found is None:
                raise NotFound(path)
            return Page(found[0], ctype=found[1])
        if parts == ["diff"]:
            return self.diff_page(params)
        if parts[0] == "api":
            return json_page(self.api(parts[1:], params))
        if parts[0] == "run" and len(parts) >= 2:
            run = self.run(parts[1])
            rest = parts[2:]
            route: dict[tuple[str, str], Callable[[Run, list[str], dict[str, str]], Page]] = {
                ("audit", ""): self.audit_page,
                ("audit", "finding"): self.finding_page,
                ("buildfind", ""): self.buildfind_page,
                ("buildfind", "cell"): self.cell_page,
                ("buildfind", "find"): self.find_page,
                ("buildfind", "build"): self.build_page,
                ("buildfind", "questions"): self.questions_page,
                ("improve", ""): self.improve_page,
                ("improve", "trial"): self.trial_page,
            }
            handler = route.get((run.protocol, rest[0] if rest else ""))
            if handler is None:
                raise NotFound(path)
            return handler(run, rest[1:], params)
        raise NotFound(path)

    def api(self, parts: list[str], params: dict[str, str]) -> Any:
        if parts == ["runs"]:
            return [
                {**api.run_json(r["run"]), "status": r["status"], "models": r["models"]}
                if r["status"] != "unreadable"
                else {"id": r["run"].id, "status": "unreadable", "error": r["headline"]}
                for r in self.run_rows()
            ]
        if parts == ["state"]:
            return self.state()
        if len(parts) < 2 or parts[0] != "run":
            raise NotFound("/api/" + "/".join(parts))
        run = self.run(parts[1])
        what = parts[2] if len(parts) == 3 else "" if len(parts) == 2 else None
        if what == "":
            return api.run_json(run)
        if what == "state":
            return api.state(run)
        if what == "cells":
            return api.cells_json(run, params)
        if what == "findings" and run.protocol == "audit":
            return api.findings_json(run, params)
        if what == "rows" and run.protocol == "buildfind":
            return question_pages.question_rows(run, params)
        raise NotFound("/api/" + "/".join(parts))

    def state(self) -> dict[str, Any]:
        """`/api/state`: the runs found and each one's state version (the runs list polls it)."""
        runs = {r.id: api.state(r)["version"] for r in self.refresh()}
        text = repr(sorted(runs.items()))
        return {"runs": runs, "version": hashlib.sha256(text.encode()).hexdigest()[:16]}

    def runs_page(self) -> Page:
        version = self.state()["version"]
        rows = self.run_rows()
        return Page(render("runs.html", rows=rows, paths=self.paths, version=version))

    def run_rows(self) -> list[dict[str, Any]]:
        """Every run with its status, short headline and models, for the runs list."""
        rows = []
        for run in self.refresh():
            try:
                if run.protocol == "audit":
                    view = audit_pages.load(run)
                    h = audit_pages.headline(view)
                    status, headline, models = (
                        h["status"],
                        audit_pages.short_headline(view),
                        h["models"],
                    )
                elif run.protocol == "buildfind":
                    status, headline = (
                        buildfind_pages.status(run),
                        buildfind_pages.short_headline(run),
                    )
                    models = sorted(
                        {
                            str(a.get("model"))
                            for k in ("builders", "finders")
                            for a in run.config.get(k, [])
                            if isinstance(a, dict) and a.get("model")
                        }
                    )
                else:
                    status = improve_pages.status(run, improve_pages.ledger(run))
                    headline = improve_pages.short_headline(run)
                    sum_cfg = (run.json_file("resolved_manifest.json") or {}).get("sum") or {}
                    models = (
                        [str(sum_cfg.get("model"))]
                        if isinstance(sum_cfg, dict) and sum_cfg.get("model")
                        else []
                    )
            except Exception as exc:  # noqa: BLE001 - one unreadable run must not hide the others
                status, headline, models = "unreadable", f"{type(exc).__name__}: {exc}", []
            rows.append({"run": run, "status": status, "headline": headline, "models": models})
        return rows

    def audit_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        if rest:
            raise NotFound("/".join(rest))
        version = api.state(run)["version"]  # before the records are read: a change after it
        view = audit_pages.load(run)  # shows as a newer version at the next poll
        return Page(
            render(
                "audit.html",
                run=run,
                version=version,
                h=audit_pages.headline(view),
                table=audit_pages.finding_rows(view, params),
            )
        )

    def finding_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        page = audit_pages.finding_page(audit_pages.load(run), _int(rest))
        if page is None:
            raise NotFound("finding")
        saved = params.get("saved", "")
        return Page(render("finding.html", run=run, csrf=self.form_token, saved=saved, **page))

    def post(self, path: str, form: dict[str, str]) -> Page:
        """`POST /run/ID/review`: one verdict and note into the run's review sheet, then back
        to the finding (303)."""
        parts = [p for p in path.split("/") if p]
        if len(parts) != 3 or parts[0] != "run" or parts[2] != "review":
            raise NotFound(path)
        run = self.run(parts[1])
        if not audit_pages.reviewable(run):
            raise NotFound(f"{run.id} is not an audit run directory (no review sheet)")
        if not hmac.compare_digest(form.get("csrf", "").encode(), self.form_token.encode()):
            return Page("the form token is missing or stale: reload the page\n", 403, TEXT)
        view = audit_pages.load(run)
        fid = form.get("finding", "")
        # by id: a running run may have reordered its findings since the page was shown
        ids = [review.finding_id(f) for f in view.findings]
        if fid not in ids:
            raise NotFound(f"no finding {fid!r} in this run")
        index = ids.index(fid)
        try:
            row = review.set_verdict(
                run.path, view.findings, fid, form.get("verdict", ""), form.get("note", "")
            )
        except ConfigError as exc:
            return Page(render("error.html", title="Not saved", message=str(exc)), 400)
        target = f"/run/{run.id}/finding/{index}?{urlencode({'saved': row.verdict or 'cleared'})}"
        return Page("", 303, extra={"Location": target + "#review"})

    def buildfind_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        return Page(
            render(
                "buildfind.html",
                run=run,
                version=api.state(run)["version"],
                grid=buildfind_pages.grid(run),
                summary=run.summary(),
                status=buildfind_pages.status(run),
                builds=sorted(buildfind_pages.builds(run).items(), key=lambda kv: str(kv[0])),
            )
        )

    def cell_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        builder, finder = params.get("builder", ""), params.get("finder", "")
        runs = buildfind_pages.cell_runs(run, builder, finder)
        return Page(render("cell.html", run=run, builder=builder, finder=finder, runs=runs))

    def find_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        rec = buildfind_pages.find_record(run, params)
        if rec is None:
            raise NotFound("find run")
        t = buildfind_pages.transcript(run, rec.get("transcript_blob"))
        return Page(render("transcript.html", run=run, rec=rec, t=t, what="find", params=params))

    def build_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        rec = buildfind_pages.build_record(run, params)
        if rec is None:
            raise NotFound("build")
        t = buildfind_pages.transcript(run, rec.get("transcript_blob"))
        tree = buildfind_pages.artifact_tree(run, rec)
        return Page(
            render("transcript.html", run=run, rec=rec, t=t, what="build", params=params, tree=tree)
        )

    def questions_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        version = api.state(run)["version"]
        table = question_pages.question_rows(run, params)
        return Page(render("questions.html", run=run, version=version, t=table))

    def improve_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        version = api.state(run)["version"]
        return Page(render("improve.html", run=run, version=version, **improve_pages.overview(run)))

    def trial_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        if len(rest) == 2 and rest[1] == "task" and rest[0].isdigit():
            found = improve_pages.task_file(
                run,
                int(rest[0]),
                params.get("suite", ""),
                params.get("task", ""),
                params.get("kind", ""),
            )
            if found is None:
                raise NotFound("no such task file kept in this bundle")
            return Page(render("task_file.html", run=run, **found))
        page = improve_pages.trial_page(run, _int(rest))
        if page is None:
            raise NotFound("trial")
        return Page(render("trial.html", run=run, **page))

    def diff_page(self, params: dict[str, str]) -> Page:
        self.refresh()
        a, b = self.run(params.get("a", "")), self.run(params.get("b", ""))
        try:
            data = diff_pages.diff(a, b)
        except ValueError as exc:
            return Page(render("error.html", title="Cannot compare", message=str(exc)), 400)
        return Page(render("diff.html", a=a, b=b, d=data))


def json_page(data: Any) -> Page:
    return Page(json.dumps(data, default=str, ensure_ascii=False), ctype="application/json")


def _int(rest: list[str]) -> int:
    if len(rest) != 1 or not rest[0].isdigit():
        raise NotFound("/".join(rest))
    return int(rest[0])


def make_handler(viewer: Viewer, token: str | None, port_of: Callable[[], int]) -> type:
    """The request handler: access checks, then the viewer's page (GET and HEAD only)."""

    class Handler(BaseHTTPRequestHandler):
        server_version = "metaeval-view"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.debug("%s " + format, self.address_string(), *args)

        def _send(self, page: Page, extra: dict[str, str] | None = None, body: bool = True) -> None:
            self.send_response(page.status)
            for name, value in {**HEADERS, **page.extra, **(extra or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Type", page.ctype)
            self.send_header("Content-Length", str(len(page.body)))
            self.end_headers()
            if body:
                self.wfile.write(page.body)

        def _refuse(self, status: int, message: str, body: bool) -> None:
            self._send(Page(message + "\n", status, "text/plain; charset=utf-8"), body=body)

        def _admitted(self, params: dict[str, str], body: bool) -> bool:
            hosts = self.headers.get_all("Host") or []
            if len(hosts) != 1:
                self._refuse(400, "exactly one Host header is needed", body)
                return False
            if token is None:
                if not host_allowed(hosts[0], port_of()):
                    self._refuse(421, f"Host {hosts[0]!r} is not this viewer (loopback only)", body)
                    return False
                return True
            cookie = SimpleCookie()
            try:
                cookie.load(self.headers.get("Cookie") or "")
            except Exception:  # noqa: BLE001 - a malformed cookie header is no token
                cookie = SimpleCookie()
            given = [params.get("token", "")] + ([cookie[COOKIE].value] if COOKIE in cookie else [])
            ok = False
            for value in given:  # each compared in full, in constant time
                ok |= hmac.compare_digest(value.encode("utf-8", "surrogateescape"), token.encode())
            if not ok:
                self._refuse(
                    401, "this viewer needs the token printed when it started (?token=...)", body
                )
            return ok

        def _serve(self, body: bool) -> None:
            url = urlsplit(self.path)
            params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            if not self._admitted(params, body):
                return
            if token is not None and "token" in params:
                # the token moves into a cookie and out of the address bar (and history)
                rest = {k: v for k, v in params.items() if k != "token"}
                target = url.path + ("?" + urlencode(rest) if rest else "")
                cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
                self._send(Page("", 303), {"Location": target, "Set-Cookie": cookie}, body)
                return
            self._answer(lambda: viewer.handle(url.path, params), body)

        def _answer(self, make: Callable[[], Page], body: bool = True) -> None:
            try:
                page = make()
            except NotFound as exc:
                page = Page(render("error.html", title="Not found", message=str(exc)), 404)
            except Exception as exc:  # noqa: BLE001 - a broken record shows as an error page
                log.warning("%s", traceback.format_exc())
                message = f"{type(exc).__name__}: {exc}"
                page = Page(
                    render("error.html", title="Cannot show this page", message=message), 500
                )
            self._send(page, body=body)

        def do_GET(self) -> None:  # noqa: N802
            self._serve(True)

        def do_HEAD(self) -> None:  # noqa: N802
            self._serve(False)

        def do_POST(self) -> None:  # noqa: N802
            url = urlsplit(self.path)
            params = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            if not url.path.rstrip("/").endswith("/review"):
                self._not_allowed()
                return
            if not self._admitted(params, True):
                return
            problem = self._cross_site()
            if problem:
                self._refuse(403, problem, True)
                return
            form = self._form()
            if form is None:
                self._refuse(400, "expected a form (application/x-www-form-urlencoded)", True)
                return
            self._answer(lambda: viewer.post(url.path, form))

        def _cross_site(self) -> str:
            """Why a write looks like it comes from another site's page ("" when it does not)."""
            origin = self.headers.get("Origin")
            if origin is not None and origin != f"http://{self.headers.get('Host')}":
                return f"a write from another origin ({origin!r}) is refused"
            site = (self.headers.get("Sec-Fetch-Site") or "same-origin").strip().lower()
            if site not in ("same-origin", "none"):
                return f"a write from another site (Sec-Fetch-Site: {site}) is refused"
            return ""

        def _form(self) -> dict[str, str] | None:
            media = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            try:
                length = int(self.headers.get("Content-Length") or "-1")
            except ValueError:
                return None
            if media != "application/x-www-form-urlencoded" or not 0 <= length <= MAX_FORM_BYTES:
                return None
            text = self.rfile.read(length).decode("utf-8", "replace")
            return {k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()}

        def _not_allowed(self) -> None:
            self._send(
                Page("GET and HEAD only (POST only to /run/ID/review)\n", 405, TEXT),
                {"Allow": "GET, HEAD"},
            )

        do_PUT = do_DELETE = do_PATCH = _not_allowed  # noqa: N815

    return Handler


class ViewServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    viewer: Viewer


class ViewServer6(ViewServer):
    address_family = socket.AF_INET6


def start(paths: Sequence[Path], host: str, port: int) -> tuple[ViewServer, str, str | None]:
    """A listening server (not yet serving), its URL and its token (None on loopback)."""
    viewer = Viewer(paths)
    token = None if is_loopback(host) else secrets.token_urlsafe(32)
    holder: list[ViewServer] = []
    handler = make_handler(viewer, token, lambda: holder[0].server_address[1])
    family_host = host.strip("[]")
    server_class = ViewServer6 if ":" in family_host else ViewServer
    server = server_class((family_host, port), handler)
    server.viewer = viewer
    holder.append(server)
    bound = server.server_address[1]
    shown = f"[{family_host}]" if ":" in family_host else family_host
    url = f"http://{shown}:{bound}/"
    return server, url, token
