"""The report's figures, drawn by matplotlib (Agg canvas) as SVG text to inline in the page.

* R_b bars per effort panel, each bar annotated with its value and the cell count |C_b|
  (``rb_effort``);
* builder x finder affinity residual heatmaps, one per effort panel, diverging colours centred
  at 0 (``affinity``);
* Kendall tau heatmaps, one finder x finder panel per (effort panel, task) (``kendall_tau``).

A figure whose table is missing, empty or lacks its columns shows "no data" instead.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib
import numpy as np
import polars as pl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

NA = "n/a"
NO_DATA = "no data"


def _label(text: Any) -> str:
    """Text safe for matplotlib: '$' would start mathtext."""
    return str(text).replace("$", r"\$")


def _usable(df: pl.DataFrame | None, columns: Sequence[str]) -> tuple[bool, str]:
    if df is None:
        return False, NO_DATA
    missing = [c for c in columns if c not in df.columns]
    if missing:
        return False, f"{NO_DATA} (missing column(s): {', '.join(missing)})"
    if df.height == 0:
        return False, NO_DATA
    return True, ""


def _no_data(fig: Figure, text: str) -> None:
    fig.text(0.5, 0.5, _label(text), ha="center", va="center", fontsize=12, color="#555555")


Files = dict[str, bytes]
"""File name -> content of the figures drawn as standalone files (SVG and PNG)."""


def _svg(
    name: str, draw: Callable[[Figure], None], size: tuple[float, float], files: Files | None
) -> str:
    """Draw a figure on an Agg canvas and return it as inline-ready SVG markup; with `files`,
    also add ``<name>.svg`` (standalone) and ``<name>.png`` to it."""
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name, "font.size": 9}):
        fig = drawn(draw, size)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata=_SVG_METADATA)
        if files is not None:
            png = io.BytesIO()
            fig.savefig(png, format="png", dpi=150, metadata={"Software": None})
            files[f"{name}.svg"] = buf.getvalue().encode("utf-8")
            files[f"{name}.png"] = png.getvalue()
    return _inline_svg(buf.getvalue(), name)


def drawn(draw: Callable[[Figure], None], size: tuple[float, float]) -> Figure:
    """A figure of `size` inches, laid out by the constrained engine, with `draw` applied."""
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    draw(fig)
    return fig


_SVG_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}


def _inline_svg(text: str, prefix: str) -> str:
    """Strip the XML prologue and namespace URLs; make element ids unique per figure."""
    text = text[text.index("<svg") :]
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', text)
    return text.strip()


def _cmap() -> Any:
    return matplotlib.colormaps["RdBu_r"].with_extremes(bad="#eeeeee")


def _centres(labels: Sequence[Any]) -> np.ndarray:
    return np.arange(len(labels)) + 0.5


def _mesh(ax: Any, matrix: np.ndarray, limit: float) -> Any:
    """A vector heatmap (row 0 on top) with a diverging colormap centred at 0."""
    image = ax.pcolormesh(
        np.ma.masked_invalid(matrix),
        cmap=_cmap(),
        vmin=-limit,
        vmax=limit,
        edgecolors="white",
        linewidth=0.5,
    )
    ax.set_xlim(0, matrix.shape[1])
    ax.set_ylim(matrix.shape[0], 0)
    return image


POOLED = "every effort panel pooled"
"""The title of a matrix computed over every agent and effort at once (no panel column)."""


def _colorbar(fig: Figure, image: Any, ax: Any, label: str) -> None:
    bar = fig.colorbar(image, ax=ax, label=label, shrink=0.8)
    if bar.solids is not None:
        bar.solids.set_rasterized(False)  # keep the SVG free of embedded bitmaps


def rb_figure(df: pl.DataFrame | None, files: Files | None = None, name: str = "fig-rb") -> str:
    """Horizontal R_b bars, one axes per effort panel, annotated with R_b and |C_b|; `name`
    names the files (the low-prior analogue, Figure 6, is drawn the same way)."""
    ok, why = _usable(df, ("effort_panel", "builder", "R_b", "cells"))
    if not ok:
        return _svg(name, lambda fig: _no_data(fig, why), (6, 1.6), files)
    assert df is not None
    df, metric = _one_metric(df)
    df = df.with_columns(pl.col("effort_panel").cast(pl.Utf8).fill_null(NA))
    panels = sorted(set(df.get_column("effort_panel").to_list()), key=_natural)
    tallest = max(df.filter(pl.col("effort_panel") == p).height for p in panels)
    height = 1.2 + 0.38 * tallest
    has_total = "total_cells" in df.columns

    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, panel in zip(axes, panels, strict=True):
            sub = df.filter(pl.col("effort_panel") == panel)
            recs = sorted(
                sub.iter_rows(named=True),
                key=lambda r: _rb_sort_key(_num(r["R_b"]), r["builder"]),
            )
            recs.reverse()  # barh draws bottom-up; best (lowest) R_b ends on top
            values = [_num(r["R_b"]) for r in recs]
            finite = [v for v in values if not math.isnan(v)]
            top = max(finite + [1.0])
            y = np.arange(len(recs))
            ax.barh(y, [0.0 if math.isnan(v) else v for v in values], height=0.6, color="#4c72b0")
            ax.set_ylim(-0.6, tallest - 0.4)  # same bar thickness in every panel
            ax.axvline(1.0, color="#888888", linewidth=0.8, linestyle="--")
            ax.set_yticks(y, [_label(r["builder"]) for r in recs])
            ax.set_xlim(0, top * 1.6)
            for yi, (rec, value) in enumerate(zip(recs, values, strict=True)):
                cells = NA if rec["cells"] is None else str(rec["cells"])
                if has_total and rec["total_cells"] is not None:
                    cells = f"{cells}/{rec['total_cells']}"
                shown = NA if math.isnan(value) else f"{value:.3f}"
                x = 0.0 if math.isnan(value) else value
                ax.text(x + top * 0.02, yi, f"{shown}  |C_b|={cells}", va="center", fontsize=8)
            ax.set_title(_label(f"effort panel: {panel}"))
            ax.set_xlabel(_label(f"R_b on {metric} (1.0 = least effort in cell)"))

    return _svg(name, draw, (max(5.0, 4.6 * len(panels)), height), files)


def _one_metric(df: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """R_b tables may stack several effort metrics; plot the reported one (total_bytes)."""
    if "metric" not in df.columns:
        return df, "total bytes"
    metrics = [m for m in df.get_column("metric").unique().to_list() if m is not None]
    if not metrics:
        return df, "total bytes"
    chosen = "total_bytes" if "total_bytes" in metrics else sorted(metrics)[0]
    return df.filter(pl.col("metric") == chosen), chosen


def _rb_sort_key(value: float, builder: Any) -> tuple[bool, float, str]:
    """Lowest R_b first, builders without a score last, ties by name."""
    missing = math.isnan(value)
    return missing, 0.0 if missing else value, str(builder)


def _natural(value: Any) -> list[Any]:
    """Sort key that orders 'f2' before 'f10'."""
    parts = re.split(r"(\d+)", str(value))
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts]


def _num(value: Any) -> float:
    if value is None:
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _annotate(
    ax: Any,
    matrix: np.ndarray,
    limit: float,
    fmt: Callable[[float], str],
    *,
    skip_diagonal: bool = False,
    why: dict[tuple[int, int], str] | None = None,
) -> None:
    """Each cell's value as text; a missing one as n/a, with its reason from `why` (by cell)."""
    rows, cols = matrix.shape
    size = 8 if max(rows, cols) <= 8 else 6
    for i in range(rows):
        for j in range(cols):
            if skip_diagonal and i == j:
                continue
            value = matrix[i, j]
            if math.isnan(value):
                reason = (why or {}).get((i, j))
                text, color = (f"{NA}\n{reason}" if reason else NA), "#777777"
            else:
                text = fmt(value)
                color = "white" if abs(value) > 0.6 * limit else "black"
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=size, color=color)


