"""Tables 1-3 in the paper's printed shape, from hand-written analysis tables (values from the
paper's Tables 1-3 where they fit)."""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis.paper_tables import (
    builder_labels,
    paper_table1,
    paper_table2,
    paper_table3,
)
from metaeval.protocols.buildfind.tables.write import undocumented_columns


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
    labels = {"gpt-5.5-high": "GPT-5.5", "gpt-5.5-low": "GPT-5.5", "mimo-pro-high": "MiMo Pro"}
    table = paper_table3(gate, labels)
    assert table.columns == [
        "builder", "high builder", "high minidb", "high nanoweb",
        "low builder", "low minidb", "low nanoweb",
    ]  # fmt: skip
    assert table.rows() == [
        ("GPT-5.5", "gpt-5.5-high", "97.8% (6/6)", "99.8% (6/6)",
         "gpt-5.5-low", "98.7% (6/6)", "99.6% (6/6)"),
        ("MiMo Pro", "mimo-pro-high", "99.8% (6/6)", "– (0/6)", "–", "– (0/6)", "– (0/6)"),
    ]  # fmt: skip
    tables = {"paper_table1": paper_table1(calibration()), "paper_table3": table}
    assert undocumented_columns(tables) == {}


def test_table3_lines_up_builders_by_agent_and_model_across_panels():
    """Panels with different builder sets: high has codex gpt-5.5 and claude-code opus, low has
    claude-code opus, codex gpt-5.4-mini and an old-format builder without agent columns.
    By position (the old layout) gpt-5.5-high would sit beside opus-low; by label each
    builder gets its own row, with "– (0/k)" where a panel lacks it (k from that panel)."""
    rows = pl.DataFrame(
        [
            ("formal", "gpt55_high", "high", "codex", "gpt-5.5"),
            ("formal", "opus_high", "high", "claude-code", "opus"),
            ("formal", "opus_low", "low", "claude-code", "opus"),
            ("formal", "mini_low", "low", "codex", "gpt-5.4-mini"),
            ("formal", "legacy-low", "low", None, None),
            ("question_only", "", "low", None, None),
        ],
        schema=["slice", "builder", "effort_panel", "builder_agent", "builder_model"],
        orient="row",
    )
    labels = builder_labels(rows)
    assert labels == {
        "gpt55_high": "codex gpt-5.5",
        "opus_high": "claude-code opus",
        "opus_low": "claude-code opus",
        "mini_low": "codex gpt-5.4-mini",
        "legacy-low": "legacy",
    }
    gate = pl.DataFrame(
        [
            ("high", "gpt55_high", "t1", 0.5, 3, 3),
            ("high", "opus_high", "t1", 1.0, 2, 3),
            ("low", "opus_low", "t1", 0.25, 1, 2),
            ("low", "mini_low", "t1", None, 0, 2),
            ("low", "legacy-low", "t1", 0.75, 2, 2),
        ],
        schema=["effort_panel", "builder", "task", "G_task", "contributing_cells", "total_cells"],
        orient="row",
    )
    table = paper_table3(gate, labels)
    assert table.columns == ["builder", "high builder", "high t1", "low builder", "low t1"]
    assert table.rows() == [
        ("claude-code opus", "opus_high", "100.0% (2/3)", "opus_low", "25.0% (1/2)"),
        ("codex gpt-5.4-mini", "–", "– (0/3)", "mini_low", "– (0/2)"),
        ("codex gpt-5.5", "gpt55_high", "50.0% (3/3)", "–", "– (0/2)"),
        ("legacy", "–", "– (0/3)", "legacy-low", "75.0% (2/2)"),
    ]


def test_builders_sharing_agent_and_model_in_one_panel_keep_their_names():
    rows = pl.DataFrame(
        [
            ("formal", "a-high", "high", "codex", "gpt-5.5"),
            ("formal", "b-high", "high", "codex", "gpt-5.5"),
            ("formal", "c-low", "low", "codex", "gpt-5.5"),
        ],
        schema=["slice", "builder", "effort_panel", "builder_agent", "builder_model"],
        orient="row",
    )
    assert builder_labels(rows) == {
        "a-high": "a-high",
        "b-high": "b-high",
        "c-low": "codex gpt-5.5",
    }
