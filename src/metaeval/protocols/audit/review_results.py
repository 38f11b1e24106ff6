"""What a run's review sheet (`review.py`) gives: reviewed precision per source and over all
sources (confirmed / (confirmed + rejected) among the reported findings), a gold file of the
confirmed findings for the next audit, and the lines `metaeval audit review` prints."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from metaeval.protocols.audit.ensemble import merge_findings
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.gold import load_gold
from metaeval.protocols.audit.review import (
    ALL_SOURCES,
    VERDICTS,
    ReviewRow,
    finding_id,
    read_sheet,
    reported,
    sheet_path,
    verdicts,
    write_review,
)
from metaeval.records.durable import atomic_write
from metaeval.report.markdown import markdown_table


class SourceReview(BaseModel):
    """The verdicts on one source's reported findings."""

    name: str
    n_findings: int
    confirmed: int = 0
    rejected: int = 0
    unsure: int = 0
    unreviewed: int = 0
    precision: float | None = None  # confirmed / (confirmed + rejected); None when both are 0


class ReviewSummary(BaseModel):
    """Reviewed precision per source and over all sources, from the run's review sheet."""

    path: str
    rows: list[SourceReview] = Field(default_factory=list)
    stale: int = 0  # sheet rows whose finding the run no longer reports

    def columns(self) -> list[str]:
        return ["Source", "Findings", "Confirmed", "Rejected", "Unsure", "Unreviewed",
                "Reviewed precision"]  # fmt: skip

    def table_rows(self) -> list[list[str]]:
        return [
            [
                r.name,
                str(r.n_findings),
                str(r.confirmed),
                str(r.rejected),
                str(r.unsure),
                str(r.unreviewed),
                "n/a" if r.precision is None else f"{100 * r.precision:.1f}",
            ]
            for r in self.rows
        ]

    def explanation(self) -> str:
        text = (
            f"From the review sheet {self.path}: reviewed precision = confirmed / (confirmed + "
            "rejected); unsure and unreviewed findings are in neither term; percentages."
        )
        if self.stale:
            text += f" {self.stale} row(s) of the sheet name findings this run no longer has."
        return text

    def to_markdown(self) -> str:
        return "\n".join(
            [
                "## Precision against the reviewed findings\n",
                self.explanation() + "\n",
                markdown_table(self.columns(), self.table_rows()),
            ]
        )


def _tally(name: str, findings: list[Finding], given: dict[str, ReviewRow]) -> SourceReview:
    counts = {"confirmed": 0, "rejected": 0, "unsure": 0, "": 0}
    for f in findings:
        row = given.get(finding_id(f))
        counts[row.verdict if row else ""] += 1
    judged = counts["confirmed"] + counts["rejected"]
    return SourceReview(
        name=name,
        n_findings=len(findings),
        confirmed=counts["confirmed"],
        rejected=counts["rejected"],
        unsure=counts["unsure"],
        unreviewed=counts[""],
        precision=counts["confirmed"] / judged if judged else None,
    )


def summarize(findings: list[Finding], given: dict[str, ReviewRow], path: str) -> ReviewSummary:
    shown = reported(findings)
    sources = sorted({f.source for f in shown})
    rows = [_tally(s, [f for f in shown if f.source == s], given) for s in sources]
    if len(sources) > 1:
        rows.append(_tally(ALL_SOURCES, shown, given))
    ids = {finding_id(f) for f in shown}
    return ReviewSummary(path=path, rows=rows, stale=sum(1 for k in given if k not in ids))


def review_summary(run_dir: Path, findings: list[Finding]) -> ReviewSummary | None:
    """The reviewed precision of `findings` (the run's valid findings) from the run's sheet;
    None when the run has no sheet. What `audit score` adds to its report."""
    given = verdicts(run_dir)
    if not given:
        return None
    return summarize(findings, given, str(sheet_path(run_dir)))


# -------------------------------------------------------------------------------------- gold


