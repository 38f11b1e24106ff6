"""Derived views of an audit run directory: valid findings, cells, costs, counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from metaeval.exit_codes import one_line
from metaeval.protocols.audit.ensemble import ensemble_views
from metaeval.protocols.audit.execution_results import execution_lines
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.records import (
    CELL_KEY,
    CELLS,
    FINDINGS,
    STATIC_SOURCE,
    Cells,
    FindingRecord,
    ModelCell,
    StaticCell,
    read_cells,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from metaeval.records import RunDir


class RecordSource(Protocol):
    """Where records are read from: a `RunDir`, or the viewer's read-only `RunRecords`."""

    def read(self, name: str) -> list[dict]: ...

    def latest_records(self, name: str, key_fields: Sequence[str]) -> dict[tuple, dict]: ...


def final_cells(run: RecordSource) -> Cells:
    """Latest record per (task_id, source), whatever its outcome."""
    return read_cells(run.latest_records(CELLS, CELL_KEY))


def valid_findings(run: RecordSource, cells: Cells | None = None) -> list[Finding]:
    """Findings of the attempts that completed their cell (`findings_written`); orphans of
    killed attempts are left out.

    `cells` is `final_cells(run)` when the caller already read it."""
    cells = final_cells(run) if cells is None else cells
    attempts = {key: rec.attempt for key, rec in cells.items() if rec.findings_written}
    findings = []
    for data in run.read(FINDINGS):
        rec = FindingRecord.model_validate(data)
        if attempts.get((rec.task_id, rec.source)) == rec.attempt:
            findings.append(rec.finding)
    return findings


@dataclass(frozen=True)
class AuditRecords:
    """The run's records read once, for the summary and the reports of one command."""

    cells: Cells  # latest record per (task_id, source)
    findings: list[Finding]  # valid findings (see `valid_findings`) at or above `min_tier`
    min_tier: str | None = None  # `--min-tier`: weaker evidence is left out of the views
    below_tier: int = 0  # valid findings left out by `min_tier`


def read_records(run: RunDir, min_tier: str | None = None) -> AuditRecords:
    """Read the cell records and the valid findings of `run` once; with `min_tier`, only
    findings whose evidence tier is that strong (executed > self-contained > assumed)."""
    cells = final_cells(run)
    findings = valid_findings(run, cells)
    kept = [f for f in findings if f.at_least(min_tier)]
    return AuditRecords(cells, kept, min_tier, len(findings) - len(kept))


def model_sources(cells: Cells) -> list[str]:
    """Model sources that took part (static excluded), sorted."""
    return sorted({source for _, source in cells if source != STATIC_SOURCE})


def cost_rows(cells: Cells) -> list[dict[str, Any]]:
    """Tokens and dollars per task per model, from the final cell records (a model cell that
    raised counts with no tokens and an unknown cost)."""
    rows = []
    for (task_id, source), rec in sorted(cells.items()):
        if source == STATIC_SOURCE or not rec.is_final:
            continue
        model = rec if isinstance(rec, ModelCell) else None
        rows.append(
            {
                "task_id": task_id,
                "source": source,
                "input_tokens": model.input_tokens if model else 0,
                "output_tokens": model.output_tokens if model else 0,
                "cost_usd": model.cost_usd if model else None,
            }
        )
    return rows


def cost_by_source(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Total dollars per model; None when any of its calls had no known price."""
    totals: dict[str, float | None] = {}
    for row in rows:
        current = totals.get(row["source"], 0.0)
        cost = row["cost_usd"]
        totals[row["source"]] = None if current is None or cost is None else current + cost
    return totals


def failed_cells(cells: Cells) -> list[dict[str, str]]:
    """Cells that did not end ok, with kind (infra_error: retried on a rerun; error: final)
    and a one-line reason, in key order."""
    return [
        {
            "task_id": task,
            "source": source,
            "kind": "infra_error" if rec.infra_error else "error",
            "reason": one_line(rec.error or rec.status),
        }
        for (task, source), rec in sorted(cells.items())
        if rec.infra_error or rec.status != "ok"
    ]


def static_cells(cells: Cells) -> list[StaticCell]:
    """The static source's cells, in key order."""
    return [rec for _, rec in sorted(cells.items()) if isinstance(rec, StaticCell)]


def summarize_run(
    run: RunDir, audit: Any | None = None, records: AuditRecords | None = None
) -> dict[str, Any]:
    """The audit's summary.json: counts per source, tiers, failures, costs, ensemble sizes.

    `records` are the run's records when the caller already read them (`read_records`)."""
    records = read_records(run) if records is None else records
    cells, findings = records.cells, records.findings
    reported = [f for f in findings if f.reported]
    costs = cost_rows(cells)
    by_source = cost_by_source(costs)
    models = model_sources(cells)
    views = ensemble_views([f for f in reported if f.source != STATIC_SOURCE])
    known_costs = [v for v in by_source.values() if v is not None]
    total_cost = sum(known_costs) if len(known_costs) == len(by_source) else None
    return {
        "tasks": len({task for task, _ in cells}),
        "tasks_flagged": len({f.task_id for f in reported}),
        "models": models,
        "cells": len(cells),
        "infra_errors": sum(1 for rec in cells.values() if rec.infra_error),
        "audit_failures": sorted(
            f"{task}|{source}" for (task, source), rec in cells.items() if rec.failed_audit
        ),
        "failed_cells": failed_cells(cells),
        "findings_total": len(findings),
        "findings_reported": len(reported),
        "findings_suppressed": len(findings) - len(reported),
        "findings_by_source": dict(Counter(f.source for f in reported)),
        "findings_by_subcategory": dict(Counter(f.subcategory for f in reported)),
        "findings_by_tier": dict(Counter(f.tier for f in reported)),
        "findings_by_evidence": dict(Counter(f.evidence_tier for f in reported)),
        # absence claims no run in the task's image confirmed (kept at Low by the tier rule)
        "absence_unconfirmed": sum(
            1 for f in reported if f.claim == "absence" and f.evidence_tier == "assumed"
        ),
        **(
            {"min_evidence_tier": records.min_tier, "findings_below_min_tier": records.below_tier}
            if records.min_tier
            else {}
        ),
        "evidence_unverified": sum(1 for f in reported if f.evidence_verified is False),
        "ensemble": {name: len(items) for name, items in views.items()},
        "input_tokens": sum(r["input_tokens"] for r in costs),
        "output_tokens": sum(r["output_tokens"] for r in costs),
        "cost_usd_by_model": by_source,
        "cost_usd": total_cost,
        "skipped_dirs": [list(s) for s in getattr(audit, "skipped", [])],
        "execution": execution_lines(
            [
                (not rec.execution.skipped, str(rec.execution.skipped or ""))
                for rec in static_cells(cells)
                if rec.execution is not None
            ]
        ),
    }
