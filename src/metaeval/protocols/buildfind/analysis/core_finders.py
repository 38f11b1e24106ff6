"""The post-calibration core-finder selector (paper Appendix E).

A finder joins the routine panel when it passes every hard gate the paper lists: formal
recovery, finder-specific question-only lift, low-prior lift, implementation-signal lift,
cost, rank stability and affinity. The paper names the gates, not their thresholds; ours
are below (choices, each a parameter). With them, Table 8's own figures select the two Sonnet
finders and record MiMo-v2.5-pro-low as the prior-stress audit finder, as the paper reports
(`tests/test_buildfind_core_finders.py`).

* formal recovery >= 0.95 (the panel must recover what the artifacts hold);
* question-only, low-prior and implementation-signal lifts >= 1 pp each: a finder whose own
  question-only control is as good as its artifact-conditioned answers (a saturated control)
  measures its priors, not the artifact;
* cost: mean tokens per formal find run <= half the median over the finders;
* rank stability: mean Kendall tau with the other finders of its effort panel >= 0 (it orders
  builders' effort as the panel does; `kendall_tau`, per panel); a finder with no defined tau
  fails (unmeasured);
* affinity: |mean residual on its own family's builders| <= 0.05 (`affinity_matrix`, every
  pair): it does not favour its family's artifacts. No own-family cell: nothing to favour.

`role` is "core" for a finder passing every gate; the finder outside the core with the
largest question-only lift among those passing the recovery gate is the "prior_stress_audit"
finder (the paper's MiMo-v2.5-pro-low).
"""

from __future__ import annotations

import polars as pl

MIN_FORMAL_RECOVERY = 0.95
MIN_LIFT_PP = 1.0
MAX_COST_OF_MEDIAN = 0.5
MIN_MEAN_TAU = 0.0
MAX_OWN_FAMILY_AFFINITY = 0.05
CORE, PRIOR_STRESS = "core", "prior_stress_audit"
GATES = (
    "recovery_ok",
    "qonly_lift_ok",
    "low_prior_lift_ok",
    "impl_signal_lift_ok",
    "cost_ok",
    "rank_ok",
    "affinity_ok",
)


def core_finders_from(
    calibration: pl.DataFrame, kendall: pl.DataFrame, matrix: pl.DataFrame
) -> pl.DataFrame:
    """One row per calibrated finder: the gate values, each gate's verdict, `selected` and
    `role`; sorted by finder."""
    taus = pl.concat(
        [
            kendall.select(finder="finder_a", tau="tau"),
            kendall.select(finder="finder_b", tau="tau"),
        ]
    )
    rank = taus.drop_nulls("tau").group_by("finder").agg(mean_tau=pl.col("tau").mean())
    own = (
        matrix.filter(pl.col("builder_family") == pl.col("finder_family"))
        .group_by("finder")
        .agg(own_family_affinity=pl.col("residual").mean())
    )
    table = calibration.filter(pl.col("formal_runs") > 0).select(
        "finder",
        "finder_family",
        "formal_recovery",
        "qonly_lift_pp",
        "low_prior_lift_pp",
        "impl_signal_lift_pp",
        "mean_tokens_per_run",
    )
    median = table.get_column("mean_tokens_per_run").median()
    ceiling = None if median is None else MAX_COST_OF_MEDIAN * float(median)  # type: ignore[arg-type]

    def at_least(column: str, floor: float) -> pl.Expr:
        return (pl.col(column) >= floor).fill_null(False)

    out = (
        table.join(rank, on="finder", how="left")
        .join(own, on="finder", how="left")
        .with_columns(
            recovery_ok=at_least("formal_recovery", MIN_FORMAL_RECOVERY),
            qonly_lift_ok=at_least("qonly_lift_pp", MIN_LIFT_PP),
            low_prior_lift_ok=at_least("low_prior_lift_pp", MIN_LIFT_PP),
            impl_signal_lift_ok=at_least("impl_signal_lift_pp", MIN_LIFT_PP),
            cost_ok=(pl.col("mean_tokens_per_run") <= ceiling).fill_null(False)
            if ceiling is not None
            else pl.lit(False),
            rank_ok=at_least("mean_tau", MIN_MEAN_TAU),
            affinity_ok=(pl.col("own_family_affinity").abs() <= MAX_OWN_FAMILY_AFFINITY).fill_null(
                True
            ),
        )
        .with_columns(selected=pl.all_horizontal(GATES))
    )
    stress = (
        out.filter(
            ~pl.col("selected") & pl.col("recovery_ok") & pl.col("qonly_lift_pp").is_not_null()
        )
        .sort(["qonly_lift_pp", "finder"], descending=[True, False])
        .head(1)
        .get_column("finder")
        .to_list()
    )
    return out.with_columns(
        role=pl.when("selected")
        .then(pl.lit(CORE))
        .when(pl.col("finder").is_in(stress))
        .then(pl.lit(PRIOR_STRESS))
        .otherwise(pl.lit(None, pl.String)),
        cost_ceiling=pl.lit(ceiling, pl.Float64),
    ).sort("finder")