def affinity_figure(df: pl.DataFrame | None, files: Files | None = None) -> str:
    """Builder x finder residual heatmaps, one per effort panel (affinity is panel-local),
    diverging colours centred at 0, values annotated."""
    ok, why = _usable(df, ("builder", "finder", "residual"))
    if not ok:
        return _svg("fig-affinity", lambda fig: _no_data(fig, why), (6, 1.6), files)
    assert df is not None
    if "effort_panel" not in df.columns:  # affinity_matrix: one matrix over every effort
        df = df.with_columns(effort_panel=pl.lit(POOLED))
    df = df.with_columns(pl.col("effort_panel").cast(pl.Utf8).fill_null(NA))
    cells = df.group_by("effort_panel", "builder", "finder").agg(
        pl.col("residual").cast(pl.Float64).mean()
    )
    panels = sorted(set(cells.get_column("effort_panel").to_list()), key=_natural)
    grids = []
    for panel in panels:
        sub = cells.filter(pl.col("effort_panel") == panel)
        builders = sorted(set(sub.get_column("builder").to_list()), key=_natural)
        finders = sorted(set(sub.get_column("finder").to_list()), key=_natural)
        matrix = np.full((len(builders), len(finders)), np.nan)
        for rec in sub.iter_rows(named=True):
            i, j = builders.index(rec["builder"]), finders.index(rec["finder"])
            matrix[i, j] = _num(rec["residual"])
        grids.append((panel, builders, finders, matrix))
    finite = np.concatenate([g[3][~np.isnan(g[3])] for g in grids])
    limit = float(np.max(np.abs(finite))) if finite.size else 0.0
    limit = limit if limit > 0 else 1.0

    def draw(fig: Figure) -> None:
        axes = fig.subplots(1, len(grids), squeeze=False)[0]
        image = None
        for ax, (panel, builders, finders, matrix) in zip(axes, grids, strict=True):
            image = _mesh(ax, matrix, limit)
            ax.set_xticks(_centres(finders), [_label(f) for f in finders], rotation=45, ha="right")
            ax.set_yticks(_centres(builders), [_label(b) for b in builders])
            ax.set_xlabel("finder")
            ax.set_ylabel("builder")
            ax.set_title(_label(panel if panel == POOLED else f"effort panel: {panel}"))
            _annotate(ax, matrix, limit, lambda v: f"{v:+.3f}")
        if image is not None:
            _colorbar(fig, image, axes.tolist(), "residual (red: above marginal)")

    widest = max(len(g[2]) for g in grids)
    tallest = max(len(g[1]) for g in grids)
    width = 1.5 + (1.5 + 0.75 * widest) * len(grids)
    height = 2.2 + 0.4 * tallest
    return _svg("fig-affinity", draw, (max(5.0, width), max(2.8, height)), files)


