"""The audit report: one data model, rendered as Markdown (`report_markdown`) or, here, as
self-contained HTML.

The HTML uses the jinja2 template ``templates/report.html.j2`` (package data) with autoescape
on, inline CSS and a small inline script; it loads nothing from elsewhere. Findings below the
report threshold (confidence < 0.3) are left out; their number is stated.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Literal

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup
from pydantic import BaseModel, Field

from metaeval.protocols.audit.execution_results import execution_lines
from metaeval.protocols.audit.findings import EVIDENCE_TIERS, SEVERITY_ORDER, Evidence, Finding
from metaeval.protocols.audit.score_report import (
    SCORE_COLUMNS,
    STRATEGY_COLUMNS,
    ScoreReport,
    fmt_cost,
    fmt_pct,
)
from metaeval.protocols.audit.tables import PaperTables

TEMPLATE_PACKAGE = "metaeval.protocols.audit"
HTML_TEMPLATE = "templates/report.html.j2"

CheckOutcome = Literal["pass", "fail", "skipped", "error"]


class TaskEntry(BaseModel):
    """One task of the audited benchmark and what happened to it."""

    task_id: str
    status: str = "audited"  # e.g. audited, skipped, failed
    skip_reason: str | None = None
    n_files: int = 0
    cuts: list[str] = Field(default_factory=list)  # content left out of the audit context
    audit_failures: dict[str, str] = Field(default_factory=dict)  # model -> error message
    oracle: CheckOutcome | None = None  # reference solution through the tests
    null_agent: CheckOutcome | None = None  # empty solution through the tests
    execution_notes: str = ""


class CostRow(BaseModel):
    """Tokens and cost of one model on one task (cost None: unknown price)."""

    task_id: str
    source: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class CostTotals(BaseModel):
    """Sums over cost rows; `cost_usd` sums only known costs, `complete` says if all were."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    n_unknown: int = 0

    @property
    def complete(self) -> bool:
        return self.n_unknown == 0

    def cost_text(self) -> str:
        """The total as text: "n/a" when nothing is known, marked incomplete when partial."""
        if self.n_unknown and self.cost_usd == 0.0:
            return f"n/a (incomplete: {self.n_unknown} unknown)"
        text = fmt_cost(self.cost_usd)
        if self.n_unknown:
            return f">= {text} (incomplete: {self.n_unknown} unknown)"
        return text


def cost_totals(rows: list[CostRow]) -> CostTotals:
    totals = CostTotals()
    for r in rows:
        totals.input_tokens += r.input_tokens
        totals.output_tokens += r.output_tokens
        if r.cost_usd is None:
            totals.n_unknown += 1
        else:
            totals.cost_usd += r.cost_usd
    return totals


