"""The matrix report: AIE Bench Table 3/4 in its shape, per cell, from the cells' bundles.

Per cell: baseline and best descendant optimize accuracy (%) and their delta (pp), the
baseline's spread when it was evaluated repeatedly, optionally the same on held-out, trial
outcomes (promoted, rejected, invalid by class: meta-agent failure, target failure,
evaluation framework failure), and cost (meta-agent, target). The best descendant is the
final promoted candidate (each promotion is a strict gain over its parent, so the lineage's
last is its best; `bundle.benchmark_summary`); with none promoted it is the baseline. A cell
whose bundle holds no finished run is shown as such, never as zero.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from metaeval.protocols.improve.matrix.cells import Cell
from metaeval.protocols.improve.records import LEDGER

CLASSES = ("meta_agent_failure", "target_agent_failure", "evaluation_framework_failure")
REPORT_TEXT = "matrix_report.txt"
REPORT_HTML = "matrix_report.html"
SUMMARY = "matrix_summary.json"


class CellRow(BaseModel):
    """One row of the matrix report (scores as fractions; None when not known)."""

    cell: str
    lane: str
    benchmark: str
    seed: int
    status: str  # finished | partial | not run | failed: <why>
    trials: int = 0
    trial_budget: int | None = None
    baseline: float | None = None
    best: float | None = None
    delta: float | None = None
    spread: float | None = None
    held_out_baseline: float | None = None
    held_out_best: float | None = None
    promoted: int = 0
    rejected: int = 0
    invalid: dict[str, int] = {}
    meta_agent_cost_usd: float | None = None
    target_cost_usd: float | None = None


def _ledger(bundle: Path) -> list[dict[str, Any]]:
    path = bundle / LEDGER
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:  # a torn last line of a killed run
            continue
    return rows


def cell_row(cell: Cell, error: str | None = None) -> CellRow:
    """The cell's row, read from its bundle's ledger and summary."""
    row = CellRow(
        cell=cell.id, lane=cell.lane, benchmark=cell.benchmark, seed=cell.seed, status="not run"
    )
    entries = _ledger(cell.bundle)
    decisions = Counter(e.get("decision") for e in entries)
    row.trials = len(entries)
    row.promoted, row.rejected = decisions["promoted"], decisions["rejected"]
    classes = Counter(e.get("failure_class") for e in entries if e.get("failure_class"))
    row.invalid = {name: classes[name] for name in CLASSES}
    summary_path = cell.bundle / "lineage_summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))["summary"]
        row.trial_budget = summary["trial_budget"]
        row.baseline = summary["baseline"]["optimize_score"]
        row.best = summary["final"]["optimize_score"]
        row.delta = summary["final"]["gain_optimize"]
        row.held_out_baseline = summary["baseline"]["held_out_score"]
        row.held_out_best = summary["final"]["held_out_score"]
        row.spread = (summary.get("baseline_noise") or {}).get("spread")
        row.meta_agent_cost_usd = summary.get("meta_agent_cost_usd")
        row.target_cost_usd = summary.get("target_cost_usd")
        finished = summary["trials_consumed"] == len(entries) >= summary["trial_budget"]
        row.status = "finished" if finished else "partial"
    elif entries:
        row.status = "partial"
    if error:
        row.status = f"failed: {error}"
    return row


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _pp(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}"


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


HEADERS = (
    "lane",
    "benchmark",
    "seed",
    "baseline %",
    "best descendant %",
    "delta pp",
    "baseline spread pp",
    "held-out baseline %",
    "held-out best %",
    "trials",
    "promoted",
    "rejected",
    "invalid: meta-agent",
    "invalid: target",
    "invalid: framework",
    "meta-agent cost",
    "target cost",
    "status",
)


def row_cells(row: CellRow) -> list[str]:
    """A row's values as the report prints them, in `HEADERS` order."""
    spread = "-" if row.spread is None else f"{100 * row.spread:.1f}"
    budget = "?" if row.trial_budget is None else str(row.trial_budget)
    return [
        row.lane,
        row.benchmark,
        str(row.seed),
        _pct(row.baseline),
        _pct(row.best),
        _pp(row.delta),
        spread,
        _pct(row.held_out_baseline),
        _pct(row.held_out_best),
        f"{row.trials}/{budget}",
        str(row.promoted),
        str(row.rejected),
        *(str(row.invalid.get(name, 0)) for name in CLASSES),
        _usd(row.meta_agent_cost_usd),
        _usd(row.target_cost_usd),
        row.status,
    ]


SCORES = HEADERS[:9]
"""Table 3/4 of the paper: baseline, best descendant and delta per lane and benchmark."""
OUTCOMES = (*HEADERS[:3], *HEADERS[9:])
"""What each cell's trials came to, and what they cost."""
TABLES = (
    ("Scores: optimize accuracy (AIE Bench Tables 3 and 4)", SCORES),
    ("Trials and cost", OUTCOMES),
)


def _columns(headers: tuple[str, ...], rows: list[CellRow]) -> list[list[str]]:
    """The header line and each row's values of `headers`."""
    picks = [HEADERS.index(h) for h in headers]
    return [list(headers), *([row_cells(r)[i] for i in picks] for r in rows)]


def render_text(title: str, rows: list[CellRow]) -> str:
    """The matrix as two aligned plain-text tables (scores; trials and cost)."""
    lines = [title]
    for caption, headers in TABLES:
        table = _columns(headers, rows)
        widths = [max(len(line[i]) for line in table) for i in range(len(headers))]
        lines += ["", caption, ""]
        for number, line in enumerate(table):
            lines.append("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip())
            if number == 0:
                lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n"


def render_html(title: str, rows: list[CellRow]) -> str:
    """The matrix as two HTML tables in the reports' shared style."""
    from metaeval.report.html import shared_css

    parts = []
    for caption, headers in TABLES:
        head, *body = _columns(headers, rows)
        cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        lines = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in line) + "</tr>\n"
            for line in body
        )
        parts.append(
            f"<h2>{html.escape(caption)}</h2>\n<table>\n<thead><tr>{cells}</tr></thead>\n"
            f"<tbody>\n{lines}</tbody>\n</table>\n"
        )
    return (
        '<!doctype html>\n<html><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{shared_css()}</style></head>\n"
        f"<body><h1>{html.escape(title)}</h1>\n{''.join(parts)}</body></html>\n"
    )


def write_report(output: Path, title: str, rows: list[CellRow]) -> list[Path]:
    """matrix_summary.json, matrix_report.txt and matrix_report.html under `output`."""
    from metaeval.records.durable import atomic_write

    output.mkdir(parents=True, exist_ok=True)
    written = {
        SUMMARY: json.dumps([r.model_dump() for r in rows], indent=2) + "\n",
        REPORT_TEXT: render_text(title, rows),
        REPORT_HTML: render_html(title, rows),
    }
    for name, text in written.items():
        atomic_write(output / name, text.encode())
    return [output / name for name in written]
