"""What the audit pages show, read through the audit protocol's own readers (`summary`:
final cells, valid findings, costs; `review`: the review sheet) over a read-only `RunRecords`."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from metaeval.errors import ConfigError
from metaeval.protocols.audit import review, review_results
from metaeval.protocols.audit.findings import EVIDENCE_TIERS, SEVERITY_ORDER, Finding
from metaeval.protocols.audit.records import STATIC_SOURCE, CellRecord, Cells
from metaeval.protocols.audit.score_report import ScoreReport
from metaeval.protocols.audit.summary import (
    cost_by_source,
    cost_rows,
    final_cells,
    valid_findings,
)
from metaeval.tasks.safe_files import is_inside, read_head
from metaeval.view.runs import Run

if TYPE_CHECKING:
    from metaeval.records import RunDir

PAGE_SIZE = 500
MAX_TASK_FILE_BYTES = 2 << 20
CONTEXT_LINES = 12
SEVERITIES = tuple(SEVERITY_ORDER)
TIERS = ("Confirmed", "Likely", "Possible", "Suppressed")  # confidence, not evidence


@dataclass
class AuditView:
    """The run's final cells and valid findings, read once per page."""

    run: Run
    cells: Cells
    findings: list[Finding]
    verdicts: dict[str, review.ReviewRow] = field(default_factory=dict)
    review_error: str = ""  # the sheet could not be read (the message names file, row, column)

    def verdict(self, f: Finding) -> str:
        row = self.verdicts.get(review.finding_id(f))
        return row.verdict if row else ""


def load(run: Run) -> AuditView:
    # the audit readers take a RunDir; they only call read / latest_records, which the
    # read-only RunRecords provides
    reader = cast("RunDir", run.reader)
    cells = final_cells(reader)
    view = AuditView(run, cells, valid_findings(reader, cells))
    if reviewable(run):
        try:
            view.verdicts = review.verdicts(run.path)
        except ConfigError as exc:
            view.review_error = str(exc)
    return view


def reviewable(run: Run) -> bool:
    """An audit run directory (the review sheet lives in it)."""
    return run.protocol == "audit" and run.kind == "run"


def review_summary(view: AuditView) -> review_results.ReviewSummary | None:
    """Reviewed precision from the sheet as it is now (None: no sheet, or no verdict)."""
    if not view.verdicts:
        return None
    path = str(review.sheet_path(view.run.path))
    return review_results.summarize(view.findings, view.verdicts, path)


def planned_cells(config: dict[str, Any]) -> int | None:
    """How many (task, source) cells the run's config asks for (None when not recorded)."""
    tasks = config.get("tasks")
    if not isinstance(tasks, list):
        return None
    models = [] if config.get("static_only") else list(config.get("models") or [])
    wanted = config.get("model_tasks")
    per_model = len(tasks) if wanted is None else len([t for t in tasks if t in wanted])
    return len(tasks) + per_model * len(models)


def failed_cells(view: AuditView) -> list[dict[str, str]]:
    """Each cell that failed (an infrastructure error, retried on resume, or a final audit
    failure) with its task, source (the model), kind and message."""
    return [
        {
            "task": task,
            "source": source,
            "kind": "infrastructure error" if rec.infra_error else "audit failed",
            "error": rec.error or "(no message recorded)",
        }
        for (task, source), rec in sorted(view.cells.items())
        if rec.infra_error or rec.failed_audit
    ]


def status(view: AuditView) -> str:
    done = sum(1 for rec in view.cells.values() if rec.is_final)
    planned = planned_cells(view.run.config)
    of = planned if planned is not None else len(view.cells)
    if view.run.in_use():
        return f"running ({done} of {planned if planned is not None else '?'} cells)"
    failed = failed_cells(view)
    if failed:
        retried = sum(f["kind"] == "infrastructure error" for f in failed)
        again = f"; the same command retries the {retried} infrastructure errors" if retried else ""
        return f"{len(failed)} of {of} cells failed{again}"
    if planned is not None and done < planned:
        return f"resumable ({done} of {planned} cells done)"
    return f"complete ({done} cells)"


def score(run: Run) -> ScoreReport | None:
    data = run.json_file("score.json")
    if data is None:
        return None
    try:
        return ScoreReport.model_validate(data)
    except ValueError:
        return None


