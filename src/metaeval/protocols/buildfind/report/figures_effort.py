"""The effort-vs-accuracy scatter (``fig-effort-accuracy``), drawn like `figures`:
one point per finder and subset from the `effort_accuracy` table, all questions as filled
circles and the low-prior subset as open triangles, a finder's two points joined by a line."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
from markupsafe import Markup
from matplotlib.figure import Figure

from metaeval.protocols.buildfind.report.figures import (
    Files,
    _label,
    _natural,
    _no_data,
    _num,
    _svg,
    _usable,
)

NAME = "fig-effort-accuracy"
SUBSET_STYLE: dict[str, tuple[str, str, bool]] = {
    "all": ("o", "all questions", True),
    "low_prior": ("^", "low-prior questions", False),
}
"""Subset -> (marker, legend label, filled)."""
COLOUR = "#4c72b0"

Point = tuple[str, float, float]
"""(finder, x: mean novel bytes per find run, y: accuracy in percent)."""


def effort_accuracy_points(df: pl.DataFrame) -> dict[str, list[Point]]:
    """Subset -> the points the figure plots, finders in natural order. A finder whose effort
    or accuracy is missing (no bytes measured, nothing scored) has no point."""
    points: dict[str, list[Point]] = {subset: [] for subset in SUBSET_STYLE}
    for rec in df.iter_rows(named=True):
        subset = rec["subset"]
        x, y = _num(rec["mean_novel_bytes"]), _num(rec["accuracy"])
        if subset in points and not (math.isnan(x) or math.isnan(y)):
            points[subset].append((str(rec["finder"]), x, 100 * y))
    for subset in points:
        points[subset].sort(key=lambda p: _natural(p[0]))
    return points


def effort_accuracy_entry(tables: dict[str, pl.DataFrame], files: Files | None) -> dict[str, Any]:
    """The report's figure entry (id, title, caption, inline SVG) of the scatter."""
    return {
        "id": NAME,
        "title": "Inspection effort against accuracy, all and low-prior questions",
        "caption": "One point per finder: mean novel bytes per formal compile-pass find run "
        "(whole-run effort) against pooled accuracy on the audited scoring set (filled "
        "circles) and on its low-prior questions (open triangles), a finder's two points "
        "joined (effort_accuracy).",
        "svg": Markup(effort_accuracy_figure(tables.get("effort_accuracy"), files)),
    }


def effort_accuracy_figure(df: pl.DataFrame | None, files: Files | None = None) -> str:
    """Inspection effort (x) against accuracy (y) per finder, all questions and low-prior."""
    ok, why = _usable(df, ("finder", "subset", "mean_novel_bytes", "accuracy"))
    if not ok:
        return _svg(NAME, lambda fig: _no_data(fig, why), (6, 1.6), files)
    assert df is not None
    points = effort_accuracy_points(df)
    if not any(points.values()):
        return _svg(
            NAME, lambda fig: _no_data(fig, "no data (no measured effort)"), (6, 1.6), files
        )

    def draw(fig: Figure) -> None:
        ax = fig.subplots()
        _join_finders(ax, points)
        for subset, (marker, label, filled) in SUBSET_STYLE.items():
            xs = [p[1] for p in points[subset]]
            ys = [p[2] for p in points[subset]]
            face = COLOUR if filled else "none"
            ax.scatter(
                xs, ys, marker=marker, facecolors=face, edgecolors=COLOUR, label=label, zorder=3
            )
        for finder, x, y in points["all"]:
            ax.annotate(
                _label(finder), (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7
            )
        ax.set_xlabel("inspection effort: mean novel bytes per find run")
        ax.set_ylabel("accuracy (%)")
        ax.grid(alpha=0.3)
        fig.legend(loc="outside lower center", ncol=2, fontsize=8)

    return _svg(NAME, draw, (6.5, 4.2), files)


def _join_finders(ax: Any, points: dict[str, list[Point]]) -> None:
    """A thin grey line from each finder's all-questions point to its low-prior point."""
    low = {finder: (x, y) for finder, x, y in points["low_prior"]}
    for finder, x, y in points["all"]:
        if finder in low:
            lx, ly = low[finder]
            ax.plot([x, lx], [y, ly], color="#999999", linewidth=0.8, zorder=1)
