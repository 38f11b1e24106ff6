"""Builder x finder affinity residuals and their family table (Section 4.7, Appendix K)."""

from __future__ import annotations

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.prepared import Prepared, formal_runs

_SCORES = ("recovery", "all_correct")
AFFINITY_KEY = ["effort_panel", "builder", "finder"]
"""Affinity cells: one builder x finder matrix per effort panel (panel-local, Appendix K)."""


def affinity_from(runs: pl.DataFrame, score: str) -> pl.DataFrame:
    """Residuals centred inside each effort panel (the per-panel alternative)."""
    return _matrix(runs, score, ["effort_panel"])


def affinity_matrix_from(runs: pl.DataFrame, score: str) -> pl.DataFrame:
    """Residuals of one builder x finder matrix over every effort (the paper's layout)."""
    return _matrix(runs, score, [])


def _matrix(runs: pl.DataFrame, score: str, scope: list[str]) -> pl.DataFrame:
    """Double-centred residuals of the pair scores; every mean is taken inside `scope`."""
    if score not in _SCORES:
        raise ConfigError(f"unknown affinity score {score!r}; use one of {', '.join(_SCORES)}")
    value = pl.col("accuracy") if score == "recovery" else pl.col("all_correct").cast(pl.Float64)
    key = [*scope, "builder", "finder"]
    cells = (
        formal_runs(runs)
        .filter(pl.col("n_scored") > 0)
        .group_by(key)
        .agg(
            pl.col("builder_family").first(),
            pl.col("finder_family").first(),
            score=value.mean(),
            runs=pl.len().cast(pl.Int64),
        )
    )

    def mean(*by: str) -> pl.Expr:
        return pl.col("score").mean().over(*by) if by else pl.col("score").mean()

    residual = pl.col("score") - mean(*scope, "builder") - mean(*scope, "finder") + mean(*scope)
    return (
        cells.with_columns(residual=residual)
        .select(*key, "residual", "score", "runs", "builder_family", "finder_family")
        .sort(key)
    )


def family_from(pairs: pl.DataFrame) -> pl.DataFrame:
    """Mean pair residual by (builder family, finder family), inside each effort panel when
    the pairs carry one (one table for the whole matrix otherwise)."""
    key = [
        *(["effort_panel"] if "effort_panel" in pairs.columns else []),
        "builder_family",
        "finder_family",
    ]
    return (
        pairs.group_by(key)
        .agg(residual=pl.col("residual").mean(), cells=pl.len().cast(pl.Int64))
        .sort(key)
    )


def affinity(
    rows: pl.DataFrame, *, score: str = "recovery", compile_pass_only: bool = True
) -> pl.DataFrame:
    """Builder-finder affinity residuals (Section 4.7, Appendix K, Figure 5).

    Appendix K: "taking the recovery score used in the matrix view, subtracting the builder
    mean and finder mean, and adding back the grand mean":

        residual(b, f) = s(b, f) - mean_f' s(b, f') - mean_b' s(b', f) + mean_{b', f'} s(b', f').

    Panel-local (Section 2, Appendix K: "affinity is panel-local"): every effort panel is its
    own builder x finder matrix, and the builder, finder and grand means are taken inside the
    panel. Pooling panels into one matrix would subtract a grand mean taken over other panels'
    cells: when builders and finders are paired within panels (a block-diagonal matrix with
    empty off-diagonal blocks), each panel's residuals would shift by a constant and stop
    summing to zero. We chose the effort panel (the paper's unit, a column of every row) over
    connected components of observed pairs: it keeps panels apart even where finder names are
    shared, and inside a complete panel matrix both choices agree. A panel whose observed
    pairs fall apart into disconnected blocks is still one matrix here (the paper's mean
    recipe, see below).

    s(b, f) is the pair's matrix score in its panel over its formal runs, pooled across tasks
    and build trials:

    - ``score="recovery"`` (default): mean Eq. 1 audited accuracy over the pair's find runs.
    - ``score="all_correct"``: share of the pair's runs that are all-correct. The paper does not
      spell out its "matrix normalization"; Table 15's family residuals (up to 0.077) are larger
      than raw accuracy near 99% allows, so this higher-spread score is offered as an option.

    Choices: the means are plain means over the panel's observed (builder, finder) cells; with
    a full panel matrix this is the double-centred residual of the additive model
    s = mu + a_b + c_f and the panel's residuals sum to zero over every row and column; with
    missing cells it is the paper's mean recipe (not a least-squares refit). Runs with an empty
    scoring set are left out; a pair with no scored run has no cell.

    Returns columns effort_panel, builder, finder, residual, score, runs, builder_family,
    finder_family, sorted by effort_panel, builder, finder.
    """
    return affinity_from(Prepared(rows, compile_pass_only).run_view(), score)


def affinity_family(
    rows: pl.DataFrame, *, score: str = "recovery", compile_pass_only: bool = True
) -> pl.DataFrame:
    """Family-level affinity (Table 15): mean of the pair residuals of `affinity` by family,
    inside each effort panel (affinity is panel-local, so families are not pooled across
    panels).

    Each (builder, finder) pair counts once (unweighted by runs); a pair's families are the
    builder_family / finder_family columns of its rows.

    Returns columns effort_panel, builder_family, finder_family, residual, cells (number of
    pairs averaged), sorted by effort_panel, builder_family, finder_family.
    """
    return family_from(affinity(rows, score=score, compile_pass_only=compile_pass_only))


def affinity_matrix(
    rows: pl.DataFrame, *, score: str = "recovery", compile_pass_only: bool = True
) -> pl.DataFrame:
    """Builder-finder affinity as the paper lays it out (Appendix K, Figure 5): ONE builder x
    finder matrix over every agent at every effort ("the full 12-agent matrix"), with the
    builder, finder and grand means taken over all its observed cells.

    The suite reads it on every pair of the run (`analysis.pair_sets`). A run of matched
    pairs only observes the diagonal blocks (high x high, low x low); the means are then over
    those cells, so a panel's residuals no longer sum to zero on their own (the grand mean
    mixes panels); `affinity` is the per-panel alternative. s(b, f) is
    the mean Eq. 1 accuracy over the pair's formal find runs (``score="recovery"``, each run
    weighing the same, pooled across tasks and build trials) or the pair's all-correct share
    (``score="all_correct"``).

    Returns columns builder, finder, residual, score, runs, builder_family, finder_family,
    sorted by builder, finder.
    """
    return affinity_matrix_from(Prepared(rows, compile_pass_only).run_view(), score)


def affinity_matrix_family(
    rows: pl.DataFrame, *, score: str = "recovery", compile_pass_only: bool = True
) -> pl.DataFrame:
    """The family table of `affinity_matrix` (Table 15's 3 x 3 layout): the unweighted mean
    of the pair residuals of each (builder family, finder family).

    Returns columns builder_family, finder_family, residual, cells; sorted by both families.
    """
    return family_from(affinity_matrix(rows, score=score, compile_pass_only=compile_pass_only))
