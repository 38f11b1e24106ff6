"""Rank stability: Kendall tau-b between finders' builder orderings (Section 4.6, Figure 4)."""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis.prepared import Prepared, formal_runs


def kendall_from(runs: pl.DataFrame) -> pl.DataFrame:
    panel_task = ["effort_panel", "task"]
    formal = formal_runs(runs)
    costs = (
        formal.filter(pl.col("all_correct").fill_null(False))
        .group_by([*panel_task, "finder", "builder"])
        .agg(cost=pl.col("bytes").cast(pl.Float64).mean())
        .filter(pl.col("cost").is_not_null())
    )
    finders = formal.select([*panel_task, "finder"]).unique()
    pairs = (
        finders.join(finders, on=panel_task, suffix="_b")
        .filter(pl.col("finder") < pl.col("finder_b"))
        .rename({"finder": "finder_a"})
    )
    pair_key = [*panel_task, "finder_a", "finder_b"]
    matched = pairs.join(
        costs.rename({"finder": "finder_a", "cost": "x"}), on=[*panel_task, "finder_a"]
    ).join(
        costs.rename({"finder": "finder_b", "cost": "y"}), on=[*panel_task, "finder_b", "builder"]
    )
    counts = matched.group_by(pair_key).agg(n=pl.len().cast(pl.Int64))
    stats = (
        matched.join(matched, on=pair_key, suffix="_2")
        .filter(pl.col("builder") < pl.col("builder_2"))
        .with_columns(
            sx=(pl.col("x") - pl.col("x_2")).sign(),
            sy=(pl.col("y") - pl.col("y_2")).sign(),
        )
        .group_by(pair_key)
        .agg(
            s=(pl.col("sx") * pl.col("sy")).sum(),
            n0=pl.len().cast(pl.Float64),
            n1=(pl.col("sx") == 0).sum().cast(pl.Float64),
            n2=(pl.col("sy") == 0).sum().cast(pl.Float64),
        )
    )
    denom = ((pl.col("n0") - pl.col("n1")) * (pl.col("n0") - pl.col("n2"))).sqrt()
    out = (
        pairs.join(counts, on=pair_key, how="left")
        .join(stats, on=pair_key, how="left")
        .with_columns(
            n=pl.col("n").fill_null(0),
            tau=pl.when((pl.col("n") >= 2) & (denom > 0)).then(pl.col("s") / denom),
        )
    )
    return out.select(*pair_key, pl.col("tau").cast(pl.Float64), pl.col("n").cast(pl.Int64)).sort(
        pair_key
    )


def kendall_tau(rows: pl.DataFrame, *, compile_pass_only: bool = True) -> pl.DataFrame:
    """Kendall tau-b between finder pairs on total-byte builder orderings (Appendix Figure 4).

    For each (effort_panel, task) and finder f, the cell cost of builder b is Eq. 2: the mean,
    over f's all-correct formal runs on b's artifacts for the task (pooling build trials), of
    the run's total novel bytes (novel_retrieval_bytes + novel_tool_call_bytes). A builder with
    no all-correct run for f has no cell and drops out of every pair involving f. For each
    unordered finder pair (finder_a < finder_b, both with formal runs in the panel-task), tau-b
    compares the two cost orderings over the n builders where both finders have a cell:

        tau_b = (n_c - n_d) / sqrt((n_0 - n_1)(n_0 - n_2)),

    n_0 = n(n-1)/2, n_1 / n_2 = builder pairs tied in finder_a's / finder_b's costs (ties are
    exact float equality of the cell means).

    Choices: ``tau`` is null when n < 2 or when either ordering is all ties (denominator 0);
    such pairs are still listed with their n. Finders are paired only inside an effort panel.
    A single finder gives an empty table.

    Returns columns effort_panel, task, finder_a, finder_b, tau (Float64), n (Int64), sorted by
    effort_panel, task, finder_a, finder_b.
    """
    return kendall_from(Prepared(rows, compile_pass_only).run_view())
