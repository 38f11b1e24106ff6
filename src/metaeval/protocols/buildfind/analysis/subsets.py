"""Low-prior and implementation-signal question subsets and their analogue views (Section 4.8,
Appendices J, L)."""

from __future__ import annotations

import polars as pl

from metaeval.protocols.buildfind.analysis.affinity import affinity_from, family_from
from metaeval.protocols.buildfind.analysis.prepared import Prepared, formal_runs, pooled
from metaeval.protocols.buildfind.analysis.ranking import kendall_from

_SLICE_ORDER = {"question_only": 0, "spec_only": 1, "formal": 2}


def question_agreement(rows: pl.DataFrame, *, compile_pass_only: bool = True) -> pl.DataFrame:
    """Per-question 3-trial agreement in the question-only control and the formal condition.

    Table 2: "agreement requires all three attempts in a matched cell to be correct". A matched
    cell is (finder) for the question-only control and (finder, artifact) for the formal slice;
    the cell agrees when every recorded find trial of the cell answered the question correctly
    (choice: all recorded trials, whatever their number; a missing trial is not a failure).
    Formal cells only count pairs where the question is in the artifact's scoring set.
    A question's agreement is the share of its cells that agree.

    - ``low_prior``: question_only_agreement < 0.90 (strict; exactly 90% is not low-prior).
    - ``implementation_signal``: formal_agreement - question_only_agreement >= 0.05
      (inclusive; exactly 5 points qualifies; compared with 1e-9 float slack).
    A question with no cells on a side has null agreement there and is in neither subset.

    Returns columns task, question_id, question_only_cells, question_only_agreement,
    formal_cells, formal_agreement, lift_pp (100 x (formal - question-only)), low_prior,
    implementation_signal; sorted by task, question_id.
    """
    return Prepared(rows, compile_pass_only).agreement


def low_prior_subset(rows: pl.DataFrame) -> pl.DataFrame:
    """Low-prior questions (Sections 4.8, J, L): question-only 3-trial agreement < 90%.

    See `question_agreement` for the agreement definition and boundary semantics. Returns
    columns task, question_id, question_only_cells, question_only_agreement; sorted.
    """
    return Prepared(rows, True).low_prior()


def implementation_signal_subset(
    rows: pl.DataFrame, *, compile_pass_only: bool = True
) -> pl.DataFrame:
    """Implementation-signal questions (Appendix J): formal 3-trial agreement exceeds
    question-only agreement by at least 5 percentage points (inclusive).

    Formal agreement is over the audited scoring set of compile-pass artifacts by default. See
    `question_agreement`. Returns columns task, question_id, question_only_agreement,
    formal_agreement, lift_pp; sorted.
    """
    return Prepared(rows, compile_pass_only).implementation_signal()


def _slice_accuracy(runs: pl.DataFrame) -> pl.DataFrame:
    by_task = pooled(runs, ["slice", "task"])
    overall = pooled(runs, ["slice"]).with_columns(task=pl.lit("all"))
    out = pl.concat([by_task, overall.select(by_task.columns)])
    qonly = out.filter(pl.col("slice") == "question_only").select("task", _qonly=pl.col("accuracy"))
    return (
        out.join(qonly, on="task", how="left")
        .with_columns(
            lift_pp=(pl.col("accuracy") - pl.col("_qonly")) * 100.0,
            _slice_rank=pl.col("slice").replace_strict(_SLICE_ORDER, default=9),
            _task_rank=(pl.col("task") != "all").cast(pl.Int8),
        )
        .sort(["_slice_rank", "_task_rank", "task"])
        .select("slice", "task", "runs", "scored_rows", "accuracy", "perfect", "lift_pp")
    )


