"""Turn an audit run directory into reports and scores (used by `audit run/score/report`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError
from metaeval.models.registry import get_model
from metaeval.protocols.audit.ensemble import ensemble_views, merge_findings
from metaeval.protocols.audit.gold import Gold, load_gold
from metaeval.protocols.audit.judge import (
    CATEGORY_JUDGE,
    JUDGE_PROMPT_TEMPLATE,
    CategoryJudge,
    Judge,
)
from metaeval.protocols.audit.pooled import add_pooled_rows
from metaeval.protocols.audit.records import (
    JUDGE_CACHE,
    REPORT_HTML,
    REPORT_MD,
    SCORE_FILE,
    SCORE_MD,
    STATIC_SOURCE,
    CellRecord,
    Cells,
    ExecutionSummary,
    PhaseOutcome,
    StaticCell,
)
from metaeval.protocols.audit.report import (
    AuditReportData,
    CheckOutcome,
    CostRow,
    TaskEntry,
    render_html,
)
from metaeval.protocols.audit.report_markdown import render_markdown
from metaeval.protocols.audit.review_results import review_summary
from metaeval.protocols.audit.score_report import ScoreReport
from metaeval.protocols.audit.scoring import score
from metaeval.protocols.audit.summary import (
    AuditRecords,
    cost_by_source,
    cost_rows,
    final_cells,
    model_sources,
    read_records,
    valid_findings,
)
from metaeval.protocols.audit.tables import paper_tables
from metaeval.records import RunDir
from metaeval.records.durable import atomic_write
from metaeval.records.nofollow import read_capped
from metaeval.report.markdown import md_document

ALL_SOURCES = "all sources (any)"
MAX_SCORE_BYTES = 64 * 1024 * 1024


def _phase_outcome(phase: PhaseOutcome | None) -> CheckOutcome | None:
    if phase is None:
        return None
    if phase.ran is False:
        return "skipped"
    if phase.passed is not None:
        return "pass" if phase.passed else "fail"
    return "pass" if phase.reward is not None and phase.reward >= 1 else "fail"


def _task_entries(cells: Cells) -> list[TaskEntry]:
    entries: dict[str, TaskEntry] = {}
    for (task_id, source), rec in sorted(cells.items()):
        entry = entries.setdefault(task_id, TaskEntry(task_id=task_id))
        entry.cuts = sorted(set(entry.cuts) | set(rec.cut))
        if rec.infra_error:
            entry.audit_failures[source] = f"infrastructure error: {(rec.error or '')[:300]}"
        elif rec.failed_audit:
            entry.audit_failures[source] = rec.error or "malformed output"
        if isinstance(rec, StaticCell):
            _static_entry(entry, rec)
    return list(entries.values())


def _static_entry(entry: TaskEntry, rec: StaticCell) -> None:
    """What the static source's cell tells about the task: checks that failed on it, its
    size, and the execution checks' outcome."""
    for check, error in sorted((rec.check_errors or {}).items()):
        # a static check that failed on this task: its findings are missing, say so
        entry.audit_failures[f"{rec.source} check {check}"] = str(error)[:300]
    if rec.n_files is not None:
        entry.n_files = rec.n_files
    execution = rec.execution or ExecutionSummary()
    if execution.skipped:
        entry.oracle = entry.null_agent = "skipped"
        entry.execution_notes = "; ".join(
            str(n) for n in (execution.skipped, execution.mismatch) if n
        )
    else:
        entry.oracle = _phase_outcome(execution.oracle)
        entry.null_agent = _phase_outcome(execution.null_agent)
        notes = [execution.backend or ""]
        if execution.stand_in:
            stand_in = ", ".join(execution.stand_in)
            notes.append(f"{stand_in} played by a local stand-in image")
        if execution.approximate:
            notes.append("approximating the task's image: findings capped at Low")
        if execution.mismatch:
            notes.append(str(execution.mismatch))
        entry.execution_notes = "; ".join(n for n in notes if n)
    if rec.config_error:
        entry.execution_notes += f" task.toml: {rec.config_error}"


def report_data(
    run: RunDir, score_report: ScoreReport | None = None, records: AuditRecords | None = None
) -> AuditReportData:
    """Everything the Markdown and HTML reports show, from the run's records (`records` when
    the caller already read them)."""
    manifest = run.manifest
    config = manifest.get("config", {})
    records = read_records(run) if records is None else records
    cells, findings = records.cells, records.findings
    reported = [f for f in findings if f.reported]
    return AuditReportData(
        benchmark=str(config.get("benchmark", "")),
        run_id=run.path.name,
        # every model the run used: the config names this invocation's, the cells also
        # those of earlier invocations into the same directory (whose errors the report shows)
        models=list(dict.fromkeys([*config.get("models", []), *model_sources(cells)])),
        tier=str(config.get("tier", "")),
        created_at=manifest.get("created_at"),
        tasks=_task_entries(cells),
        findings=merge_findings(reported),
        suppressed_count=len(findings) - len(reported),
        costs=[CostRow(**row) for row in cost_rows(cells)],
        score=score_report,
        tables=paper_tables(findings, cells),
    )


def write_reports(
    run: RunDir, score_report: ScoreReport | None = None, records: AuditRecords | None = None
) -> list[Path]:
    """Write report.md and report.html (with scores when given or already computed)."""
    if score_report is None:
        score_report = load_score(run.path)
    data = report_data(run, score_report, records)
    paths = [run.path / REPORT_MD, run.path / REPORT_HTML]
    atomic_write(paths[0], render_markdown(data).encode("utf-8"))
    atomic_write(paths[1], render_html(data).encode("utf-8"))
    return paths


