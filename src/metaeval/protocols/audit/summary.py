"""Derived views of an audit run directory: valid findings, cells, costs, counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from metaeval.exit_codes import one_line
from metaeval.protocols.audit.ensemble import ensemble_views
from metaeval.protocols.audit.execution_results import execution_lines
from metaeval.protocols.audit.findings import Finding
from metaeval.records.run import is_final

if TYPE_CHECKING:
    from metaeval.records import RunDir

CELLS = "audits"
FINDINGS = "findings"
STATIC_SOURCE = "static"


def final_cells(run: RunDir) -> dict[tuple[str, str], dict[str, Any]]:
    """Latest record per (task_id, source), whatever its outcome."""
    return run.latest_records(CELLS, ("task_id", "source"))


def valid_findings(
    run: RunDir, cells: dict[tuple[str, str], dict[str, Any]] | None = None
) -> list[Finding]:
    """Findings of the attempts that completed their cell; orphans of killed attempts are left out.

    `cells` is `final_cells(run)` when the caller already read it."""
    cells = final_cells(run) if cells is None else cells
    attempts: dict[tuple[str | None, str | None], Any] = {
        key: rec.get("attempt") for key, rec in cells.items() if is_final(rec)
    }
    findings = []
    for rec in run.read(FINDINGS):
        if attempts.get((rec.get("task_id"), rec.get("source"))) == rec.get("attempt"):
            findings.append(Finding.model_validate(rec))
    return findings


@dataclass(frozen=True)
class AuditRecords:
    """The run's records read once, for the summary and the reports of one command."""

    cells: dict[tuple[str, str], dict[str, Any]]  # latest record per (task_id, source)
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


def model_sources(cells: dict[tuple[str, str], dict]) -> list[str]:
    """Model sources that took part (static excluded), sorted."""
    return sorted({source for _, source in cells if source != STATIC_SOURCE})


def cost_rows(cells: dict[tuple[str, str], dict]) -> list[dict[str, Any]]:
    """Tokens and dollars per task per model, from the final cell records."""
    rows = []
    for (task_id, source), rec in sorted(cells.items()):
        if source == STATIC_SOURCE or not is_final(rec):
            continue
        usage = rec.get("usage") or {}
        rows.append(
            {
                "task_id": task_id,
                "source": source,
                "input_tokens": usage.get("input_tokens", 0),
                "output_tokens": usage.get("output_tokens", 0),
                "cost_usd": rec.get("cost_usd"),
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


def failed_cells(cells: dict[tuple[str, str], dict]) -> list[dict[str, str]]:
    """Cells that did not end ok, with kind (infra_error: retried on a rerun; error: final)
    and a one-line reason, in key order."""
    return [
        {
            "task_id": task,
            "source": source,
            "kind": "infra_error" if rec.get("infra_error") else "error",
            "reason": one_line(rec.get("error") or rec.get("status")),
        }
        for (task, source), rec in sorted(cells.items())
        if rec.get("infra_error") or rec.get("status") != "ok"
    ]


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
        "infra_errors": sum(1 for rec in cells.values() if rec.get("infra_error")),
        "audit_failures": sorted(
            f"{task}|{source}" for (task, source), rec in cells.items() if rec.get("audit_failure")
        ),
        "failed_cells": failed_cells(cells),
        "findings_total": len(findings),
        "findings_reported": len(reported),
        "findings_suppressed": len(findings) - len(reported),
        "findings_by_source": dict(Counter(f.source for f in reported)),
        "findings_by_subcategory": dict(Counter(f.subcategory for f in reported)),
        "findings_by_tier": dict(Counter(f.tier for f in reported)),
        "findings_by_evidence": dict(Counter(f.evidence_tier for f in reported)),
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
                (not (rec.get("execution") or {}).get("skipped"), _skip_reason(rec))
                for (_, source), rec in sorted(cells.items())
                if source == STATIC_SOURCE and rec.get("execution") is not None
            ]
        ),
    }


def _skip_reason(rec: dict[str, Any]) -> str:
    execution = rec.get("execution") or {}
    return str(execution.get("skipped") or "")
