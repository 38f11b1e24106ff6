"""`audit compare RUN_A RUN_B`: two scored runs side by side, in the shape of BenchGuard's
Table 2 (definition-only beside "+ agent programs").

Per model of either run: each run's Recall_A, Recall_A+P, flagged-task precision counting
aligned and partial findings (Table 2's "Prec"), Find. (findings on tasks with gold issues),
then each run's cost; the last row is each run's `pooled union` (the paper's ensemble). Each run
must have been scored (`audit score` writes its `score.json`); a model a run lacks shows n/a.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from metaeval.errors import ConfigError
from metaeval.protocols.audit.pooled import pooled_name
from metaeval.protocols.audit.records import SCORE_FILE
from metaeval.protocols.audit.render import load_score
from metaeval.protocols.audit.score_report import NA, RowScore, ScoreReport, fmt_cost, fmt_pct

PER_RUN = ("Recall_A", "Recall_A+P", "Prec", "Find.")
ENSEMBLE = "Ensemble (pooled union)"


def scored_run(run_dir: Path) -> ScoreReport:
    """The scores `audit score` wrote for `run_dir`; a ConfigError naming the file otherwise."""
    where = str(run_dir / SCORE_FILE)
    try:
        report = load_score(run_dir)
    except (ValidationError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not a score file: {exc}", file=where) from None
    if report is None:
        raise ConfigError("no scores: run `metaeval audit score` on it first", file=where)
    return report


def _models(report: ScoreReport) -> list[str]:
    if report.pooled_models:
        return list(report.pooled_models)
    return [r.name for r in report.rows if r.kind == "findings" and "/" in r.name]


def _cells(row: RowScore | None) -> list[str]:
    if row is None:
        return [NA] * len(PER_RUN)
    find = str(row.n_findings_defective)
    return [fmt_pct(row.recall_a), fmt_pct(row.recall_ap), fmt_pct(row.precision_ap), find]


def _row(report: ScoreReport, name: str) -> RowScore | None:
    return next((r for r in report.rows if r.name == name), None)


def compare_table(
    runs: list[tuple[str, ScoreReport]],
) -> tuple[list[str], list[list[str]]]:
    """(columns, rows) of the side-by-side table; `runs` are (label, scores) in order."""
    columns = ["Model"]
    for label, _ in runs:
        columns += [f"{label} {c}" for c in PER_RUN]
    columns += [f"{label} Cost ($)" for label, _ in runs]
    models = list(dict.fromkeys(m for _, report in runs for m in _models(report)))
    table = []
    for name, shown in [*((m, m) for m in models), (pooled_name(1), ENSEMBLE)]:
        found = [_row(report, name) for _, report in runs]
        if name == pooled_name(1) and all(r is None for r in found):
            continue
        cells = [shown]
        for row in found:
            cells += _cells(row)
        cells += [fmt_cost(row.cost_usd) if row is not None else NA for row in found]
        table.append(cells)
    return columns, table
