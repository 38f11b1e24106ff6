"""The report's heatmaps keep every axes title clear of their colour bar (tick labels and
label included): the figures are laid out as the report draws them and the title boxes are
measured against the bar's box on the rendered canvas. A Kendall cell without tau says why."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import matplotlib
import polars as pl
import pytest
from matplotlib.figure import Figure

from metaeval.protocols.buildfind.report import figures as report_figures
from metaeval.protocols.buildfind.report import figures_paper as report_figures_paper
from metaeval.protocols.buildfind.report.figures import affinity_figure, drawn, kendall_figure
from metaeval.protocols.buildfind.report.figures_paper import SLICE_LABELS, robustness_figure


def _robustness() -> pl.DataFrame:
    rows = [
        {"view": view, "slice": s, "agent": agent, "recovery": 1.0}
        for view, agents in (("builder", ["documented"]), ("finder", ["ref"]))
        for agent in agents
        for s in ("all", "calibrated_instruments", "low_prior", "implementation_signal")
    ]
    assert {r["slice"] for r in rows} <= set(SLICE_LABELS)
    return pl.DataFrame(rows)


def _affinity() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "effort_panel": ["high", "high", "low", "low"],
            "builder": ["b1", "b2", "b1", "b2"],
            "finder": ["finder-with-a-long-name", "f2", "f1", "f2"],
            "residual": [0.1, -0.1, 0.05, -0.05],
        }
    )


def _kendall() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "effort_panel": ["high", "low"],
            "task": ["http-router", "http-router"],
            "finder_a": ["f1", "f1"],
            "finder_b": ["f2", "f2"],
            "tau": [0.5, -0.2],
        }
    )


FIGURES: dict[str, tuple[Callable[..., str], Callable[[], pl.DataFrame]]] = {
    "robustness": (robustness_figure, _robustness),
    "affinity": (affinity_figure, _affinity),
    "kendall": (kendall_figure, _kendall),
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_no_title_overlaps_the_colour_bar(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Figure] = []

    def capture(_name: str, draw: Callable[[Figure], None], size: Any, _files: Any) -> str:
        with matplotlib.rc_context({"font.size": 9}):  # as the report draws them
            fig = drawn(draw, size)
            fig.canvas.draw()
        made.append(fig)
        return ""

    monkeypatch.setattr(report_figures, "_svg", capture)
    monkeypatch.setattr(report_figures_paper, "_svg", capture)
    figure, data = FIGURES[name]
    figure(data())
    (fig,) = made
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    titled = [ax for ax in fig.axes if ax not in bars and ax.get_title()]
    assert bars and titled
    for bar in bars:
        box = bar.get_tightbbox(renderer)
        for ax in titled:
            title = ax.title.get_window_extent(renderer)
            assert not title.overlaps(box), (name, ax.get_title())


def test_a_kendall_cell_without_tau_says_why() -> None:
    table = pl.DataFrame(
        {
            "effort_panel": ["low", "low"],
            "task": ["t1", "t2"],
            "finder_a": ["f1", "f1"],
            "finder_b": ["f2", "f2"],
            "tau": [None, None],
            "n": [1, 3],
        },
        schema_overrides={"tau": pl.Float64},
    )
    svg = kendall_figure(table)
    assert svg.count("n=1") == 2  # both cells of t1: one builder ranked
    assert svg.count("ties") == 2  # t2: three builders, an ordering all ties
