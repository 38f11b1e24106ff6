"""Tables 1-3 laid out as the paper prints them (Section 4): percentages with one decimal,
lifts in percentage points, "–" where the paper prints a dash, and Table 3's wide high/low
pivot with "(n/k)" contributing cells. They are text tables derived from `calibration`,
`repeatability` and `recovery_gate` (which keep fractions for computing); nothing is
recomputed from the rows here."""

from __future__ import annotations

from typing import Any

import polars as pl

DASH = "–"
TABLE1_SLICES = {
    "question_only": "Question-only",
    "spec_only": "Spec-only",
    "artifact_present": "Artifact-present, all",
    "compile_pass": "Compile-pass primary",
    "compile_failed": "Compile-failed excluded",
}
TABLE2_SLICES = {
    "formal": ("Formal, all tasks", "compile_pass"),
    "spec_only": ("Spec-only control", "spec_only"),
    "question_only": ("Question-only control", "question_only"),
}
CONTROLS = ("question_only", "spec_only")


def percent(value: Any) -> str:
    """0.945 -> '94.5%'; a missing value -> '–'."""
    return DASH if value is None else f"{100 * value:.1f}%"


def points(value: Any) -> str:
    """4.4 (already in points) -> '+4.4 pp'; a missing value -> '–'."""
    return DASH if value is None else f"{value:+.1f} pp"


def count(value: Any) -> str:
    return DASH if value is None else str(value)


def _all_rows(table: pl.DataFrame | None) -> dict[str, dict[str, Any]]:
    if table is None or table.height == 0:
        return {}
    return {r["slice"]: r for r in table.filter(pl.col("task") == "all").iter_rows(named=True)}


def paper_table1(calibration: pl.DataFrame | None) -> pl.DataFrame:
    """Table 1: Slice, Task, Build, Find, Accuracy, Perfect, Δ vs. question-only (task "all").
    The controls print "–" for Build and Perfect, as the paper does."""
    rows = _all_rows(calibration)
    out = []
    for name, label in TABLE1_SLICES.items():
        if name not in rows:
            continue
        r = rows[name]
        control = name in CONTROLS
        out.append(
            {
                "Slice": label,
                "Task": "all",
                "Build": DASH if control else count(r["builds"]),
                "Find": count(r["finds"]),
                "Accuracy": percent(r["accuracy"]),
                "Perfect": DASH if control else percent(r["perfect"]),
                "Δ vs. question-only": points(r["delta_vs_question_only"]),
            }
        )
    columns = ["Slice", "Task", "Build", "Find", "Accuracy", "Perfect", "Δ vs. question-only"]
    return pl.DataFrame(out, schema=dict.fromkeys(columns, pl.Utf8))


def paper_table2(
    repeatability: pl.DataFrame | None, calibration: pl.DataFrame | None
) -> pl.DataFrame:
    """Table 2 with its Build and Find columns (from the calibration table's matching slice:
    the compile-pass panel for the formal row)."""
    rows, calib = _all_rows(repeatability), _all_rows(calibration)
    out = []
    for name, (label, calib_slice) in TABLE2_SLICES.items():
        if name not in rows:
            continue
        r, c = rows[name], calib.get(calib_slice, {})
        out.append(
            {
                "Slice": label,
                "Build": DASH if name in CONTROLS else count(c.get("builds")),
                "Find": count(c.get("finds")),
                "Answer rows": count(r["answer_rows"]),
                "3-trial agreement": percent(r["agreement"]),
                "Reliable questions": percent(r["reliable_questions"]),
            }
        )
    columns = ["Slice", "Build", "Find", "Answer rows", "3-trial agreement", "Reliable questions"]
    return pl.DataFrame(out, schema=dict.fromkeys(columns, pl.Utf8))


def paper_table3(gate: pl.DataFrame | None) -> pl.DataFrame:
    """Table 3: one block of columns per effort panel ("<panel> builder", then one column per
    task holding "97.8% (6/6)"; "– (0/6)" without contributing cells), panels side by side,
    the i-th builder of each panel (by name) on row i."""
    if gate is None or gate.height == 0:
        return pl.DataFrame(schema={"builder": pl.Utf8})
    tasks = sorted(gate.get_column("task").unique().to_list())
    blocks: list[pl.DataFrame] = []
    for panel in sorted(gate.get_column("effort_panel").unique().to_list()):
        part = gate.filter(pl.col("effort_panel") == panel)
        builders = sorted(part.get_column("builder").unique().to_list())
        cells = {(r["builder"], r["task"]): r for r in part.iter_rows(named=True)}
        data: dict[str, list[str]] = {f"{panel} builder": builders}
        for task in tasks:
            data[f"{panel} {task}"] = [_gate_cell(cells.get((b, task))) for b in builders]
        blocks.append(pl.DataFrame(data, schema=dict.fromkeys(data, pl.Utf8)))
    height = max(b.height for b in blocks)
    padded = [
        pl.concat([b, pl.DataFrame({c: [""] * (height - b.height) for c in b.columns})])
        if b.height < height
        else b
        for b in blocks
    ]
    return pl.concat(padded, how="horizontal")


def _gate_cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return DASH
    return f"{percent(row['G_task'])} ({row['contributing_cells']}/{row['total_cells']})"


def paper_tables(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """paper_table1..3 from the analysis tables."""
    return {
        "paper_table1": paper_table1(tables.get("calibration")),
        "paper_table2": paper_table2(tables.get("repeatability"), tables.get("calibration")),
        "paper_table3": paper_table3(tables.get("recovery_gate")),
    }
