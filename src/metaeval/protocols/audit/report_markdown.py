"""The audit report as Markdown (`report.md`), from the report's one data model
(`report.AuditReportData`; the HTML page renders the same data)."""

from __future__ import annotations

from metaeval.protocols.audit.report import (
    AuditReportData,
    evidence_location,
    execution_text,
    findings_by_task,
    findings_summary,
    score_headline,
    severity_summary,
    skip_summary,
    suppressed_text,
    task_order,
    verified_text,
)
from metaeval.protocols.audit.score_report import fmt_cost
from metaeval.report.markdown import markdown_table, md_code, md_document, md_fence, md_text


def _one_line(text: str) -> str:
    return md_text(" ".join(text.split()))


def render_markdown(data: AuditReportData) -> str:
    """The report as GitHub-flavoured Markdown."""
    out = _md_header(data) + _md_findings(data) + _md_tasks(data)
    out += _md_task_details(data) + _md_cost(data)
    if data.tables is not None and data.tables.to_markdown():
        out.append("## Findings and cost by model\n")
        out.append(data.tables.to_markdown())
    if data.score is not None:
        out.append(data.score.to_markdown())
    return md_document("\n".join(out).rstrip() + "\n")


def _md_header(data: AuditReportData) -> list[str]:
    """Title and the headline numbers, before any table."""
    totals = data.totals
    out: list[str] = [
        f"# Benchmark audit: {_one_line(data.benchmark)}\n",
        f"- Run: {md_code(data.run_id)}",
        f"- Models: {_one_line(', '.join(data.models)) or '-'}",
        f"- Tier: {_one_line(data.tier) or '-'}",
    ]
    if data.created_at:
        out.append(f"- Created: {data.created_at}")
    out += [
        f"- Tasks: {len(data.tasks)}",
        f"- Findings reported: {findings_summary(data)} ({suppressed_text(data.n_suppressed)})",
        f"- By severity: {severity_summary(data)}",
        *([f"- Scores: {_one_line(headline)}"] if (headline := score_headline(data)) else []),
        *[f"- Execution checks skipped: {_one_line(line)}" for line in skip_summary(data)],
        f"- Total cost ($): {totals.cost_text()}",
        "",
        "## Findings\n",
    ]
    return out


def _md_findings(data: AuditReportData) -> list[str]:
    findings = data.reported_findings
    out: list[str] = []
    if findings:
        out.append(
            markdown_table(
                [
                    "Task",
                    "Subcategory",
                    "Severity",
                    "Type",
                    "Evidence",
                    "Confidence",
                    "Title",
                    "Sources",
                    "Evidence verified",
                ],
                [
                    [
                        f.task_id,
                        f.subcategory,
                        f.severity,
                        f.finding_type,
                        f.evidence_tier or "-",
                        f"{f.confidence:.2f} ({f.tier})",
                        " ".join(f.title.split()),
                        ", ".join(f.sources),
                        verified_text(f),
                    ]
                    for f in findings
                ],
            )
        )
    else:
        out.append("No findings at or above the report threshold.\n")
    out.append(f"_{suppressed_text(data.n_suppressed)}._\n")
    return out


def _md_tasks(data: AuditReportData) -> list[str]:
    out: list[str] = []
    out.append("## Tasks\n")
    out.append(
        markdown_table(
            ["Task", "Status", "Files", "Cuts", "Audit failures", "Execution checks"],
            [
                [
                    t.task_id,
                    t.status + (f" ({t.skip_reason})" if t.skip_reason else ""),
                    str(t.n_files),
                    "; ".join(t.cuts) or "-",
                    "; ".join(f"{m}: {' '.join(e.split())}" for m, e in t.audit_failures.items())
                    or "-",
                    execution_text(t),
                ]
                for t in data.tasks
            ],
        )
    )
    return out


def _md_task_details(data: AuditReportData) -> list[str]:
    out: list[str] = []
    by_task = findings_by_task(data)
    for task_id in task_order(data):
        task_findings = by_task.get(task_id, [])
        if not task_findings:
            continue
        out.append(f"### {_one_line(task_id)}\n")
        for f in task_findings:
            meta = (
                f"{f.subcategory} · {f.finding_type} · evidence {f.evidence_tier} · "
                f"confidence {f.confidence:.2f} "
                f"({f.tier}) · sources: {', '.join(f.sources)} · evidence verified: "
                f"{verified_text(f)}"
            )
            out.append(
                f"#### [{_one_line(f.severity)}] {_one_line(f.title)}\n\n{_one_line(meta)}\n"
            )
            out.append(f"{md_text(f.description)}\n")
            if f.tier_reason:
                out.append(f"**Evidence tier:** {f.evidence_tier}: {md_text(f.tier_reason)}\n")
            if f.recommendation:
                out.append(f"**Recommendation:** {md_text(f.recommendation)}\n")
            for problem in f.evidence_problems:
                out.append(f"- evidence problem: {_one_line(problem)}")
            if f.evidence_problems:
                out.append("")
            for e in f.evidence:
                out.append(f"{md_code(evidence_location(e))}\n")
                if e.snippet:
                    out.append(md_fence(e.snippet) + "\n")
    return out


def _md_cost(data: AuditReportData) -> list[str]:
    totals = data.totals
    out: list[str] = []
    out.append("## Cost\n")
    rows: list[list[str]] = [
        [r.task_id, r.source, str(r.input_tokens), str(r.output_tokens), fmt_cost(r.cost_usd)]
        for r in data.costs
    ]
    for source, t in data.totals_by_source().items():
        rows.append(
            [
                "**subtotal**",
                source,
                str(t.input_tokens),
                str(t.output_tokens),
                t.cost_text(),
            ]
        )
    rows.append(
        [
            "**total**",
            "",
            str(totals.input_tokens),
            str(totals.output_tokens),
            totals.cost_text(),
        ]
    )
    out.append(
        markdown_table(["Task", "Source", "Input tokens", "Output tokens", "Cost ($)"], rows)
    )
    if not totals.complete:
        out.append(
            f"Total is incomplete: {totals.n_unknown} cost(s) unknown (no price); "
            "they are not counted as 0.\n"
        )
    return out
