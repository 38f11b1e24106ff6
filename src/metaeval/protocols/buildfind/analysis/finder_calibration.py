"""Per-finder calibration summary (Appendix E, Table 8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from metaeval.protocols.buildfind.analysis.prepared import Prepared, formal_runs, pooled


def _finder_slice_accuracy(runs: pl.DataFrame, slice_: str, name: str) -> pl.DataFrame:
    return pooled(runs.filter(pl.col("slice") == slice_), ["finder"]).select(
        "finder", pl.col("accuracy").alias(name)
    )


def finder_calibration(rows: pl.DataFrame, *, compile_pass_only: bool = True) -> pl.DataFrame:
    """Per-finder calibration summary (Appendix E, Table 8).

    All accuracies are pooled over scored rows (formal on the audited scoring set of
    compile-pass artifacts; controls on every question). Lifts are percentage points.

    Columns (Table 8 counterpart in brackets):

    - finder, finder_family
    - formal_runs: formal find runs with a non-empty scoring set
    - formal_recovery [Formal]; question_only_accuracy; spec_only_accuracy
    - qonly_lift_pp = 100 x (formal - question-only) [Q-only Delta]
    - spec_only_lift_pp = 100 x (spec-only - question-only) (specification access over priors)
    - formal_minus_spec_only_pp = 100 x (formal - spec-only)
    - low_prior_formal, low_prior_question_only, low_prior_lift_pp [Low-prior Delta]: both
      accuracies restricted to `low_prior_subset`
    - impl_signal_formal, impl_signal_question_only, impl_signal_lift_pp [Impl.-signal Delta]:
      restricted to `implementation_signal_subset`
    - mean_tokens_per_run [Mean tok., which the paper prints in thousands]: mean of
      input_tokens + output_tokens over the finder's formal runs (tokens deduplicated per run;
      runs with null token counts are skipped).

    Not computable from the rows table: a USD cost (the table carries no model identifiers or
    prices), so mean tokens per run is the cost proxy. Missing inputs give nulls (e.g. a finder
    without question-only runs has null question-only accuracy and lifts).

    Sorted like Table 8: formal_recovery descending (nulls last), then finder.
    """
    return finder_calibration_from(Prepared(rows, compile_pass_only))


def finder_calibration_from(prep: Prepared) -> pl.DataFrame:
    runs = prep.run_view()
    lp_runs = prep.run_view("_lp")
    is_runs = prep.run_view("_is")
    finders = prep.runs.group_by("finder").agg(pl.col("finder_family").sort().first())
    formal = formal_runs(runs)
    tokens = formal.group_by("finder").agg(
        formal_runs=(pl.col("n_scored") > 0).sum().cast(pl.Int64),
        mean_tokens_per_run=(pl.col("input_tokens") + pl.col("output_tokens"))
        .cast(pl.Float64)
        .mean(),
    )
    parts = [
        _finder_slice_accuracy(runs, "formal", "formal_recovery"),
        _finder_slice_accuracy(runs, "question_only", "question_only_accuracy"),
        _finder_slice_accuracy(runs, "spec_only", "spec_only_accuracy"),
        _finder_slice_accuracy(lp_runs, "formal", "low_prior_formal"),
        _finder_slice_accuracy(lp_runs, "question_only", "low_prior_question_only"),
        _finder_slice_accuracy(is_runs, "formal", "impl_signal_formal"),
        _finder_slice_accuracy(is_runs, "question_only", "impl_signal_question_only"),
        tokens,
    ]
    out = finders
    for part in parts:
        out = out.join(part, on="finder", how="left")

    def pp(a: str, b: str) -> pl.Expr:
        return (pl.col(a) - pl.col(b)) * 100.0

    return (
        out.with_columns(
            pl.col("formal_runs").fill_null(0),
            qonly_lift_pp=pp("formal_recovery", "question_only_accuracy"),
            spec_only_lift_pp=pp("spec_only_accuracy", "question_only_accuracy"),
            formal_minus_spec_only_pp=pp("formal_recovery", "spec_only_accuracy"),
            low_prior_lift_pp=pp("low_prior_formal", "low_prior_question_only"),
            impl_signal_lift_pp=pp("impl_signal_formal", "impl_signal_question_only"),
        )
        .select(
            "finder",
            "finder_family",
            "formal_runs",
            "formal_recovery",
            "question_only_accuracy",
            "spec_only_accuracy",
            "qonly_lift_pp",
            "spec_only_lift_pp",
            "formal_minus_spec_only_pp",
            "low_prior_formal",
            "low_prior_question_only",
            "low_prior_lift_pp",
            "impl_signal_formal",
            "impl_signal_question_only",
            "impl_signal_lift_pp",
            "mean_tokens_per_run",
        )
        .sort(["formal_recovery", "finder"], descending=[True, False], nulls_last=True)
    )


def with_every_finder(table: pl.DataFrame, finders: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """`table` with a row for each configured finder it lacks (a finder whose every cell
    failed leaves no question rows): formal_runs 0, every accuracy null; sorted as Table 8."""
    have = set(table.get_column("finder").cast(pl.Utf8).to_list())
    missing = [f for f in finders if f.get("name") not in have]
    if not missing:
        return table
    extra = pl.DataFrame(
        {
            "finder": [str(f["name"]) for f in missing],
            "finder_family": [str(f.get("family") or "") for f in missing],
            "formal_runs": [0] * len(missing),
        }
    )
    out = pl.concat([table, extra], how="diagonal_relaxed").select(table.columns)
    return out.sort(["formal_recovery", "finder"], descending=[True, False], nulls_last=True)
