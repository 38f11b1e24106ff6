"""Build-and-find tables (CSV, Parquet, README) and the Markdown/HTML report."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.report.figures import affinity_figure, kendall_figure, rb_figure
from metaeval.protocols.buildfind.report.pages import render_report, write_report
from metaeval.protocols.buildfind.tables.docs import TABLE_DOCS
from metaeval.protocols.buildfind.tables.write import (
    NOT_DOCUMENTED,
    undocumented_columns,
    write_tables,
)

EVIL = "<b>x</b>"

# Columns each table must document (the analysis contract).
REQUIRED = {
    "calibration": [
        "slice",
        "task",
        "builds",
        "finds",
        "accuracy",
        "perfect",
        "delta_vs_question_only",
    ],
    "repeatability": ["slice", "task", "answer_rows", "agreement", "reliable_questions"],
    "recovery_gate": [
        "effort_panel",
        "builder",
        "task",
        "G_task",
        "contributing_cells",
        "total_cells",
    ],
    "rb_effort": ["effort_panel", "builder", "R_b", "cells"],
    "aels": ["builder", "A", "S", "C", "R_b", "AELS"],
    "coverage": [
        "builder",
        "pairs",
        "implemented_gold",
        "coverage",
        "non_gold",
        "ambiguous",
        "D_b",
    ],
    "kendall_tau": ["effort_panel", "task", "finder_a", "finder_b", "tau", "n"],
    "affinity": ["builder", "finder", "residual"],
    "affinity_family": ["builder_family", "finder_family", "residual", "cells"],
    "finder_calibration": [],
    "token_usage": ["role", "agent", "runs", "input_tokens", "output_tokens", "total"],
}


def sample_tables() -> dict[str, pl.DataFrame]:
    return {
        "calibration": pl.DataFrame(
            {
                "slice": ["question_only", "compile_pass"],
                "task": ["all", "all"],
                "builds": [None, 2],
                "finds": [None, 12],
                "accuracy": [0.94512, 0.98911],
                "perfect": [None, 0.864],
                "delta_vs_question_only": [None, 0.044],
            }
        ),
        "rb_effort": pl.DataFrame(
            {
                "effort_panel": ["high", "high", "high", "low"],
                "builder": ["gpt", EVIL, "mimo", "gpt-low"],
                "R_b": [1.0333, 1.32, None, 1.151],
                "cells": [12, 7, 0, 11],
            }
        ),
        "affinity": pl.DataFrame(
            {
                "builder": ["gpt", "gpt", EVIL, EVIL],
                "finder": ["f1", "f2", "f1", "f2"],
                "residual": [0.076, -0.076, -0.041, 0.041],
            }
        ),
        "kendall_tau": pl.DataFrame(
            {
                "effort_panel": ["high", "high", "high", "low"],
                "task": ["minidb", "minidb", "minidb", "nanoweb"],
                "finder_a": ["f1", "f1", "f2", "f1"],
                "finder_b": ["f2", "f3", "f3", "f2"],
                "tau": [0.5, -0.2, None, 1.0],
                "n": [4, 4, 1, 3],
            }
        ),
        "coverage": pl.DataFrame(
            {
                "builder": ["gpt"],
                "pairs": [30],
                "implemented_gold": [29],
                "coverage": [29 / 30],
                "non_gold": [1],
                "ambiguous": [0],
                "D_b": [0.95],
            }
        ),
        "extra_stuff": pl.DataFrame({"k": ["a|b"], "v": [1.23456]}),
    }


META = {
    "run_id": "run-42",
    "pack": "scratch",
    "builders": ["gpt", EVIL],
    "finders": ["f1", "f2", "f3"],
    "trials": {"build": 2, "find": 3},
    "rows": 1234,
}


# ---------------------------------------------------------------------------------------------
# tables


def test_every_contract_column_is_documented() -> None:
    for name, columns in REQUIRED.items():
        assert name in TABLE_DOCS, name
        for column in columns:
            assert TABLE_DOCS[name].get(column), (name, column)
    assert TABLE_DOCS["finder_calibration"]  # documented, columns chosen in tables.py
    for name, docs in TABLE_DOCS.items():
        assert all(text.strip() for text in docs.values()), name
        tables = {name: pl.DataFrame(schema=dict.fromkeys(docs, pl.Utf8))}
        assert undocumented_columns(tables) == {}


def test_write_tables_files_and_readme(tmp_path: Path) -> None:
    tables = sample_tables()
    tables["calibration"] = tables["calibration"].with_columns(pl.lit(1).alias("surprise"))
    tables["nested"] = pl.DataFrame({"ids": [["a", "b"], []]})
    paths = write_tables(tables, tmp_path)
    folder = tmp_path / "tables"
    for name, df in tables.items():
        csv_path, parquet_path = folder / f"{name}.csv", folder / f"{name}.parquet"
        assert csv_path in paths and parquet_path in paths
        assert pl.read_parquet(parquet_path).equals(df)
        assert pl.read_csv(csv_path).height == df.height
    assert paths[-1] == folder / "README.md"
    readme = (folder / "README.md").read_text(encoding="utf-8")
    # every column of every written table appears in the README, documented or flagged
    for name, df in tables.items():
        assert f"## {name}" in readme
        section = readme.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        for column in df.columns:
            line = next(x for x in section.splitlines() if x.startswith(f"| `{column}` |"))
            expected = TABLE_DOCS.get(name, {}).get(column)
            if expected:
                assert expected.replace("|", "\\|") in line
            else:
                assert NOT_DOCUMENTED in line
    assert "Warning: undocumented columns" in readme
    assert "`calibration`: `surprise`" in readme
    assert "`extra_stuff`: `k`, `v`" in readme
    assert undocumented_columns(tables) == {
        "calibration": ["surprise"],
        "extra_stuff": ["k", "v"],
        "nested": ["ids"],
    }
    # the rb_effort section names its known columns without flags
    assert "`R_b`" in readme


def test_write_tables_documented_only_has_no_warning(tmp_path: Path) -> None:
    tables = {k: v for k, v in sample_tables().items() if k in TABLE_DOCS}
    write_tables(tables, tmp_path)
    readme = (tmp_path / "tables" / "README.md").read_text(encoding="utf-8")
    assert NOT_DOCUMENTED not in readme
    assert "Warning" not in readme


@pytest.mark.parametrize("name", ["../x", "a/b", "README", ""])
def test_write_tables_rejects_bad_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError):
        write_tables({name: pl.DataFrame({"a": [1]})}, tmp_path)


# ---------------------------------------------------------------------------------------------
# report


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for key, value in attrs:
            if key in ("src", "href", "xlink:href", "action", "srcset", "data"):
                self.refs.append((tag, key, value or ""))


def parse(html: str) -> _Refs:
    parser = _Refs()
    parser.feed(html)
    return parser


def test_html_is_self_contained_with_figures() -> None:
    _, html = render_report(sample_tables(), META)
    refs = parse(html)
    assert all(value.startswith("#") for _, _, value in refs.refs), refs.refs
    assert "script" not in refs.tags and "link" not in refs.tags and "img" not in refs.tags
    assert not re.search(r"https?:", html)
    assert "@import" not in html and "url(http" not in html
    assert html.count("<svg") == 7
    for fig in ("fig-rb", "fig-affinity", "fig-kendall"):
        block = html.split(f'<figure id="{fig}">', 1)[1].split("</figure>", 1)[0]
        assert block.count("<svg") == 1, fig
        if fig != "fig-kendall":  # kendall shows "no data" in its empty panel/task slots
            assert NO_DATA_TEXT not in block, fig
    assert "<image" not in html  # heatmaps and colour bars are vector, no embedded bitmaps
    # element ids stay unique across the three inline SVGs
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


NO_DATA_TEXT = ">no data<"


def test_rb_bars_annotated_with_cell_counts() -> None:
    svg = rb_figure(sample_tables()["rb_effort"])
    assert "|C_b|=12" in svg
    assert "|C_b|=7" in svg
    assert "|C_b|=11" in svg
    assert "1.033" in svg
    assert "n/a  |C_b|=0" in svg  # builder with no contributing cell
    assert "effort panel: high" in svg and "effort panel: low" in svg
    with_total = sample_tables()["rb_effort"].with_columns(pl.lit(12).alias("total_cells"))
    assert "|C_b|=7/12" in rb_figure(with_total)


def test_rb_bars_use_total_bytes_when_metrics_are_stacked() -> None:
    base = sample_tables()["rb_effort"]
    stacked = pl.concat(
        [
            base.with_columns(pl.lit("total_bytes").alias("metric")),
            base.with_columns(
                pl.lit("novel_retrieval_bytes").alias("metric"), pl.lit(9.876).alias("R_b")
            ),
        ]
    )
    svg = rb_figure(stacked)
    assert "1.033" in svg and "9.876" not in svg
    assert "total_bytes" in svg


def test_heatmaps_annotated() -> None:
    tables = sample_tables()
    affinity = affinity_figure(tables["affinity"])
    assert "+0.076" in affinity and "-0.041" in affinity
    # the paper's matrix has no panel column: one matrix over every effort, titled so (not n/a)
    assert "effort_panel" not in tables["affinity"].columns
    assert "every effort panel pooled" in affinity and "effort panel: n/a" not in affinity
    kendall = kendall_figure(tables["kendall_tau"])
    assert "0.50" in kendall and "-0.20" in kendall
    assert "high / minidb" in kendall and "low / nanoweb" in kendall
    assert "no data" in kendall  # (high, nanoweb) and (low, minidb) have no pairs


def test_html_escapes_table_text() -> None:
    _, html = render_report(sample_tables(), META)
    assert EVIL not in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    # the escaped name is also the text of a table cell
    assert "<td>&lt;b&gt;x&lt;/b&gt;</td>" in html
    assert "b&gt;x&lt;/b&gt;" in html.split('<figure id="fig-rb">', 1)[1].split("</figure>")[0]


@pytest.mark.parametrize(
    "tables",
    [
        {},
        {
            "rb_effort": pl.DataFrame(
                schema={
                    "effort_panel": pl.Utf8,
                    "builder": pl.Utf8,
                    "R_b": pl.Float64,
                    "cells": pl.Int64,
                }
            ),
            "affinity": pl.DataFrame(
                schema={"builder": pl.Utf8, "finder": pl.Utf8, "residual": pl.Float64}
            ),
            "kendall_tau": pl.DataFrame(
                schema={
                    "effort_panel": pl.Utf8,
                    "task": pl.Utf8,
                    "finder_a": pl.Utf8,
                    "finder_b": pl.Utf8,
                    "tau": pl.Float64,
                    "n": pl.Int64,
                }
            ),
        },
        {
            "rb_effort": pl.DataFrame(
                {"effort_panel": [None], "builder": ["solo"], "R_b": [None], "cells": [0]}
            ),
            "affinity": pl.DataFrame({"builder": ["b"], "finder": ["f"], "residual": [0.0]}),
            "kendall_tau": pl.DataFrame(
                {
                    "effort_panel": ["high"],
                    "task": ["t"],
                    "finder_a": ["f1"],
                    "finder_b": ["f2"],
                    "tau": [float("nan")],
                    "n": [1],
                }
            ),
        },
        {"rb_effort": pl.DataFrame({"builder": ["b"]}), "affinity": pl.DataFrame({"x": [1]})},
    ],
    ids=["missing", "empty", "single-row", "wrong-columns"],
)
def test_figures_survive_empty_and_tiny_tables(tables: dict[str, pl.DataFrame]) -> None:
    markdown, html = render_report(tables, {})
    assert html.count("<svg") == 7
    assert markdown.startswith("# Build-and-find report")
    if not tables:
        assert html.count(NO_DATA_TEXT) == 7
    for df in tables.values():
        if df.height == 0:
            assert "_No rows._" in markdown


def test_markdown_summary_and_tables() -> None:
    markdown, _ = render_report(sample_tables(), META)
    assert "- **Run**: run-42" in markdown
    assert "- **Task pack**: scratch" in markdown
    assert "- **Builders**: gpt, &lt;b&gt;x&lt;/b&gt; (2)" in markdown  # shown as text
    assert "<b>" not in markdown
    assert "- **Trials**: build: 2, find: 3" in markdown
    assert "- **Question rows**: 1234" in markdown
    for name in ("calibration", "rb_effort", "affinity", "kendall_tau", "coverage", "extra_stuff"):
        assert f"### {name}" in markdown
    assert (
        "| slice | task | builds | finds | accuracy | perfect | delta_vs_question_only |"
        in markdown
    )
    assert "| question_only | all | n/a | n/a | 0.945 | n/a | n/a |" in markdown
    assert "| compile_pass | all | 2 | 12 | 0.989 | 0.864 | 0.044 |" in markdown
    assert "| a\\|b | 1.235 |" in markdown  # pipes escaped, floats rounded
    # known tables come first, in documentation order
    assert markdown.index("### calibration") < markdown.index("### rb_effort")
    assert markdown.index("### rb_effort") < markdown.index("### extra_stuff")


def test_summary_trials_from_r_build_and_r_find() -> None:
    markdown, html = render_report(
        {}, {"run_id": "r", "r_build": 2, "r_find": 3, "source": "x.csv"}
    )
    assert "- **Trials**: build: 2, find: 3" in markdown
    assert "r_build" not in markdown
    assert "- **source**: x.csv" in markdown
    assert "- **Task pack**: n/a" in markdown
    assert "<dd>build: 2, find: 3</dd>" in html


def test_write_report(tmp_path: Path) -> None:
    paths = write_report(sample_tables(), META, tmp_path / "out")
    names = ("affinity", "db", "effort-accuracy", "kendall", "rb", "rb-low-prior", "robustness")
    figures = sorted(f"fig-{n}.{ext}" for n in names for ext in ("png", "svg"))
    assert [p.name for p in paths] == ["report.md", "report.html", *figures]
    markdown, html = render_report(sample_tables(), META)
    assert paths[0].read_text(encoding="utf-8") == markdown
    assert paths[1].read_text(encoding="utf-8") == html
    # each figure as files: a PNG image and a standalone SVG holding the page's drawing
    for path in paths[2:]:
        assert path.parent == tmp_path / "out" / "figures"
        data = path.read_bytes()
        if path.suffix == ".png":
            assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
        else:
            text = data.decode("utf-8")
            assert (
                text.lstrip().startswith("<?xml") and 'xmlns="http://www.w3.org/2000/svg"' in text
            )
            assert f'id="{path.stem}-' in html  # the page inlines the same figure
    again = write_report(sample_tables(), META, tmp_path / "again")
    for first, second in zip(paths[2:], again[2:], strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name  # deterministic files