def kendall_figure(df: pl.DataFrame | None, files: Files | None = None) -> str:
    """Finder x finder Kendall tau heatmaps: rows are effort panels, columns are tasks."""
    ok, why = _usable(df, ("effort_panel", "task", "finder_a", "finder_b", "tau"))
    if not ok:
        return _svg("fig-kendall", lambda fig: _no_data(fig, why), (6, 1.6), files)
    assert df is not None
    df = df.with_columns(pl.col("effort_panel", "task").cast(pl.Utf8).fill_null(NA))
    panels = sorted(set(df.get_column("effort_panel").to_list()), key=_natural)
    tasks = sorted(set(df.get_column("task").to_list()), key=_natural)
    grids: dict[tuple[str, str], tuple[list[str], np.ndarray, dict[tuple[int, int], str]]] = {}
    widest = 1
    for panel in panels:
        for task in tasks:
            sub = df.filter((pl.col("effort_panel") == panel) & (pl.col("task") == task))
            if sub.height == 0:
                continue
            names = sorted(
                set(sub.get_column("finder_a").to_list())
                | set(sub.get_column("finder_b").to_list()),
                key=_natural,
            )
            matrix = np.full((len(names), len(names)), np.nan)
            reasons: dict[tuple[int, int], str] = {}
            for rec in sub.iter_rows(named=True):
                i, j = names.index(rec["finder_a"]), names.index(rec["finder_b"])
                matrix[i, j] = matrix[j, i] = _num(rec["tau"])
                if "n" in rec and rec["tau"] is None:  # tau needs 2 builders and no all-tie
                    reasons[(i, j)] = reasons[(j, i)] = (
                        f"n={rec['n']}" if (rec["n"] or 0) < 2 else "ties"
                    )
            np.fill_diagonal(matrix, np.nan)  # a finder against itself is not informative
            grids[(panel, task)] = (names, matrix, reasons)
            widest = max(widest, len(names))

    def draw(fig: Figure) -> None:
        axes = fig.subplots(len(panels), len(tasks), squeeze=False)
        image = None
        for r, panel in enumerate(panels):
            for c, task in enumerate(tasks):
                ax = axes[r][c]
                ax.set_title(_label(f"{panel} / {task}"), fontsize=9)
                if (panel, task) not in grids:
                    ax.axis("off")
                    ax.text(0.5, 0.5, NO_DATA, ha="center", va="center", transform=ax.transAxes)
                    continue
                names, matrix, reasons = grids[(panel, task)]
                image = _mesh(ax, matrix, 1.0)
                ax.set_aspect("equal")
                ticks = [_label(n) for n in names]
                ax.set_xticks(_centres(names), ticks, rotation=45, ha="right", fontsize=7)
                ax.set_yticks(_centres(names), ticks, fontsize=7)
                _annotate(ax, matrix, 1.0, lambda v: f"{v:.2f}", skip_diagonal=True, why=reasons)
        if image is not None:
            _colorbar(fig, image, axes.ravel().tolist(), "Kendall tau")

    cell = 1.2 + 0.55 * widest
    return _svg("fig-kendall", draw, (1.5 + cell * len(tasks), 0.6 + cell * len(panels)), files)
