"""The paper's appendix figures drawn like `figures` (SVG inline and as files, PNG):
D_b per builder with coverage alone (Figure 2) and the robustness pivots (Figure 3)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from metaeval.protocols.buildfind.report.figures import (
    Files,
    _centres,
    _colorbar,
    _label,
    _natural,
    _no_data,
    _num,
    _svg,
    _usable,
)

SLICE_LABELS = {
    "all": "all",
    "calibrated_instruments": "calibrated instruments",
    "cross_family": "cross-family",
    "low_prior": "low-prior questions",
    "implementation_signal": "implementation-signal",
}


def db_figure(df: pl.DataFrame | None, files: Files | None = None) -> str:
    """Figure 2: per builder, a filled marker at D_b (recovery x coverage, Eq. 8) and an open
    marker at coverage alone, each labelled with its value; builders by D_b, best on top; the
    axis is truncated to the plotted range as in the paper."""
    ok, why = _usable(df, ("builder", "coverage", "D_b"))
    if not ok:
        return _svg("fig-db", lambda fig: _no_data(fig, why), (6, 1.6), files)
    assert df is not None
    recs = [
        (str(r["builder"]), _num(r["D_b"]), _num(r["coverage"])) for r in df.iter_rows(named=True)
    ]
    recs.sort(key=lambda r: (math.isnan(r[1]), -r[1] if not math.isnan(r[1]) else 0.0, r[0]))
    recs.reverse()  # bottom-up: best D_b ends on top
    finite = [v for _, d, c in recs for v in (d, c) if not math.isnan(v)]
    low = max(0.0, math.floor((min(finite, default=0.0) - 0.05) * 20) / 20)

    def draw(fig: Figure) -> None:
        ax = fig.subplots()
        y = np.arange(len(recs))
        d = [r[1] for r in recs]
        c = [r[2] for r in recs]
        ax.scatter(d, y, marker="o", color="#4c72b0", label="D_b (recovery x coverage)", zorder=3)
        ax.scatter(c, y, marker="o", facecolors="none", edgecolors="#4c72b0", label="coverage")
        for yi, (_, dv, cv) in enumerate(recs):
            shown = "n/a" if math.isnan(dv) else f"{dv:.3f}"
            cov = "n/a" if math.isnan(cv) else f"{cv:.3f}"
            ax.text(
                1.02,
                yi,
                f"D_b={shown}  cov={cov}",
                va="center",
                fontsize=8,
                transform=ax.get_yaxis_transform(),  # x in axes units: right of the plot
            )
        ax.set_yticks(y, [_label(r[0]) for r in recs])
        ax.set_xlim(low, 1.02)
        ax.set_ylim(-0.6, len(recs) - 0.4)
        ax.set_xlabel(f"rate (axis truncated at {low:.2f})")
        fig.legend(loc="outside lower center", ncol=2, fontsize=8)

    return _svg("fig-db", draw, (7.5, 1.5 + 0.38 * len(recs)), files)


def robustness_figure(df: pl.DataFrame | None, files: Files | None = None) -> str:
    """Figure 3: one heatmap per view (builder, finder), slices as rows, agents as columns,
    each cell annotated with its recovery in percent (one decimal)."""
    ok, why = _usable(df, ("view", "slice", "agent", "recovery"))
    if not ok:
        return _svg("fig-robustness", lambda fig: _no_data(fig, why), (6, 1.6), files)
    assert df is not None
    views = [v for v in ("builder", "finder") if v in set(df.get_column("view").to_list())]
    grids = []
    for view in views:
        sub = df.filter(pl.col("view") == view)
        agents = sorted(set(sub.get_column("agent").to_list()), key=_natural)
        present = set(sub.get_column("slice").to_list())
        slices = [s for s in SLICE_LABELS if s in present]
        matrix = np.full((len(slices), len(agents)), np.nan)
        for rec in sub.iter_rows(named=True):
            matrix[slices.index(rec["slice"]), agents.index(rec["agent"])] = 100 * _num(
                rec["recovery"]
            )
        grids.append((view, slices, agents, matrix))
    finite = np.concatenate([g[3][~np.isnan(g[3])] for g in grids])
    low = float(finite.min()) if finite.size else 0.0
    low = min(low, 99.0)

    def draw(fig: Figure) -> None:
        axes = fig.subplots(len(grids), 1, squeeze=False)[:, 0]
        image = None
        for ax, (view, slices, agents, matrix) in zip(axes, grids, strict=True):
            image = ax.pcolormesh(
                np.ma.masked_invalid(matrix), cmap="viridis", vmin=low, vmax=100.0
            )
            ax.set_xlim(0, matrix.shape[1])
            ax.set_ylim(matrix.shape[0], 0)
            ax.set_xticks(_centres(agents), [_label(a) for a in agents], rotation=45, ha="right")
            ax.set_yticks(_centres(slices), [SLICE_LABELS[s] for s in slices])
            ax.set_title(f"{view} view")  # a title no wider than its axes: clear of the bar
            for i in range(matrix.shape[0]):
                for j in range(matrix.shape[1]):
                    v = matrix[i, j]
                    text = "n/a" if math.isnan(v) else f"{v:.1f}"
                    ax.text(
                        j + 0.5,
                        i + 0.5,
                        text,
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if not math.isnan(v) and v < (low + 100) / 2 else "black",
                    )
        if image is not None:
            _colorbar(fig, image, axes.tolist(), "exact-match recovery (%)")

    widest = max(len(g[2]) for g in grids)
    return _svg("fig-robustness", draw, (3.0 + 0.7 * widest, 0.8 + 2.4 * len(grids)), files)
