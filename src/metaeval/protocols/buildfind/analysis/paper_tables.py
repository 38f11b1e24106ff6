"""Tables 1-3 laid out as the paper prints them (Section 4): percentages with one decimal,
lifts in percentage points, "–" where the paper prints a dash, and Table 3's wide high/low
pivot with "(n/k)" contributing cells. They are text tables derived from `calibration`,
`repeatability` and `recovery_gate` (which keep fractions for computing); nothing is
recomputed from the rows here."""

from __future__ import annotations

from typing import Any

import polars as pl

DASH = "–"
AGREEMENT = "3-trial agreement"
"""Table 2's agreement column as the analysis writes it (the paper's three find trials)."""
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
                AGREEMENT: percent(r["agreement"]),
                "Reliable questions": percent(r["reliable_questions"]),
            }
        )
    columns = ["Slice", "Build", "Find", "Answer rows", AGREEMENT, "Reliable questions"]
    return pl.DataFrame(out, schema=dict.fromkeys(columns, pl.Utf8))


def trial_agreement(
    header: list[str], rows: list[list[str]], r_find: int | None
) -> tuple[list[str], list[list[str]], str]:
    """Table 2 as a page shows it for a run of `r_find` find trials per cell: the agreement
    column named for that count, and with one trial its cells n/a and a note saying why
    (header, rows, note). Unknown `r_find` leaves the table as written."""
    if AGREEMENT not in header or r_find is None:
        return header, rows, ""
    at = header.index(AGREEMENT)
    header = [*header[:at], agreement_name(r_find), *header[at + 1 :]]
    if r_find != 1:
        return header, rows, ""
    rows = [[*r[:at], "n/a", *r[at + 1 :]] for r in rows]
    return header, rows, ONE_TRIAL


def agreement_name(r_find: int | None) -> str:
    """'1-trial agreement' for the run's find trials per cell (the paper's 3 when unknown)."""
    return AGREEMENT if r_find is None else f"{r_find}-trial agreement"


ONE_TRIAL = (
    "n/a: this run has one find trial per cell (r_find: 1), so there is no agreement between "
    "trials to measure."
)


def builder_labels(rows: pl.DataFrame | pl.LazyFrame | None) -> dict[str, str]:
    """Builder name -> the label Table 3 lines builders up by across effort panels.

    The label is the builder's agent and model from the rows (``codex gpt-5.5``; the agent
    alone when no model is configured), so the paper's "GPT-5.5" high and low builders share
    a row. Rows without `builder_agent` (written before the column) fall back to the config
    name with its effort suffix removed (``gpt55-high`` -> ``gpt55``). Two builders of one
    effort that would share a label keep their config names instead, so no cell is hidden.
    """
    if rows is None:
        return {}
    columns = ["builder", "effort_panel", "builder_agent", "builder_model"]
    lf = rows.lazy()
    have = lf.collect_schema().names()
    formal = lf.filter(pl.col("slice").cast(pl.String) == "formal").with_columns(
        pl.lit(None, pl.String).alias(c) for c in columns if c not in have
    )
    seen = (
        formal.select(pl.col(c).cast(pl.String) for c in columns)
        .unique("builder", keep="first")
        .sort("builder")
        .collect()
    )
    labels, effort = {}, {}
    for builder, builder_effort, agent, model in seen.iter_rows():
        if agent:
            labels[builder] = f"{agent} {model}" if model else str(agent)
        else:
            labels[builder] = _without_effort(builder, builder_effort)
        effort[builder] = builder_effort
    clashes = {(labels[b], effort[b]) for b in labels if _same(labels, effort, b) > 1}
    return {b: b if (label, effort[b]) in clashes else label for b, label in labels.items()}


def _same(labels: dict[str, str], effort: dict[str, str], builder: str) -> int:
    """How many builders of `builder`'s effort carry its label."""
    key = (labels[builder], effort[builder])
    return sum(1 for b in labels if (labels[b], effort[b]) == key)


def _without_effort(name: str, builder_effort: str | None) -> str:
    """`name` without a trailing ``-<effort>``, ``_<effort>`` or ``.<effort>``."""
    if builder_effort:
        for sep in ("-", "_", "."):
            if name.endswith(sep + builder_effort) and len(name) > len(builder_effort) + 1:
                return name[: -len(builder_effort) - 1]
    return name


def paper_table3(gate: pl.DataFrame | None, labels: dict[str, str] | None = None) -> pl.DataFrame:
    """Table 3: one row per builder label (`builder_labels`; the builder's name when `labels`
    lacks it), then per effort panel the panel's builder of that label ("<panel> builder", the
    config name; "–" when the panel has none) and one column per task holding "97.8% (6/6)".
    A cell without contributing finders, or a builder missing from a panel, prints
    "– (0/k)" with k the panel's finder cells on that task."""
    if gate is None or gate.height == 0:
        return pl.DataFrame(schema={"builder": pl.Utf8})
    labels = labels or {}
    tasks = sorted(gate.get_column("task").unique().to_list())
    panels = sorted(gate.get_column("effort_panel").unique().to_list())
    by_label: dict[tuple[str, str], str] = {}
    for panel, builder in gate.select("effort_panel", "builder").unique().rows():
        by_label[(panel, labels.get(builder, builder))] = builder
    row_labels = sorted({label for _, label in by_label})
    data: dict[str, list[str]] = {"builder": row_labels}
    for panel in panels:
        part = gate.filter(pl.col("effort_panel") == panel)
        cells = {(r["builder"], r["task"]): r for r in part.iter_rows(named=True)}
        totals = _panel_totals(part)
        names = [by_label.get((panel, label)) for label in row_labels]
        data[f"{panel} builder"] = [name or DASH for name in names]
        for task in tasks:
            data[f"{panel} {task}"] = [
                _gate_cell(cells.get((name, task)), totals.get(task, 0)) for name in names
            ]
    return pl.DataFrame(data, schema=dict.fromkeys(data, pl.Utf8))


def _panel_totals(part: pl.DataFrame) -> dict[str, int]:
    """Task -> the panel's finder cells per builder (the k of "(n/k)")."""
    totals = part.group_by("task").agg(pl.col("total_cells").max())
    return {task: int(total or 0) for task, total in totals.rows()}


def _gate_cell(row: dict[str, Any] | None, total: int) -> str:
    if row is None:
        return f"{DASH} (0/{total})"
    return f"{percent(row['G_task'])} ({row['contributing_cells']}/{row['total_cells']})"


def paper_tables(
    tables: dict[str, pl.DataFrame], labels: dict[str, str] | None = None
) -> dict[str, pl.DataFrame]:
    """paper_table1..3 from the analysis tables (`labels`: `builder_labels` of the rows)."""
    return {
        "paper_table1": paper_table1(tables.get("calibration")),
        "paper_table2": paper_table2(tables.get("repeatability"), tables.get("calibration")),
        "paper_table3": paper_table3(tables.get("recovery_gate"), labels),
    }
