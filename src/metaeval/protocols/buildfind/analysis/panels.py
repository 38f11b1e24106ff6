"""Effort panels: which builder-finder pairs are analysed together (paper Sec. 3.3, Table 3).

A formal row records the builder's effort (`effort_panel`) and the finder's (`finder_effort`).
The panel of a pair is formed from both:

* ``matched`` (default, the paper's design): high builders are read by high finders, low by
  low; a pair whose efforts differ is left out of every panel-local metric (R_b, C_b "(n/6)",
  G_task, AELS, Kendall tau, per-panel affinity) and stays in the pooled tables
  (`analysis.pair_sets`). The panel keeps the shared effort as its name.
* ``cross``: every (builder effort, finder effort) pair is its own panel, named
  ``<builder effort>/<finder effort>`` (e.g. ``high/low``), so the full grid is analysed.

Control rows (question-only, spec-only) have no builder; their panel stays the finder's effort in
both modes (the calibration tables pool panels). Rows without `finder_effort` (written before the
column existed), and finders whose effort is not configured ("default"), cannot be paired: they
stay in the builder's panel, as older metaeval versions analysed them, and the `effort_panels`
table says so.
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from metaeval.protocols.buildfind.analysis.core import FORMAL, Frame, lazy

PanelMode = Literal["matched", "cross"]
PANEL_MODES: tuple[PanelMode, ...] = ("matched", "cross")
DEFAULT_PANELS: PanelMode = "matched"
OLD_ROWS_NOTE = "finder effort unknown; panels follow builder effort (old rows)"
DEFAULT_NOTE = "finder effort not configured (default); joins the builder's panel"
OFF_DIAGONAL_NOTE = "builder and finder efforts differ: not analysed in matched panels"
UNSET = "default"  # AgentSpec.effort when a config gives none

PANEL_SCHEMA = {
    "builder_effort": pl.String,
    "finder_effort": pl.String,
    "effort_panel": pl.String,
    "analysed": pl.Boolean,
    "builders": pl.Int64,
    "finders": pl.Int64,
    "mode": pl.String,
    "note": pl.String,
}


def form_panels(rows: Frame, mode: str = DEFAULT_PANELS) -> tuple[pl.LazyFrame, pl.DataFrame]:
    """The rows with `effort_panel` set by `mode`, and the `effort_panels` table.

    Matched mode drops formal rows whose finder effort differs from the builder's; cross mode
    renames each formal row's panel to ``builder/finder``. The table lists every (builder effort,
    finder effort) pair seen in the formal rows: the panel it went to, whether it is analysed,
    how many builders and finders it holds, and a note.
    """
    if mode not in PANEL_MODES:
        raise ValueError(f"unknown panels mode {mode!r} (known: {', '.join(PANEL_MODES)})")
    lf = lazy(rows)
    old = "finder_effort" not in lf.collect_schema().names()
    if old:
        lf = lf.with_columns(finder_effort=pl.lit(None, pl.String))
    builder_effort = pl.col("effort_panel").cast(pl.String)
    finder_effort = pl.col("finder_effort").cast(pl.String)
    formal = pl.col("slice").cast(pl.String) == FORMAL
    known = finder_effort.is_not_null() & (finder_effort != UNSET)
    matched = (finder_effort == builder_effort).fill_null(False)
    if mode == "matched":
        panel = builder_effort
        analysed = ~known | matched
    else:
        panel = pl.when(known).then(builder_effort + "/" + finder_effort).otherwise(builder_effort)
        analysed = pl.lit(True)
    table = (
        lf.filter(formal)
        .group_by(builder_effort.alias("builder_effort"), finder_effort.alias("finder_effort"))
        .agg(
            effort_panel=panel.first(),
            analysed=analysed.first(),
            builders=pl.col("builder").n_unique().cast(pl.Int64),
            finders=pl.col("finder").n_unique().cast(pl.Int64),
        )
        .with_columns(
            mode=pl.lit(mode),
            note=pl.when(pl.col("finder_effort").is_null())
            .then(pl.lit(OLD_ROWS_NOTE))
            .when((pl.col("finder_effort") == UNSET) & (pl.col("builder_effort") != UNSET))
            .then(pl.lit(DEFAULT_NOTE))
            .when(~pl.col("analysed"))
            .then(pl.lit(OFF_DIAGONAL_NOTE))
            .otherwise(pl.lit(None, pl.String)),
        )
        .select(list(PANEL_SCHEMA))
        .sort("builder_effort", "finder_effort", nulls_last=True)
        .collect()
    )
    if old:
        out = lazy(rows)  # nothing to pair: the builder's panel, rows untouched
    elif mode == "matched":
        out = lf.filter(~formal | analysed)
    else:
        out = lf.with_columns(effort_panel=pl.when(formal).then(panel).otherwise(builder_effort))
    return out, table.cast(PANEL_SCHEMA)  # type: ignore[arg-type]


def panel_notes(table: pl.DataFrame | None, pairs: pl.DataFrame | None = None) -> list[str]:
    """Warnings for the report and tables/README.md: old rows whose finder effort is unknown,
    effort pairs that matched panels leave out, and (from `pairs`, the `table_pairs` table)
    why the pooled tables are partial."""
    if table is None or "note" not in table.columns:
        return []
    notes = [OLD_ROWS_NOTE] if table.filter(pl.col("note") == OLD_ROWS_NOTE).height else []
    left = table.filter(~pl.col("analysed"))
    if left.height:
        names = ", ".join(
            f"{b}/{f}" for b, f in left.select("builder_effort", "finder_effort").rows()
        )
        which = (
            "the per-panel tables; the pooled tables read them"
            if pairs is not None
            else ("every table")
        )
        notes.append(
            f"matched panels leave out {left.height} builder/finder effort pair(s) ({names}) "
            f"of {which}; `--panels cross` analyses them per panel"
        )
    if pairs is not None and "partial" in pairs.columns:
        notes += sorted(set(pairs.filter("partial").get_column("note").drop_nulls().to_list()))
    return notes