def load_score(run_dir: Path) -> ScoreReport | None:
    path = run_dir / SCORE_FILE
    data = read_capped(path, MAX_SCORE_BYTES)  # a link, FIFO or device is refused
    if data is None:
        return None
    try:
        return ScoreReport.model_validate_json(data)
    except ValueError as exc:
        raise ConfigError(f"not a score report: {exc}", file=str(path)) from None


def _open_existing(run_dir: Path) -> RunDir:
    """Open an existing audit run directory for reading and re-rendering."""
    return RunDir.open_existing(run_dir, "audit")


def rerender(run_dir: Path) -> list[Path]:
    """Re-render the reports of an audit run from its records."""
    run = _open_existing(run_dir)
    try:
        min_tier = run.manifest.get("config", {}).get("min_evidence_tier")
        return write_reports(run, records=read_records(run, min_tier))
    finally:
        run.close()


def score_groups(
    run: RunDir, min_tier: str | None = None
) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """Rows to score and the suppressed count of the rows of merged findings: each source
    alone (its findings below the report threshold included, counted as suppressed), then
    the merged rules over model sources, then every source merged; with `min_tier`, only
    findings whose evidence is that strong."""
    valid = [f for f in valid_findings(run) if f.at_least(min_tier)]
    reported = [f for f in valid if f.reported]
    groups: dict[str, list[Any]] = {}
    for source in sorted({f.source for f in valid} | {s for _, s in final_cells(run)}):
        groups[source] = [f for f in valid if f.source == source]
    models = [s for s in groups if s != STATIC_SOURCE]
    hidden = {s: sum(1 for f in items if not f.reported) for s, items in groups.items()}
    suppressed: dict[str, int] = {}
    if len(models) >= 2:
        views = ensemble_views([f for f in reported if f.source != STATIC_SOURCE])
        for name, items in views.items():
            groups[f"merged {name}"] = items
            suppressed[f"merged {name}"] = sum(hidden[m] for m in models)
    groups[ALL_SOURCES] = merge_findings(reported)
    suppressed[ALL_SOURCES] = sum(hidden.values())
    return groups, suppressed


def coverage_warnings(cells: Cells, gold: Gold, models: list[str]) -> list[str]:
    """What the scores cannot have seen: gold tasks the run has no record of, and gold tasks a
    model did not audit (no completed cell). Their issues still count in recall's denominator."""
    run_tasks = {task for task, _ in cells}
    gold_tasks = sorted(gold.tasks)
    warnings = []
    absent = [t for t in gold_tasks if t not in run_tasks]
    if absent:
        missed = sum(len(gold.issues_for(t)) for t in absent)
        warnings.append(
            f"{len(absent)} gold task(s) are not in this run ({missed} gold issue(s) there "
            f"count as missed by every row): {', '.join(absent)}."
        )
    for model in models:
        unaudited = [
            t
            for t in gold_tasks
            if t in run_tasks and _status(cells.get((t, model))) != "ok" and gold.issues_for(t)
        ]
        if unaudited:
            warnings.append(
                f"{model} did not audit {len(unaudited)} gold task(s) with issues (no completed "
                f"cell), so their issues count as missed by it: {', '.join(unaudited)}."
            )
    return warnings


def earlier_judge(run_dir: Path) -> str | None:
    """The judge of the run's score.json, None when the run has no readable score yet."""
    try:
        data = json.loads((run_dir / SCORE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    judge = data.get("judge_model") if isinstance(data, dict) else None
    return judge if isinstance(judge, str) else None


def score_run(
    run_dir: Path, gold_path: Path, judge_model: str, min_tier: str | None = None
) -> ScoreReport:
    """Judge findings against the gold file, write score.json/score.md, refresh the reports."""
    gold = load_gold(gold_path)
    if judge_model == CATEGORY_JUDGE:
        judge: Any = CategoryJudge()
    else:
        judge = Judge(get_model(judge_model), run_dir / JUDGE_CACHE)
    run = _open_existing(run_dir)
    try:
        cells = final_cells(run)
        costs: dict[str, float | None] = {STATIC_SOURCE: 0.0}  # checks make no model calls
        costs.update(cost_by_source(cost_rows(cells)))
        groups, suppressed = score_groups(run, min_tier)
        models = model_sources(cells)
        model_costs = [costs.get(m) for m in models]
        together = None if None in model_costs else sum(c or 0.0 for c in model_costs)
        costs.update({row: together for row in suppressed})  # every merged row: all models
        report = score(groups, gold, judge, costs=costs, suppressed=suppressed)
        add_pooled_rows(report, models)
        # every source merged stays the last row (the viewer's one-line headline reads it)
        report.rows.sort(key=lambda row: row.name == ALL_SOURCES)
        report.warnings = coverage_warnings(cells, gold, models)
        records = read_records(run, min_tier)
        tables = paper_tables(records.findings, cells)
        report.review = review_summary(run.path, records.findings)
        payload = report.model_dump(mode="json")
        payload["judge_prompt_sha256"] = _sha(JUDGE_PROMPT_TEMPLATE)
        payload["tables"] = tables.model_dump(mode="json")
        atomic_write(run.path / SCORE_FILE, json.dumps(payload, indent=2).encode("utf-8"))
        markdown = md_document(report.to_markdown() + "\n" + tables.to_markdown())
        atomic_write(run.path / SCORE_MD, markdown.encode("utf-8"))
        write_reports(run, report, records)
        return report
    finally:
        run.close()


def _status(cell: CellRecord | None) -> str | None:
    return None if cell is None else cell.status


def _sha(text: str) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
