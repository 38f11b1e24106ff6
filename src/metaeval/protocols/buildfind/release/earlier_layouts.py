"""Layouts of presentation tables that earlier metaeval versions released.

A presentation table (the paper's Table 3) may change layout while its numbers stay the same.
`verify-release` recomputes every table from the released rows; when a released table does
not match the current layout it is also compared with each earlier layout listed here, so a
release made by an earlier version still verifies (and says which layout it holds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from metaeval.protocols.buildfind.analysis.paper_tables import DASH, percent

Layout = Callable[[dict[str, pl.DataFrame]], pl.DataFrame]


def paper_table3_by_position(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Table 3 as released up to 2026-11-27: per effort panel a "<panel> builder" column and
    one column per task, the i-th builder of each panel (sorted by name) on row i, "–" where
    a builder has no gate entry for a task, blank padding under a shorter panel."""
    gate = tables.get("recovery_gate")
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
            data[f"{panel} {task}"] = [_cell(cells.get((b, task))) for b in builders]
        blocks.append(pl.DataFrame(data, schema=dict.fromkeys(data, pl.Utf8)))
    height = max(b.height for b in blocks)
    padded = [
        pl.concat([b, pl.DataFrame({c: [""] * (height - b.height) for c in b.columns})])
        if b.height < height
        else b
        for b in blocks
    ]
    return pl.concat(padded, how="horizontal")


def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return DASH
    return f"{percent(row['G_task'])} ({row['contributing_cells']}/{row['total_cells']})"


EARLIER_LAYOUTS: dict[str, list[tuple[str, Layout]]] = {
    "paper_table3": [
        ("builders by position (releases before 2026-11-27)", paper_table3_by_position)
    ],
}
"""Table name -> (description, builder from the recomputed tables) of each earlier layout."""
