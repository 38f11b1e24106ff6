"""The claim-evidence map: each headline figure of the report -> table, rows and command.

A claim names one cell of one analysis table (`table`, the key values in `where`, `column`),
the question rows it is computed from (`rows`: a file and equality filters on its columns;
`n_rows` the number of such rows, filled in when the rows are at hand) and the command that
recomputes the table from the released rows. Headline figures are the pooled calibration
accuracies and lifts, repeatability, implementation coverage, R_b and the recovery gate per
builder, and every view's pooled accuracy, lifts and R_b. Every other number of the report is
a cell of a table printed in full, and `verify-release` recomputes every such table.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

ANALYZE = (
    "metaeval buildfind analyze --rows data/question_rows.parquet "
    "--view-rows data/view_rows.parquet -o recomputed"
)
ANALYZE_NO_VIEWS = "metaeval buildfind analyze --rows data/question_rows.parquet -o recomputed"
ROWS_FILE = "data/question_rows.parquet"
VIEW_ROWS_FILE = "data/view_rows.parquet"

_GROUP_ROWS: dict[str, dict[str, Any]] = {
    "question_only": {"slice": "question_only"},
    "spec_only": {"slice": "spec_only"},
    "artifact_present": {"slice": "formal"},
    "compile_pass": {"slice": "formal", "compile_pass": True},
    "compile_failed": {"slice": "formal", "compile_pass": False},
}


def _claim(
    cid: str,
    figure: str,
    table: str,
    where: dict[str, Any],
    column: str,
    value: Any,
    rows: dict[str, Any],
    command: str,
) -> dict[str, Any]:
    return {
        "id": cid,
        "figure": figure,
        "value": value,
        "table": table,
        "where": where,
        "column": column,
        "rows": rows,
        "command": command,
        "output": f"recomputed/tables/{table}.csv",
    }


def _rows_of(df: pl.DataFrame | None, *needed: str, **where: Any) -> list[dict[str, Any]]:
    """Rows of `df` matching `where`; none when the table lacks a needed or key column
    (reports are also rendered for partial table sets)."""
    if df is None or any(c not in df.columns for c in [*needed, *where]):
        return []
    out = df
    for column, value in where.items():
        out = out.filter(pl.col(column) == value)
    return list(out.iter_rows(named=True))


def claims(tables: dict[str, pl.DataFrame]) -> list[dict[str, Any]]:
    """The claim-evidence map of a set of analysis tables (n_rows not yet filled)."""
    command = ANALYZE if "view_accuracy" in tables else ANALYZE_NO_VIEWS
    return [
        *_calibration_claims(tables, command),
        *_repeatability_claims(tables, command),
        *_coverage_claims(tables, command),
        *_rb_claims(tables, command),
        *_view_claims(tables, command),
    ]


def _calibration_claims(tables: dict[str, pl.DataFrame], command: str) -> list[dict[str, Any]]:
    """Pooled accuracy of each calibration group, and its lift over question-only."""
    out: list[dict[str, Any]] = []
    rows_file = {"file": ROWS_FILE}
    calibration = tables.get("calibration")
    for group, filters in _GROUP_ROWS.items():
        for rec in _rows_of(calibration, "accuracy", slice=group, task="all"):
            where = {"slice": group, "task": "all"}
            label = group.replace("_", "-")
            out.append(
                _claim(
                    f"accuracy.{group}",
                    f"{label} accuracy, all tasks",
                    "calibration",
                    where,
                    "accuracy",
                    rec["accuracy"],
                    {**rows_file, **filters},
                    command,
                )
            )
            if group != "question_only" and rec.get("delta_vs_question_only") is not None:
                out.append(
                    _claim(
                        f"lift.{group}",
                        f"{label} lift over question-only (pp), all tasks",
                        "calibration",
                        where,
                        "delta_vs_question_only",
                        rec["delta_vs_question_only"],
                        {**rows_file, "slice": ["formal", "question_only"]}
                        if group != "spec_only"
                        else {**rows_file, "slice": ["spec_only", "question_only"]},
                        command,
                    )
                )
    return out


def _repeatability_claims(tables: dict[str, pl.DataFrame], command: str) -> list[dict[str, Any]]:
    """The formal slice's trial agreement over all tasks."""
    return [
        _claim(
            "repeatability.formal",
            "formal 3-trial agreement, all tasks",
            "repeatability",
            {"slice": "formal", "task": "all"},
            "agreement",
            rec["agreement"],
            {"file": ROWS_FILE, "slice": "formal", "compile_pass": True},
            command,
        )
        for rec in _rows_of(tables.get("repeatability"), "agreement", slice="formal", task="all")
    ]