def _evidence_text(f: Finding, note: str) -> str:
    cites = []
    for ev in f.evidence:
        lines = ""
        if ev.line_start is not None:
            end = ev.line_end if ev.line_end not in (None, ev.line_start) else None
            lines = f":{ev.line_start}" + (f"-{end}" if end is not None else "")
        cites.append(
            f"{ev.file}{lines}" + (f" ({' '.join(ev.snippet.split())[:200]})" * bool(ev.snippet))
        )
    parts = ["; ".join(cites)] if cites else []
    if note:
        parts.append(f"reviewer: {note}")
    return " | ".join(parts)


def gold_issues(findings: list[Finding], given: dict[str, ReviewRow]) -> dict[str, list[dict]]:
    """The confirmed findings as gold issues per task: duplicates across sources (the
    ensemble's merge rule) become one issue, with the id of their representative."""
    confirmed = [
        f
        for f in reported(findings)
        if (r := given.get(finding_id(f))) and r.verdict == "confirmed"
    ]
    out: dict[str, list[dict]] = {}
    for m in merge_findings(confirmed):
        notes = [
            given[finding_id(f)].note
            for f in confirmed
            if f.task_id == m.task_id and f.source in m.sources and given[finding_id(f)].note
        ]
        issue = {
            "id": finding_id(m),
            "description": " ".join(f"{m.title}. {m.description}".split()),
            "category": m.subcategory,
            "evidence": _evidence_text(m, " / ".join(dict.fromkeys(notes))),
        }
        out.setdefault(m.task_id, []).append(issue)
    return out


def write_gold(path: Path, findings: list[Finding], given: dict[str, ReviewRow]) -> tuple[int, int]:
    """Write the confirmed findings as a gold file (docs/formats/gold.md). An existing gold
    file at `path` is kept and added to: its issues stay, confirmed findings whose id it does
    not hold yet are appended. Returns (issues added, issues in the file)."""
    path = Path(path)
    data: dict[str, dict[str, Any]] = {}
    if os.path.lexists(path):
        for task, old in load_gold(path).tasks.items():
            data[task] = {"issues": [i.model_dump(exclude={"task_id"}) for i in old]}
    added = 0
    for task, new in gold_issues(findings, given).items():
        entry = data.setdefault(task, {"issues": []})
        known = {i["id"] for i in entry["issues"]}
        for issue in new:
            if issue["id"] not in known:
                entry["issues"].append(issue)
                added += 1
    text = json.dumps({"tasks": data}, indent=2, ensure_ascii=False) + "\n"
    atomic_write(path, text.encode("utf-8"))
    load_gold(path)  # what was written reads back as a valid gold file
    return added, sum(len(e["issues"]) for e in data.values())


# --------------------------------------------------------------------------------------- CLI


def review_cli(run_dir: Path, to_gold: Path | None) -> list[str]:
    """`metaeval audit review`: write the sheet, or (with `to_gold`) the gold file; the lines
    to print."""
    from metaeval.protocols.audit.summary import valid_findings
    from metaeval.records import RunDir

    run = RunDir.open_existing(run_dir, "audit")
    try:
        findings = valid_findings(run)
    finally:
        run.close()
    if to_gold is not None:
        given = {r.finding_id: r for r in read_sheet(sheet_path(run_dir))}
        added, total = write_gold(to_gold, findings, given)
        return [
            f"gold: {to_gold}: {added} confirmed finding(s) added, {total} issue(s) in the file",
            f"score the next audit with: metaeval audit score RUN --gold {to_gold}",
        ]
    path, rows = write_review(run_dir, findings)
    summary = summarize(findings, {r.finding_id: r for r in rows}, str(path))
    done = sum(1 for r in rows if r.verdict)
    lines = [
        f"review sheet: {path} ({len(rows)} finding(s), {done} with a verdict); set the verdict "
        f"column to {', '.join(VERDICTS)} and add a note, then run `metaeval audit score` "
        "or `metaeval audit review --to-gold FILE`",
    ]
    for r in summary.rows:
        shown = "n/a" if r.precision is None else f"{100 * r.precision:.1f}%"
        lines.append(
            f"{r.name}: reviewed precision {shown} ({r.confirmed} confirmed, {r.rejected} "
            f"rejected, {r.unsure} unsure, {r.unreviewed} not reviewed)"
        )
    return lines