class AuditReportData(BaseModel):
    """Everything the audit report shows."""

    benchmark: str
    run_id: str
    models: list[str] = Field(default_factory=list)
    tier: str = ""
    created_at: str | None = None
    tasks: list[TaskEntry] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)  # merged view, evidence-verified
    suppressed_count: int = 0  # low-confidence findings not included in `findings`
    costs: list[CostRow] = Field(default_factory=list)
    score: ScoreReport | None = None
    tables: PaperTables | None = None  # by subcategory and source, protocols, cost per task

    @property
    def reported_findings(self) -> list[Finding]:
        """Findings at or above the report threshold, most severe and confident first."""
        return sort_findings([f for f in self.findings if f.reported])

    @property
    def n_suppressed(self) -> int:
        """Low-confidence findings left out: those in `findings` plus `suppressed_count`."""
        return self.suppressed_count + sum(1 for f in self.findings if not f.reported)

    @property
    def totals(self) -> CostTotals:
        return cost_totals(self.costs)

    def totals_by_source(self) -> dict[str, CostTotals]:
        by: dict[str, list[CostRow]] = defaultdict(list)
        for r in self.costs:
            by[r.source].append(r)
        return {source: cost_totals(rows) for source, rows in sorted(by.items())}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Severity (Critical first), then confidence (highest first), then task and title."""
    return sorted(
        findings,
        key=lambda f: (SEVERITY_ORDER[f.severity], -f.confidence, f.task_id, f.title),
    )


def evidence_location(e: Evidence) -> str:
    """``file:12-14``, ``file:12`` or ``file``."""
    if e.line_start is None:
        return e.file
    if e.line_end is None or e.line_end == e.line_start:
        return f"{e.file}:{e.line_start}"
    return f"{e.file}:{e.line_start}-{e.line_end}"


def verified_text(f: Finding) -> str:
    if f.evidence_verified is None:
        return "unchecked"
    return "yes" if f.evidence_verified else "no"


def execution_text(t: TaskEntry) -> str:
    """`oracle pass, null agent fail`, with the reason when the checks were skipped."""
    parts = []
    if t.oracle is not None:
        parts.append(f"oracle {t.oracle}")
    if t.null_agent is not None:
        parts.append(f"null agent {t.null_agent}")
    text = ", ".join(parts) or "-"
    if t.execution_notes.strip():
        text += f" ({t.execution_notes.strip()})"
    return text


def findings_summary(data: AuditReportData) -> str:
    """`N findings on M tasks (K flagged)`: K tasks have at least one reported finding."""
    findings = data.reported_findings
    flagged = len({f.task_id for f in findings})
    noun = "finding" if len(findings) == 1 else "findings"
    return f"{len(findings)} {noun} on {len(data.tasks)} tasks ({flagged} flagged)"


def severity_summary(data: AuditReportData) -> str:
    """Reported findings per severity and per evidence tier, e.g. `2 High, 1 Low; 1 executed,
    2 self-contained`."""
    findings = data.reported_findings
    if not findings:
        return "none"
    severities: Counter[str] = Counter(f.severity for f in findings)
    tiers: Counter[str] = Counter(f.evidence_tier or "assumed" for f in findings)
    by_severity = ", ".join(f"{severities[s]} {s}" for s in SEVERITY_ORDER if severities[s])
    by_tier = ", ".join(f"{tiers[t]} {t}" for t in EVIDENCE_TIERS if tiers[t])
    return f"{by_severity}; evidence: {by_tier}"


HEADLINE_ROWS = ("pooled union", "all sources (any)")


def score_headline(data: AuditReportData) -> str | None:
    """Recall and precision of the widest row (the paper's pooled union when there are
    several models, else every source merged), or None when the run is not scored."""
    if data.score is None or not data.score.rows:
        return None
    names = [r.name for r in data.score.rows]
    row = data.score.row(next((n for n in HEADLINE_ROWS if n in names), names[0]))
    return (
        f"Recall_A {fmt_pct(row.recall_a)}%, Recall_A+P {fmt_pct(row.recall_ap)}%, "
        f"Precision_A {fmt_pct(row.precision_a)}% against {row.n_gold} gold issues "
        f"(row: {row.name})"
    )


def skip_summary(data: AuditReportData) -> list[str]:
    """What the execution checks did, said once (`execution_results.execution_lines`)."""
    outcomes = [
        (
            not (t.oracle == "skipped" and t.null_agent == "skipped"),
            t.execution_notes if t.oracle == "skipped" and t.null_agent == "skipped" else "",
        )
        for t in data.tasks
        if t.oracle is not None or t.null_agent is not None
    ]
    return execution_lines(outcomes)


def suppressed_text(n: int) -> str:
    noun = "finding" if n == 1 else "findings"
    return f"{n} low-confidence {noun} suppressed, kept in findings.jsonl"


def task_order(data: AuditReportData) -> list[str]:
    """The tasks in the order the report shows them."""
    order = [t.task_id for t in data.tasks]
    seen = set(order)
    for f in data.reported_findings:
        if f.task_id not in seen:
            seen.add(f.task_id)
            order.append(f.task_id)
    return order


def findings_by_task(data: AuditReportData) -> dict[str, list[Finding]]:
    """The reported findings of each task."""
    by: dict[str, list[Finding]] = defaultdict(list)
    for f in data.reported_findings:
        by[f.task_id].append(f)
    return by


# ---------------------------------------------------------------------------------------------
# HTML


@functools.cache
def html_template() -> jinja2.Template:
    """The HTML template, compiled once per process (compiling takes about 50 ms)."""
    from metaeval.report.html import page_template

    filters: dict[str, Callable[..., object]] = {
        "cost": fmt_cost,
        "location": evidence_location,
        "verified": verified_text,
        "md": markdown_html,
        "md_inline": markdown_inline_html,
    }
    return page_template(TEMPLATE_PACKAGE, HTML_TEMPLATE, filters)


def warm_up() -> None:
    """Do the per-process work of rendering ahead: the imports, the compiled template."""
    from metaeval.report.html import shared_css  # noqa: F401

    html_template()
    _markdown()


@functools.cache
def _markdown() -> MarkdownIt:
    # CommonMark with raw HTML off: a finding's text (which may come from a model) can
    # format code and emphasis but never inject markup.
    return MarkdownIt("commonmark", {"html": False})


def markdown_html(text: str) -> Markup:
    """A finding's Markdown text (description, recommendation) as safe HTML blocks."""
    return Markup(_markdown().render(text or ""))


def markdown_inline_html(text: str) -> Markup:
    """A one-line Markdown text (a title) as safe inline HTML."""
    return Markup(_markdown().renderInline(text or ""))


def render_html(data: AuditReportData) -> str:
    """The report as one self-contained HTML page (no external assets)."""
    from metaeval.report.html import shared_css

    template = html_template()
    findings = data.reported_findings
    by_task = findings_by_task(data)
    tasks = {t.task_id: t for t in data.tasks}
    order = task_order(data)
    sections = [
        {"task_id": tid, "task": tasks.get(tid), "findings": by_task.get(tid, [])} for tid in order
    ]
    anchors = {tid: f"task-{i + 1}" for i, tid in enumerate(order)}
    counts = {tid: len(fs) for tid, fs in by_task.items()}
    score = data.score
    return template.render(
        shared_css=shared_css(),
        data=data,
        findings=findings,
        sections=sections,
        anchors=anchors,
        counts=counts,
        severity_order=SEVERITY_ORDER,
        suppressed=suppressed_text(data.n_suppressed),
        n_suppressed=data.n_suppressed,
        totals=data.totals,
        totals_by_source=data.totals_by_source(),
        execution_text=execution_text,
        findings_summary=findings_summary(data),
        severity_summary=severity_summary(data),
        score_headline=score_headline(data),
        skip_lines=skip_summary(data),
        score=score,
        score_columns=SCORE_COLUMNS,
        strategy_columns=STRATEGY_COLUMNS,
    )
