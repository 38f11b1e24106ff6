"""The viewer's routes: which page answers which address, for the runs under its paths."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from metaeval.errors import ConfigError
from metaeval.protocols.audit import review
from metaeval.view import api, audit_pages
from metaeval.view.lazy import LazyModule
from metaeval.view.pages import TEXT, NotFound, Page, json_page, one_int
from metaeval.view.render import render, static_file
from metaeval.view.runs import Run, discover

buildfind_pages = LazyModule("metaeval.view.buildfind_pages")
improve_pages = LazyModule("metaeval.view.improve_pages")
question_pages = LazyModule("metaeval.view.question_pages")
diff_pages = LazyModule("metaeval.view.diff_pages")


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
        page = audit_pages.finding_page(audit_pages.load(run), one_int(rest))
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
                paper_tables=buildfind_pages.paper_tables(run),
                cards=buildfind_pages.headline_cards(run),
                figures=buildfind_pages.figures(run),
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
        answers = buildfind_pages.answer_rows(rec)
        return Page(
            render(
                "transcript.html", run=run, rec=rec, t=t, what="find", params=params,
                answers=answers,
            )
        )  # fmt: skip

    def build_page(self, run: Run, rest: list[str], params: dict[str, str]) -> Page:
        rec = buildfind_pages.build_record(run, params)
        if rec is None:
            raise NotFound("build")
        t = buildfind_pages.transcript(run, rec.get("transcript_blob"))
        tree = buildfind_pages.artifact_tree(run, rec)
        return Page(
            render(
                "transcript.html",
                run=run,
                rec=rec,
                t=t,
                what="build",
                params=params,
                tree=tree,
                answers=[],
            )  # fmt: skip
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
        page = improve_pages.trial_page(run, one_int(rest))
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
