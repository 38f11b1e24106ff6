"""What `audit run` and `audit agent-run` print when they end: counts, where the results
are, and the failed cells (an infrastructure error is retried on a rerun)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaeval.exit_codes import CellFailure
from metaeval.protocols.audit.records import STATIC_SOURCE


def run_lines(summary: dict[str, Any], run_dir: Path, bench_dir: Path) -> list[str]:
    """The lines `audit run` prints from its summary."""
    lines = []
    if summary["skipped_completed"]:
        lines.append(f"resumed: {summary['skipped_completed']} completed cell(s) reused")
    lines.append(
        f"{summary['findings_reported']} findings on {summary['tasks']} tasks "
        f"({summary.get('tasks_flagged', 0)} flagged; "
        f"{summary['findings_suppressed']} below 0.3 suppressed); "
        f"audit failures {len(summary['audit_failures'])}, infra errors {summary['infra_errors']}"
    )
    evidence = summary.get("findings_by_evidence") or {}
    if evidence:
        shown = ", ".join(
            f"{k} {evidence[k]}" for k in ("executed", "self-contained", "assumed") if k in evidence
        )
        below = summary.get("findings_below_min_tier")
        lines.append(
            f"evidence: {shown}" + (f"; {below} below --min-tier left out" if below else "")
        )
    for name, reason in summary.get("skipped_dirs") or []:
        if reason != "no task.toml":  # a folder that is not a task: not worth a line
            lines.append(f"warning: folder {name} skipped: {reason}")
    unconfirmed = summary.get("absence_unconfirmed") or 0
    if unconfirmed:
        lines.append(
            f"{unconfirmed} absence claim(s) stayed unconfirmed (assumed, kept at Low): to "
            "confirm them, run the execution checks in each task's image (`audit run` "
            "without --no-execution, with `--pull missing` or a registry that holds it)"
        )
    for line in summary.get("execution") or []:
        if not line.startswith("disabled ("):  # --no-execution: the user knows
            lines.append(f"execution checks: {line}")
    lines.append(f"report: {run_dir / 'report.md'} and {run_dir / 'report.html'}")
    gold = bench_dir / "gold.json"
    if gold.is_file():
        lines.append(
            f"known issues beside the benchmark: metaeval audit score {run_dir} --gold {gold} "
            "--judge category (a rule judge, no model; or --judge provider/model)"
        )
    return lines


def of_this_run(failed: list[dict], models: list[str]) -> tuple[list[dict], list[dict]]:
    """The failed cells of the sources this run audits (the static checks and `models`),
    and those of models an earlier run of the directory asked for and this one does not."""
    asked = {STATIC_SOURCE, *models}
    return [r for r in failed if r["source"] in asked], [
        r for r in failed if r["source"] not in asked
    ]


def left_alone_lines(rows: list[dict]) -> list[str]:
    """What the console says about failed cells of models this run does not audit."""
    if not rows:
        return []
    names = ", ".join(sorted({str(r["source"]) for r in rows}))
    return [
        f"note: {len(rows)} failed cell(s) of {names}, which this run does not audit, are "
        "kept as they are and do not count in its exit code (audit into a new directory, "
        "-o, for a run without them)"
    ]


def cell_failures(failed: list[dict]) -> list[CellFailure]:
    """The summary's failed cells for the console: an infrastructure error is retried on a
    rerun; any other failure (the model's output unusable, a task the checks cannot read) is
    final."""
    return [
        CellFailure(
            "infra errors" if row["kind"] == "infra_error" else "failed cells",
            f"{row['source']}: {row['reason']}",
            retried=row["kind"] == "infra_error",
        )
        for row in failed
    ]


def agent_run_lines(summary: dict[str, Any], run_dir: Path, bench_dir: Path) -> list[str]:
    """The lines `audit agent-run` prints from its summary."""
    lines = []
    if summary["skipped_completed"]:
        lines.append(f"resumed: {summary['skipped_completed']} finished agent run(s) reused")
    classes = ", ".join(f"{k} {v}" for k, v in summary["classifications"].items())
    lines.append(
        f"{summary['tasks']} tasks: {summary['passed']} passed their tests "
        f"(mean reward {summary['mean_reward']}); runs: {classes}; "
        f"infra errors {summary['infra_errors']}"
    )
    lines.append(
        f"agent results: {run_dir} (metaeval audit run {bench_dir} --tier execution "
        f"--agent-results {run_dir})"
    )
    return lines