def headline(view: AuditView) -> dict[str, Any]:
    reported = [f for f in view.findings if f.reported]
    costs = cost_by_source(cost_rows(view.cells))
    known = [v for v in costs.values() if v is not None]
    report = score(view.run)
    return {
        "findings": len(reported),
        "suppressed": len(view.findings) - len(reported),
        "tasks": len({t for t, _ in view.cells}),
        "tasks_flagged": len({f.task_id for f in reported}),
        "by_severity": {s: n for s in SEVERITIES if (n := sum(f.severity == s for f in reported))},
        "by_confidence": dict(Counter(f.tier for f in reported)),
        "by_evidence": dict(Counter(f.evidence_tier or "assumed" for f in reported)),
        "by_subcategory": dict(Counter(f.subcategory for f in reported)),
        "by_source": dict(Counter(f.source for f in reported)),
        "models": run_models(view),
        "cost_usd": sum(known) if len(known) == len(costs) else None,
        "failures": sorted(f"{t} | {s}" for (t, s), r in view.cells.items() if r.failed_audit),
        "failed_cells": failed_cells(view),
        "score": report,
        "review": review_summary(view),
        "review_error": view.review_error,
        "status": status(view),
    }


def run_models(view: AuditView) -> list[str]:
    """Every model the run used: those its config names and those its cells record."""
    named = view.run.config.get("models")
    configured = [str(m) for m in named] if isinstance(named, list) else []
    return sorted(set(configured) | {s for _, s in view.cells if s != STATIC_SOURCE})


def short_headline(view: AuditView) -> str:
    h = headline(view)
    sev = ", ".join(f"{n} {s}" for s, n in h["by_severity"].items()) or "none"
    text = f"{h['findings']} findings on {h['tasks']} tasks ({sev})"
    if h["score"] is not None and h["score"].rows:
        row = h["score"].rows[-1]
        text += f"; {row.name}: recall {_pct(row.recall_a)}, precision {_pct(row.precision_a)}"
    return text


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def table_order(f: Finding) -> tuple[int, float, str]:
    """Where a finding sits in the findings table: severity, then confidence, then task."""
    return SEVERITY_ORDER[f.severity], -f.confidence, f.task_id


def neighbours(view: AuditView, index: int) -> tuple[int | None, int | None, int]:
    """The findings before and after `index` in the unfiltered table's order, and its
    position (1-based) there."""
    order = sorted(range(len(view.findings)), key=lambda i: table_order(view.findings[i]))
    at = order.index(index)
    before = order[at - 1] if at > 0 else None
    after = order[at + 1] if at + 1 < len(order) else None
    return before, after, at + 1


FILTERS = ("severity", "evidence", "confidence", "subcategory", "task", "model", "review", "q")
REVIEW_CHOICES = ("confirmed", "rejected", "unsure", "unreviewed")


def finding_rows(view: AuditView, params: dict[str, str]) -> dict[str, Any]:
    """The findings table: every valid finding (with its index, the id of its page), filtered
    by the query's params, sorted by severity, one page of PAGE_SIZE."""
    rows = []
    for index, f in enumerate(view.findings):
        if params.get("severity") and f.severity != params["severity"]:
            continue
        if params.get("evidence") and (f.evidence_tier or "assumed") != params["evidence"]:
            continue
        if params.get("confidence") and f.tier != params["confidence"]:
            continue
        if params.get("subcategory") and f.subcategory != params["subcategory"]:
            continue
        if params.get("task") and f.task_id != params["task"]:
            continue
        if params.get("model") and params["model"] not in f.sources:
            continue
        if params.get("review") and (view.verdict(f) or "unreviewed") != params["review"]:
            continue
        needle = params.get("q", "").lower()
        if needle and needle not in f"{f.title} {f.description} {f.task_id}".lower():
            continue
        rows.append((index, f))
    rows.sort(key=lambda r: table_order(r[1]))
    try:
        page = max(1, int(params.get("page", "1")))
    except ValueError:
        page = 1
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(page, pages)
    return {
        "rows": [
            (i, f, view.verdict(f)) for i, f in rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        ],
        "total": len(rows),
        "page": page,
        "pages": pages,
        "choices": {
            "severity": list(SEVERITIES),
            "evidence": list(EVIDENCE_TIERS),
            "confidence": list(TIERS),
            "subcategory": sorted({f.subcategory for f in view.findings}),
            "task": sorted({f.task_id for f in view.findings}),
            "model": sorted({s for f in view.findings for s in f.sources}),
            "review": list(REVIEW_CHOICES),
        },
        "params": {k: params.get(k, "") for k in FILTERS},
    }


def task_dir(run: Run, task_id: str) -> tuple[Path | None, str]:
    """The task's folder in the benchmark the run recorded, or (None, why not)."""
    bench = run.config.get("benchmark")
    if not isinstance(bench, str) or not bench:
        return None, "the run recorded no benchmark path"
    root = Path(bench)
    folder = root / task_id
    if Path(task_id).is_absolute() or ".." in Path(task_id).parts or not is_inside(root, folder):
        return None, f"task id {task_id!r} does not name a folder inside the benchmark"
    if not folder.is_dir():
        return None, f"{folder} is not on this machine any more"
    if not any((folder / name).is_file() for name in ("task.toml", "instruction.md")):
        # a run directory is input too: its manifest must not turn the viewer into a reader
        # of any folder on the machine
        return None, f"{folder} is not a task folder (no task.toml or instruction.md)"
    return folder, ""


