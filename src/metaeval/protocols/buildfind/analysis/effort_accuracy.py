"""Inspection effort against accuracy per finder, on all questions and on the low-prior subset
(the data of the effort-vs-accuracy figure, issue 27's Figure 6 companion).

One row per (finder, subset): over the finder's formal compile-pass find runs that score at
least one question of the subset, the mean inspection effort per run (novel retrieval plus
novel tool-call bytes, whole-run as in Appendix L: a run's bytes cannot be split by question)
and the accuracy pooled over the scored rows (correct scored rows / scored rows, the audited
scoring set; the same pooling as `low_prior_accuracy`). The low-prior subset is the
question-only-agreement-below-90% set of `low_prior_subset`.
"""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis.core import FORMAL
from metaeval.protocols.buildfind.analysis.prepared import Prepared

SUBSETS = {"all": "", "low_prior": "_lp"}
"""Subset name -> the `Prepared.run_view` suffix of its counts."""

SCHEMA = {
    "finder": pl.String,
    "subset": pl.String,
    "runs": pl.Int64,
    "mean_novel_bytes": pl.Float64,
    "scored_rows": pl.Int64,
    "correct_rows": pl.Int64,
    "accuracy": pl.Float64,
}


def effort_accuracy(rows: pl.DataFrame) -> pl.DataFrame:
    """The table from question rows (panels already formed; see the module doc)."""
    return effort_accuracy_from(Prepared(rows, True))


def effort_accuracy_from(prep: Prepared) -> pl.DataFrame:
    """`effort_accuracy` from shared aggregations: sorted by finder, then all before low_prior."""
    parts = []
    for subset, suffix in SUBSETS.items():
        runs = prep.run_view(suffix).filter(
            (pl.col("slice").cast(pl.String) == FORMAL) & (pl.col("n_scored") > 0)
        )
        parts.append(
            runs.group_by(pl.col("finder").cast(pl.String))
            .agg(
                runs=pl.len().cast(pl.Int64),
                mean_novel_bytes=pl.col("bytes").cast(pl.Float64).mean(),
                scored_rows=pl.col("n_scored").sum().cast(pl.Int64),
                correct_rows=pl.col("n_correct").sum().cast(pl.Int64),
            )
            .with_columns(
                subset=pl.lit(subset),
                accuracy=pl.col("correct_rows") / pl.col("scored_rows"),
            )
        )
    table = pl.concat(parts).select(list(SCHEMA)).cast(SCHEMA)  # type: ignore[arg-type]
    order = pl.col("subset").replace_strict(list(SUBSETS), list(range(len(SUBSETS))))
    return table.sort(pl.col("finder"), order)
