"""Tables 1-3 in the paper's printed shape, from hand-written analysis tables (values from the
paper's Tables 1-3 where they fit)."""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis.paper_tables import (
    paper_table1,
    paper_table2,
    paper_table3,
)
from metaeval.protocols.buildfind.tables import undocumented_columns


def calibration() -> pl.DataFrame:
    rows = [
        ("question_only", "all", None, 72, 0.945, 0.5, None),
        ("spec_only", "all", None, 72, 0.999, 0.9, 5.4),
        ("artifact_present", "all", 48, 1728, 0.989, 0.864, 4.4),
        ("compile_pass", "all", 41, 1476, 0.989, 0.864, 4.4),
        ("compile_failed", "all", 7, 252, 0.988, 0.861, 4.2),
        ("compile_pass", "minidb", 20, 700, 0.5, 0.5, 1.0),  # per-task rows are left out
    ]
    columns = ["slice", "task", "builds", "finds", "accuracy", "perfect", "delta_vs_question_only"]
    return pl.DataFrame(rows, schema=columns, orient="row")


def test_table1_reads_as_the_paper_prints_it():
    table = paper_table1(calibration())
    assert table.rows() == [
        ("Question-only", "all", "–", "72", "94.5%", "–", "–"),
        ("Spec-only", "all", "–", "72", "99.9%", "–", "+5.4 pp"),
        ("Artifact-present, all", "all", "48", "1728", "98.9%", "86.4%", "+4.4 pp"),
        ("Compile-pass primary", "all", "41", "1476", "98.9%", "86.4%", "+4.4 pp"),
        ("Compile-failed excluded", "all", "7", "252", "98.8%", "86.1%", "+4.2 pp"),
    ]


def test_table2_has_build_and_find_columns():
    repeat = pl.DataFrame(
        [
            ("formal", "all", 21312, 0.975, 0.967),
            ("spec_only", "all", 1080, 0.997, 1.0),
            ("question_only", "all", 1080, 0.867, 0.667),
        ],
        schema=["slice", "task", "answer_rows", "agreement", "reliable_questions"],
        orient="row",
    )
    table = paper_table2(repeat, calibration())
    assert table.columns == [
        "Slice", "Build", "Find", "Answer rows", "3-trial agreement", "Reliable questions"
    ]  # fmt: skip
    assert table.rows() == [
        ("Formal, all tasks", "41", "1476", "21312", "97.5%", "96.7%"),
        ("Spec-only control", "–", "72", "1080", "99.7%", "100.0%"),
        ("Question-only control", "–", "72", "1080", "86.7%", "66.7%"),
    ]


def test_table3_is_the_wide_high_low_pivot_with_cell_counts():
    gate = pl.DataFrame(
        [
            ("high", "gpt-5.5-high", "minidb", 0.978, 6, 6),
            ("high", "gpt-5.5-high", "nanoweb", 0.998, 6, 6),
            ("high", "mimo-pro-high", "minidb", 0.998, 6, 6),
            ("high", "mimo-pro-high", "nanoweb", None, 0, 6),
            ("low", "gpt-5.5-low", "minidb", 0.987, 6, 6),
            ("low", "gpt-5.5-low", "nanoweb", 0.996, 6, 6),
        ],
        schema=["effort_panel", "builder", "task", "G_task", "contributing_cells", "total_cells"],
        orient="row",
    )
    table = paper_table3(gate)
    assert table.columns == [
        "high builder", "high minidb", "high nanoweb", "low builder", "low minidb", "low nanoweb"
    ]  # fmt: skip
    assert table.rows() == [
        ("gpt-5.5-high", "97.8% (6/6)", "99.8% (6/6)", "gpt-5.5-low", "98.7% (6/6)", "99.6% (6/6)"),
        ("mimo-pro-high", "99.8% (6/6)", "– (0/6)", "", "", ""),
    ]
    tables = {"paper_table1": paper_table1(calibration()), "paper_table3": table}
    assert undocumented_columns(tables) == {}