def evidence_view(run: Run, finding: Finding) -> list[dict[str, Any]]:
    """Each citation with the cited lines of the task's file (read with safe_files: a symlink
    leading out of the task, a FIFO or an oversized file is refused and said so)."""
    folder, why = task_dir(run, finding.task_id)
    out = []
    for ev in finding.evidence:
        item: dict[str, Any] = {"ev": ev, "lines": [], "problem": "", "cut": False}
        out.append(item)
        if folder is None:
            item["problem"] = why
            continue
        rel = Path(ev.file)
        if rel.is_absolute() or ".." in rel.parts or not ev.file:
            item["problem"] = "not a file of the task"
            continue
        path = folder / rel
        if not path.exists() and not path.is_symlink():
            item["problem"] = "not a file of the task (a log or a path the task does not have)"
            continue
        try:
            data, longer = read_head(path, folder, max_bytes=MAX_TASK_FILE_BYTES)
        except OSError as exc:
            item["problem"] = f"not read: {exc}"
            continue
        lines = data.decode("utf-8", "replace").splitlines()
        start, end = ev.line_start, ev.line_end or ev.line_start
        lo, hi = 1, len(lines)
        if start is not None and len(lines) > 2 * CONTEXT_LINES + 20:
            lo = max(1, start - CONTEXT_LINES)
            hi = min(len(lines), (end or start) + CONTEXT_LINES)
        item["lines"] = [
            (n, lines[n - 1], start is not None and start <= n <= (end or start))
            for n in range(lo, hi + 1)
        ]
        item["cut"] = longer or lo > 1 or hi < len(lines)
        item["total_lines"] = len(lines)
    return out


def model_calls(run: Run, cell: dict[str, Any] | None) -> dict[str, Any]:
    """The cell's model calls (request messages when the provider recorded them, and the
    reply) from its model_calls blob, and its raw outputs."""
    if cell is None:
        return {"calls": [], "problem": "no cell record", "raw": None}
    text, problem = run.reader.blob(cell.get("model_calls_blob"))
    calls = []
    for line in (text or "").splitlines():
        try:
            call = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(call, dict):
            raw = call.get("raw_request")
            request: dict[str, Any] = raw if isinstance(raw, dict) else {}
            messages = request.get("messages") or request.get("input") or []
            calls.append(
                {
                    "model": call.get("model"),
                    "messages": messages if isinstance(messages, list) else [],
                    "system": request.get("system"),
                    "text": call.get("text") or "",
                    "usage": call.get("usage") or {},
                    "cost_usd": call.get("cost_usd"),
                    "finish_reason": call.get("finish_reason"),
                }
            )
    raw, raw_problem = run.reader.blob(cell.get("raw_outputs_blob"))
    return {"calls": calls, "problem": problem, "raw": raw, "raw_problem": raw_problem}


def execution_logs(run: Run, cell: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The oracle and null-agent logs of the task's static cell."""
    execution = (cell or {}).get("execution") or {}
    logs = []
    for phase in ("oracle", "null_agent"):
        data = execution.get(phase)
        if not isinstance(data, dict):
            continue
        text, problem = run.reader.blob(data.get("log_blob"))
        logs.append({"phase": phase, "data": data, "text": text, "problem": problem})
    return logs


def _as_record(cell: CellRecord | None) -> dict[str, Any] | None:
    return None if cell is None else cell.as_record()


def finding_page(view: AuditView, index: int) -> dict[str, Any] | None:
    if not 0 <= index < len(view.findings):
        return None
    finding = view.findings[index]
    static = _as_record(view.cells.get((finding.task_id, STATIC_SOURCE)))
    own = _as_record(view.cells.get((finding.task_id, finding.source)))
    fid = review.finding_id(finding)
    before, after, position = neighbours(view, index)
    return {
        "index": index,
        "previous": before,
        "next": after,
        "position": position,
        "count": len(view.findings),
        "f": finding,
        "fid": fid,
        "review_row": view.verdicts.get(fid),
        "review_error": view.review_error,
        "reviewable": reviewable(view.run) and finding.reported,
        "evidence": evidence_view(view.run, finding),
        "calls": model_calls(view.run, own) if finding.source != STATIC_SOURCE else None,
        "logs": execution_logs(view.run, static),
        "cell": own,
    }