def _coverage_claims(tables: dict[str, pl.DataFrame], command: str) -> list[dict[str, Any]]:
    """Implementation coverage of each builder."""
    return [
        _claim(
            f"coverage.{rec['builder']}",
            f"implementation coverage of {rec['builder']}",
            "coverage",
            {"builder": rec["builder"]},
            "coverage",
            rec["coverage"],
            {"file": ROWS_FILE, "slice": "formal", "builder": rec["builder"]},
            command,
        )
        for rec in _rows_of(tables.get("coverage"), "builder", "coverage")
    ]


def _rb_claims(tables: dict[str, pl.DataFrame], command: str) -> list[dict[str, Any]]:
    """R_b (total bytes) of each builder in each effort panel."""
    out: list[dict[str, Any]] = []
    for rec in _rows_of(
        tables.get("rb_effort"), "effort_panel", "builder", "R_b", metric="total_bytes"
    ):
        panel, builder = rec["effort_panel"], rec["builder"]
        out.append(
            _claim(
                f"R_b.{panel}.{builder}",
                f"R_b of {builder} (panel {panel}; normalised within the panel's cells)",
                "rb_effort",
                {"metric": "total_bytes", "effort_panel": panel, "builder": builder},
                "R_b",
                rec["R_b"],
                {"file": ROWS_FILE, "slice": "formal", "compile_pass": True, "effort_panel": panel},
                command,
            )
        )
    return out


def _view_claims(tables: dict[str, pl.DataFrame], command: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    columns = ("view", "accuracy", "lift_vs_full_pp", "lift_vs_question_only_pp")
    for rec in _rows_of(tables.get("view_accuracy"), *columns, slice="compile_pass", task="all"):
        view = rec["view"]
        where = {"view": view, "slice": "compile_pass", "task": "all"}
        rows = {"file": VIEW_ROWS_FILE, "view": view, "compile_pass": True}
        for column, text in (
            ("accuracy", "accuracy"),
            ("lift_vs_full_pp", "lift over the full view (pp)"),
            ("lift_vs_question_only_pp", "lift over question-only (pp)"),
        ):
            out.append(
                _claim(
                    f"view.{view}.{column}",
                    f"view {view}: compile-pass {text}, all tasks",
                    "view_accuracy",
                    where,
                    column,
                    rec[column],
                    rows,
                    command,
                )
            )
    for rec in _rows_of(tables.get("view_rb_effort"), "view", "effort_panel", "builder", "R_b"):
        view, panel, builder = rec["view"], rec["effort_panel"], rec["builder"]
        out.append(
            _claim(
                f"view.{view}.R_b.{panel}.{builder}",
                f"view {view}: R_b of {builder} (panel {panel})",
                "view_rb_effort",
                {"view": view, "effort_panel": panel, "builder": builder},
                "R_b",
                rec["R_b"],
                {"file": VIEW_ROWS_FILE, "view": view, "compile_pass": True},
                command,
            )
        )
    return out


def count_rows(claim: dict[str, Any], frames: dict[str, pl.DataFrame]) -> int | None:
    """How many rows of the claim's rows file match its filters (None: file not given)."""
    spec = dict(claim["rows"])
    df = frames.get(spec.pop("file"))
    if df is None:
        return None
    for column, value in spec.items():
        if isinstance(value, list):
            df = df.filter(pl.col(column).is_in(value))
        elif value is False:
            df = df.filter(~pl.col(column).fill_null(False))
        else:
            df = df.filter(pl.col(column) == value)
    return df.height


def with_row_counts(
    claim_list: list[dict[str, Any]], frames: dict[str, pl.DataFrame]
) -> list[dict[str, Any]]:
    """The claims with `n_rows` filled from the rows files (name -> table)."""
    return [{**c, "n_rows": count_rows(c, frames)} for c in claim_list]


def same_value(a: Any, b: Any, tol: float = 1e-9) -> bool:
    """Equal, with floats compared to `tol` (NaN equals NaN, null equals null)."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return abs(fa - fb) <= tol
    return a == b


def claims_table(claim_list: list[dict[str, Any]]) -> pl.DataFrame:
    """The map as a table for the report: figure, value, source cell, rows and command."""
    records = []
    for c in claim_list:
        where = ", ".join(f"{k}={v}" for k, v in c["where"].items())
        rows = dict(c["rows"])
        source = rows.pop("file")
        filters = ", ".join(f"{k}={v}" for k, v in rows.items())
        records.append(
            {
                "claim": c["id"],
                "figure": c["figure"],
                "value": None if c["value"] is None else float(c["value"]),
                "source": f"{c['table']}.{c['column']} [{where}]",
                "rows": f"{source} [{filters}]",
                "n_rows": c.get("n_rows"),
                "command": c["command"],
            }
        )
    schema = {
        "claim": pl.Utf8,
        "figure": pl.Utf8,
        "value": pl.Float64,
        "source": pl.Utf8,
        "rows": pl.Utf8,
        "n_rows": pl.Int64,
        "command": pl.Utf8,
    }
    return pl.DataFrame(records, schema=schema)
