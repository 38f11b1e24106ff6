"""Bootstrap confidence intervals over artifacts for R_b and recovery (beyond the paper).

The resampling unit is the artifact (task, builder, build_trial) of the primary panel (formal
runs on compile-pass artifacts): a replicate keeps every find run of each drawn artifact, once
per draw. Draws are stratified by (builder, task): tasks are fixed design factors and build
trials the replicates, so every replicate has as many artifacts of each builder on each task
as the run built. Order of the draws (fixed, so a seed gives one answer): for each replicate,
for each (builder, task) in sorted order, ``rng.integers(0, n, n)`` indexes that stratum's n
artifacts sorted by build_trial; ``rng = numpy.random.default_rng(seed)``.

Per replicate, as for the point estimate:

* **R_b** (total_bytes, Eq. 4) per (effort_panel, builder): cell cost = mean metric over the
  cell's all-correct runs (a run drawn twice counts twice), ratio to the panel's least positive
  cost of the (finder, task), geometric mean over the builder's defined cells;
* **recovery** per finder and pooled (finder "all"): mean Eq. 1 accuracy over scored runs,
  the calibration table's compile_pass accuracy.

A replicate where a statistic is undefined (no defined cell) is skipped for it; the interval
is the 2.5 / 97.5 percentile (numpy's default linear interpolation) of the defined replicates.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
import polars as pl

from metaeval.protocols.buildfind.analysis.core import Frame, primary, run_table
from metaeval.protocols.buildfind.seeds import derive_seed

DEFAULT_REPLICATES = 1000
LEVEL = 0.95
METRIC = "total_bytes"
POOLED = "all"
COLUMNS = {
    "statistic": pl.Utf8,
    "effort_panel": pl.Utf8,
    "builder": pl.Utf8,
    "finder": pl.Utf8,
    "estimate": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "artifacts": pl.Int64,
    "replicates": pl.Int64,
    "defined_replicates": pl.Int64,
    "level": pl.Float64,
    "seed": pl.Int64,
}


def bootstrap_seed(seed0: int) -> int:
    """The bootstrap's seed, derived from the run's seed0."""
    return derive_seed(seed0, "bootstrap_ci")


def artifact_weights(strata_of: list[Any], replicates: int, seed: int) -> np.ndarray:
    """(replicates + 1) x artifacts draw counts; row 0 is the point estimate (all ones).

    ``strata_of`` is each artifact's stratum, artifacts sorted by (stratum, build_trial).
    """
    n = len(strata_of)
    counts = np.uint16 if max(Counter(strata_of).values(), default=0) < 2**16 else np.uint32
    weights = np.zeros((replicates + 1, n), dtype=counts)  # draw counts, small in memory
    weights[0] = 1
    strata: dict[Any, list[int]] = defaultdict(list)
    for i, key in enumerate(strata_of):
        strata[key].append(i)
    rng = np.random.default_rng(seed)
    for r in range(1, replicates + 1):
        for b in sorted(strata):
            idx = np.asarray(strata[b])
            drawn = rng.integers(0, len(idx), len(idx))
            np.add.at(weights[r], idx[drawn], 1)
    return weights


def _runs(rows: Frame) -> tuple[pl.DataFrame, list[str], list[str]]:
    """Scored primary runs with their artifact's index ``_a``, and each artifact's builder
    and task (artifacts sorted by builder, task, build_trial)."""
    runs = primary(run_table(rows)).filter(pl.col("accuracy").is_not_null()).collect()
    runs = runs.with_columns(pl.col("effort_panel", "task", "builder", "finder").cast(pl.Utf8))
    artifacts = (
        runs.select("builder", "task", "build_trial")
        .unique()
        .sort("builder", "task", "build_trial")
        .with_row_index("_a")
    )
    runs = runs.join(artifacts, on=["builder", "task", "build_trial"])
    return runs, artifacts.get_column("builder").to_list(), artifacts.get_column("task").to_list()


def _on_artifacts(rows: Frame, indexed: pl.DataFrame) -> pl.DataFrame:
    """The scored primary runs of `rows` with the artifact index ``_a`` of `indexed`."""
    runs = primary(run_table(rows)).filter(pl.col("accuracy").is_not_null()).collect()
    runs = runs.with_columns(pl.col("effort_panel", "task", "builder", "finder").cast(pl.Utf8))
    index = indexed.select("builder", "task", "build_trial", "_a").unique()
    return runs.join(index, on=["builder", "task", "build_trial"])


def _sparse(
    runs: pl.DataFrame, keys: list[str], value: pl.Expr, weights: np.ndarray
) -> dict[tuple[Any, ...], np.ndarray]:
    """Per group of `keys`: sum(w * value) / sum(w * runs) over the group's artifacts, for
    every weight row (only the group's own artifacts are touched)."""
    per = (
        runs.group_by([*keys, "_a"])
        .agg(_v=value.sum().cast(pl.Float64), _n=pl.len().cast(pl.Float64))
        .group_by(keys)
        .agg("_a", "_v", "_n")
    )
    out = {}
    for rec in per.iter_rows():
        *key, idx, v, n = rec
        order = np.argsort(idx)  # a fixed summation order: the same bits on every run
        w = weights[:, np.asarray(idx, dtype=np.int64)[order]].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[tuple(key)] = (w @ np.asarray(v)[order]) / (w @ np.asarray(n)[order])
    return out


def _recovery(runs: pl.DataFrame, weights: np.ndarray) -> dict[str, np.ndarray]:
    """finder (and "all") -> mean Eq. 1 accuracy per weight row."""
    out = {k[0]: v for k, v in _sparse(runs, ["finder"], pl.col("accuracy"), weights).items()}
    pooled = runs.with_columns(finder=pl.lit(POOLED))
    out[POOLED] = _sparse(pooled, ["finder"], pl.col("accuracy"), weights)[(POOLED,)]
    return out


def _rb(runs: pl.DataFrame, weights: np.ndarray) -> dict[tuple[Any, ...], np.ndarray]:
    """(panel, builder) -> R_b (Eq. 4) per weight row."""
    measured = runs.filter(pl.col("all_correct") & pl.col(METRIC).is_not_null())
    keys = ["effort_panel", "finder", "task", "builder"]
    costs = {
        cell: np.where(cost > 0, cost, np.nan)  # zero or undefined: not in C_b
        for cell, cost in _sparse(measured, keys, pl.col(METRIC), weights).items()
    }
    least: dict[tuple[Any, ...], np.ndarray] = {}
    for (panel, finder, task, _b), cost in costs.items():
        key = (panel, finder, task)
        least[key] = np.fmin(least[key], cost) if key in least else cost
    logs: dict[tuple[Any, ...], list[np.ndarray]] = defaultdict(list)
    for (panel, finder, task, builder), cost in sorted(costs.items()):
        logs[(panel, builder)].append(np.log(cost / least[(panel, finder, task)]))
    out = {}
    for key, parts in logs.items():
        stack = np.vstack(parts)
        defined = (~np.isnan(stack)).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[key] = np.exp(np.nansum(stack, axis=0) / defined)
    return out


def _row(stat: str, panel: Any, builder: Any, finder: Any, values: np.ndarray) -> dict[str, Any]:
    sample = values[1:][~np.isnan(values[1:])]
    low, high = (
        np.percentile(sample, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
        if sample.size
        else (None, None)
    )
    return {
        "statistic": stat,
        "effort_panel": panel,
        "builder": builder,
        "finder": finder,
        "estimate": None if np.isnan(values[0]) else float(values[0]),
        "ci_low": None if low is None else float(low),
        "ci_high": None if high is None else float(high),
        "defined_replicates": int(sample.size),
    }


def bootstrap_ci(
    rows: Frame,
    *,
    seed: int,
    replicates: int = DEFAULT_REPLICATES,
    rb_rows: Frame | None = None,
) -> pl.DataFrame:
    """One row per R_b (effort_panel, builder) and per recovery finder (and pooled "all"),
    with the point estimate and its percentile interval; `seed` and `replicates` recorded.
    `rb_rows` (the effort panels' pairs, `analysis.pair_sets`) are the rows of R_b, `rows`
    when None; the artifacts drawn are those of `rows` either way."""
    runs, builders, tasks = _runs(rows)
    weights = artifact_weights(list(zip(builders, tasks, strict=True)), replicates, seed)
    rb_runs = runs if rb_rows is None else _on_artifacts(rb_rows, runs)
    out = []
    for (panel, builder), values in sorted(_rb(rb_runs, weights).items()):
        row = _row("R_b", panel, builder, None, values)
        out.append({**row, "artifacts": builders.count(builder)})
    recovery = _recovery(runs, weights) if runs.height else {}
    for finder in sorted(recovery, key=lambda f: (f == POOLED, f)):
        row = _row("recovery", None, None, finder, recovery[finder])
        out.append({**row, "artifacts": len(builders)})
    table = pl.DataFrame(out, schema={c: t for c, t in COLUMNS.items() if c not in _FIXED})
    table = table.with_columns(
        replicates=pl.lit(replicates, pl.Int64),
        level=pl.lit(LEVEL, pl.Float64),
        seed=pl.lit(seed, pl.Int64),
    )
    return table.select(list(COLUMNS))


_FIXED = ("replicates", "level", "seed")
