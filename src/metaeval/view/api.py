"""The viewer's JSON API: the same readers as the pages, as data (docs/view.md lists it).

- ``/api/runs``: every run found (id, path, protocol, kind, created, status, headline, models);
- ``/api/run/ID``: one run's status and headline numbers;
- ``/api/run/ID/state``: size and mtime of the run's record files and whether a process holds
  its lock, with a `version` that changes whenever any of them does (what a page polls);
- ``/api/run/ID/findings``: an audit run's findings table, filtered and paginated as the page
  (``severity evidence confidence subcategory task model review q page``);
- ``/api/run/ID/cells``: audit cells (task x source), build-and-find grid cells, or improve
  trials, paginated (``page``, ``per_page`` up to 1,000).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from metaeval.view import audit_pages
from metaeval.view.lazy import LazyModule
from metaeval.view.runs import Run

buildfind_pages = LazyModule("metaeval.view.buildfind_pages")
improve_pages = LazyModule("metaeval.view.improve_pages")

WATCHED = ("manifest.json", "summary.json", "score.json", "review.csv", "lineage_summary.json")
MAX_PER_PAGE = 1000


def state(run: Run) -> dict[str, Any]:
    """What changes while a run runs or is reviewed: (size, mtime_ns) per record file."""
    files: dict[str, list[int]] = {}
    folders = {run.records, run.path}
    for folder in folders:
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    if entry.name.endswith(".jsonl") or entry.name in WATCHED:
                        st = entry.stat(follow_symlinks=False)
                        files[entry.name] = [st.st_size, st.st_mtime_ns]
        except OSError:
            continue
    running = run.in_use()
    text = repr((sorted(files.items()), running))
    version = hashlib.sha256(text.encode()).hexdigest()[:16]
    return {"run": run.id, "running": running, "files": files, "version": version}


def page_of(items: list[Any], params: dict[str, str], default: int = 500) -> dict[str, Any]:
    """One page of `items` (``page`` from 1, ``per_page`` at most MAX_PER_PAGE)."""
    per_page = _number(params.get("per_page"), default, 1, MAX_PER_PAGE)
    pages = max(1, -(-len(items) // per_page))
    page = _number(params.get("page"), 1, 1, pages)
    start = (page - 1) * per_page
    return {
        "total": len(items),
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "items": items[start : start + per_page],
    }


def _number(text: str | None, default: int, low: int, high: int) -> int:
    try:
        value = int(text) if text else default
    except ValueError:
        value = default
    return max(low, min(high, value))


def run_json(run: Run) -> dict[str, Any]:
    base = {
        "id": run.id,
        "path": str(run.path),
        "protocol": run.protocol,
        "kind": run.kind,
        "created_at": run.created_at,
    }
    if run.protocol == "audit":
        view = audit_pages.load(run)
        h = audit_pages.headline(view)
        score = h["score"]
        review = h["review"]
        h.update(
            score=None if score is None else score.model_dump(mode="json", include={"rows"}),
            review=None if review is None else review.model_dump(mode="json"),
        )
        return {**base, "status": h.pop("status"), "headline": h}
    if run.protocol == "buildfind":
        return {**base, "status": buildfind_pages.status(run), "headline": run.summary()}
    entries = improve_pages.ledger(run)
    return {
        **base,
        "status": improve_pages.status(run, entries),
        "headline": {"summary": improve_pages.short_headline(run), "trials": len(entries)},
    }


def findings_json(run: Run, params: dict[str, str]) -> dict[str, Any]:
    from metaeval.protocols.audit.review import finding_id

    view = audit_pages.load(run)
    table = audit_pages.finding_rows(view, params)
    rows = [
        {
            "index": index,
            "finding_id": finding_id(f),
            "task": f.task_id,
            "severity": f.severity,
            "evidence_tier": f.evidence_tier or "assumed",
            "confidence_tier": f.tier,
            "confidence": f.confidence,
            "subcategory": f.subcategory,
            "sources": f.sources,
            "title": f.title,
            "verdict": verdict,
            "url": f"/run/{run.id}/finding/{index}",
        }
        for index, f, verdict in table["rows"]
    ]
    return {k: table[k] for k in ("total", "page", "pages")} | {"items": rows}


def cells_json(run: Run, params: dict[str, str]) -> dict[str, Any]:
    items: list[dict[str, Any]]
    if run.protocol == "audit":
        from metaeval.protocols.audit.records import FailedCell, ModelCell

        cells = audit_pages.load(run).cells
        items = [
            {
                "task": task,
                "source": source,
                "status": rec.status,
                "infra_error": rec.infra_error,
                "audit_failure": rec.failed_audit,
                "n_findings": None if isinstance(rec, FailedCell) else rec.n_findings,
                "cost_usd": rec.cost_usd if isinstance(rec, ModelCell) else None,
            }
            for (task, source), rec in sorted(cells.items())
        ]
    elif run.protocol == "buildfind":
        grid = buildfind_pages.grid(run)
        items = [{**c, "builder": b, "finder": f} for (b, f), c in sorted(grid["cells"].items())]
    else:
        items = [
            {k: n.get(k) for k in ("id", "parent", "decision", "optimize_score", "held_out_score")}
            for n in improve_pages.nodes(run, improve_pages.ledger(run))
        ]
    return page_of(items, params)
