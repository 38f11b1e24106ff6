"""Control-conditioned robustness pivots (paper Figure 3, Appendix J).

Exact-match recovery (correct scored rows / scored rows of formal primary runs, the audited
scoring set) in a builder view (per builder) and a finder view (per finder), on five slices:

* ``all``: every formal primary run;
* ``calibrated_instruments``: the builder view over the ``TOP`` finders with the highest
  artifact-conditioned recovery, the finder view over the ``TOP`` builders with the highest
  downstream recovery (ties by name; every agent when there are fewer);
* ``cross_family``: builder and finder of different families;
* ``low_prior`` / ``implementation_signal``: scoring set restricted to that question subset.
"""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis.prepared import Prepared, formal_runs

TOP = 4
SLICES = ("all", "calibrated_instruments", "cross_family", "low_prior", "implementation_signal")
VIEWS = {"builder": "finder", "finder": "builder"}  # view -> the side a calibrated slice limits


def _pooled(runs: pl.DataFrame, view: str, name: str) -> pl.DataFrame:
    return (
        runs.group_by(view)
        .agg(
            scored_rows=pl.col("n_scored").sum().cast(pl.Int64),
            correct_rows=pl.col("n_correct").sum().cast(pl.Int64),
        )
        .filter(pl.col("scored_rows") > 0)
        .select(
            pl.lit(view).alias("view"),
            pl.lit(name).alias("slice"),
            pl.col(view).cast(pl.Utf8).alias("agent"),
            "scored_rows",
            "correct_rows",
            recovery=pl.col("correct_rows") / pl.col("scored_rows"),
        )
    )


def _top(runs: pl.DataFrame, side: str) -> list[str]:
    ranked = _pooled(runs, side, "").sort(["recovery", "agent"], descending=[True, False])
    return ranked.get_column("agent").head(TOP).to_list()


def robustness_pivots(rows: pl.DataFrame, *, compile_pass_only: bool = True) -> pl.DataFrame:
    """The Figure 3 pivots from the question rows (see `robustness_from`)."""
    return robustness_from(Prepared(rows, compile_pass_only))


def robustness_from(prep: Prepared) -> pl.DataFrame:
    """Columns: view, slice, agent, scored_rows, correct_rows, recovery (a fraction)."""
    runs = formal_runs(prep.run_view()).with_columns(
        pl.col("builder", "finder", "builder_family", "finder_family").cast(pl.Utf8)
    )
    by_slice = {
        "all": runs,
        "cross_family": runs.filter(pl.col("builder_family") != pl.col("finder_family")),
        "low_prior": formal_runs(prep.run_view("_lp")),
        "implementation_signal": formal_runs(prep.run_view("_is")),
    }
    parts = []
    for view, other in VIEWS.items():
        calibrated = runs.filter(pl.col(other).is_in(_top(runs, other)))
        for name in SLICES:
            chosen = calibrated if name == "calibrated_instruments" else by_slice[name]
            parts.append(_pooled(chosen, view, name))
    order = {n: i for i, n in enumerate(SLICES)}
    out = pl.concat(parts).with_columns(_o=pl.col("slice").replace_strict(order))
    return out.sort(["view", "_o", "agent"]).drop("_o")