def _recovery_gate(runs: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """Eqs. 5-6 within each effort panel: g(b,f,t) = mean Eq. 1 over f's runs on b's artifacts
    for t; recovery = mean of g over contributing finders (cells); panel_finders = finders with
    formal runs in the panel-task. Builders x tasks come from all formal rows of the panel (so a
    builder whose artifacts all failed the compile probe on a task shows 0 cells)."""
    formal = formal_runs(runs)
    g = (
        formal.filter(pl.col("n_scored") > 0)
        .group_by(["effort_panel", "task", "builder", "finder"])
        .agg(g=pl.col("accuracy").mean())
        .group_by(["effort_panel", "task", "builder"])
        .agg(recovery=pl.col("g").mean(), cells=pl.len().cast(pl.Int64))
    )
    panel_rows = rows.filter(pl.col("slice") == "formal")
    grid = (
        panel_rows.select("effort_panel", "builder")
        .unique()
        .join(panel_rows.select("effort_panel", "task").unique(), on="effort_panel")
    )
    finders = formal.group_by(["effort_panel", "task"]).agg(
        panel_finders=pl.col("finder").n_unique().cast(pl.Int64)
    )
    return (
        grid.join(g, on=["effort_panel", "task", "builder"], how="left")
        .join(finders, on=["effort_panel", "task"], how="left")
        .with_columns(pl.col("cells").fill_null(0), pl.col("panel_finders").fill_null(0))
        .select("effort_panel", "builder", "task", "recovery", "cells", "panel_finders")
        .sort(["effort_panel", "builder", "task"])
    )


def subset_views(rows: pl.DataFrame, *, compile_pass_only: bool = True) -> dict[str, pl.DataFrame]:
    """Analogue views on the low-prior and implementation-signal subsets (Table 4, Appendix L).

    For each subset name in ("low_prior", "implementation_signal") the dict holds:

    - ``{name}_subset``: the subset questions (`low_prior_subset` / `implementation_signal_subset`).
    - ``{name}_accuracy`` (Tables 1/4 analogue): slice, task ("all" first, then each task),
      runs, scored_rows, accuracy (pooled over scored subset rows), perfect (share of runs
      all-correct on the subset; computed for controls too), lift_pp (100 x (accuracy -
      question-only accuracy of the same task)). Slices ordered question_only, spec_only, formal.
    - ``{name}_recovery_gate`` (Table 16 analogue): effort_panel, builder, task, recovery,
      cells, panel_finders (see the Eq. 5-6 gate: contributing finders / finders in the panel).
    - ``{name}_kendall_tau`` (Figure 7 analogue): as `kendall_tau`, all-correct on the subset.
    - ``{name}_affinity`` / ``{name}_affinity_family`` (Figure 8 analogue): as `affinity` /
      `affinity_family` with recovery recomputed on the subset.

    - ``low_prior_rb_effort`` (Figure 6): as `rb_effort` (total bytes), a cell contributing when
      one of its runs is all-correct on the low-prior subset.

    Effort stays whole-run (Appendix L), so the tau and R_b views use the run's full novel bytes.
    """
    return subset_views_from(Prepared(rows, compile_pass_only))


def subset_views_from(prep: Prepared) -> dict[str, pl.DataFrame]:
    subsets = {
        "low_prior": (prep.low_prior(), "_lp"),
        "implementation_signal": (prep.implementation_signal(), "_is"),
    }
    grid_rows = prep.formal_grid_rows()
    views: dict[str, pl.DataFrame] = {}
    for name, (subset, suffix) in subsets.items():
        runs = prep.run_view(suffix)
        pairs = affinity_from(runs, "recovery")
        views[f"{name}_subset"] = subset
        views[f"{name}_accuracy"] = _slice_accuracy(runs)
        views[f"{name}_recovery_gate"] = _recovery_gate(runs, grid_rows)
        views[f"{name}_kendall_tau"] = kendall_from(runs)
        views[f"{name}_affinity"] = pairs
        views[f"{name}_affinity_family"] = family_from(pairs)
    views["low_prior_rb_effort"] = subset_rb_from(prep.run_view("_lp"))
    return views


def subset_rb_from(runs: pl.DataFrame) -> pl.DataFrame:
    """R_b (total bytes, Eqs. 2-4) with the all-correct gate on a question subset (Figure 6):
    `runs` is a `Prepared.run_view` of the subset (primary panel already; whole-run bytes)."""
    from metaeval.protocols.buildfind.analysis import effort

    lf = runs.lazy().with_columns(compile_pass=pl.lit(True), total_bytes=pl.col("bytes"))
    return effort.rb_effort_from(effort.cell_costs_from(lf, "total_bytes"), "total_bytes")
