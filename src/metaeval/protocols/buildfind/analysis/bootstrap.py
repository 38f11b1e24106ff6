"""Bootstrap confidence intervals over artifacts for R_b and recovery (beyond the paper).

The resampling unit is the artifact (task, builder, build_trial) of the primary panel (formal
runs on compile-pass artifacts): a replicate keeps every find run of each drawn artifact, once
per draw. Draws are stratified by builder, so every replicate has as many artifacts of each
builder as the run built. Order of the draws (fixed, so a seed gives one answer): for each
replicate, for each builder in sorted order, ``rng.integers(0, n, n)`` indexes that builder's
n artifacts sorted by (task, build_trial); ``rng = numpy.random.default_rng(seed)``.

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

from collections import defaultdict
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


def artifact_weights(builders: list[str], replicates: int, seed: int) -> np.ndarray:
    """(replicates + 1) x artifacts draw counts; row 0 is the point estimate (all ones).

    ``builders`` is each artifact's builder, artifacts sorted by (builder, task, build_trial).
    """
    n = len(builders)
    weights = np.zeros((replicates + 1, n))
    weights[0] = 1.0
    strata: dict[str, list[int]] = defaultdict(list)
    for i, b in enumerate(builders):
        strata[b].append(i)
    rng = np.random.default_rng(seed)
    for r in range(1, replicates + 1):
        for b in sorted(strata):
            idx = np.asarray(strata[b])
            drawn = rng.integers(0, len(idx), len(idx))
            np.add.at(weights[r], idx[drawn], 1.0)
    return weights


def _runs(rows: Frame) -> pl.DataFrame:
    runs = primary(run_table(rows)).filter(pl.col("accuracy").is_not_null()).collect()
    return runs.with_columns(pl.col("effort_panel", "task", "builder", "finder").cast(pl.Utf8))


def _artifacts(runs: pl.DataFrame) -> tuple[list[tuple[Any, ...]], dict[tuple[Any, ...], int]]:
    keys = sorted(set(runs.select("builder", "task", "build_trial").iter_rows()))
    return keys, {k: i for i, k in enumerate(keys)}


def _recovery(runs: pl.DataFrame, index: dict, weights: np.ndarray) -> dict[str, np.ndarray]:
    """finder (and "all") -> recovery per weight row."""
    n = weights.shape[1]
    acc: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    cnt: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(n))
    for r in runs.iter_rows(named=True):
        i = index[(r["builder"], r["task"], r["build_trial"])]
        for f in (r["finder"], POOLED):
            acc[f][i] += r["accuracy"]
            cnt[f][i] += 1.0
    out = {}
    for f in acc:
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f] = (weights @ acc[f]) / (weights @ cnt[f])
    return out


def _rb(runs: pl.DataFrame, index: dict, weights: np.ndarray) -> dict[tuple, np.ndarray]:
    """(panel, builder) -> R_b per weight row."""
    n = weights.shape[1]
    total: dict[tuple, np.ndarray] = defaultdict(lambda: np.zeros(n))
    count: dict[tuple, np.ndarray] = defaultdict(lambda: np.zeros(n))
    for r in runs.filter(pl.col("all_correct") & pl.col(METRIC).is_not_null()).iter_rows(
        named=True
    ):
        cell = (r["effort_panel"], r["finder"], r["task"], r["builder"])
        i = index[(r["builder"], r["task"], r["build_trial"])]
        total[cell][i] += r[METRIC]
        count[cell][i] += 1.0
    costs: dict[tuple, np.ndarray] = {}
    for cell in total:
        with np.errstate(invalid="ignore", divide="ignore"):
            cost = (weights @ total[cell]) / (weights @ count[cell])
        costs[cell] = np.where(cost > 0, cost, np.nan)  # zero or undefined: not in C_b
    least: dict[tuple, np.ndarray] = {}
    for (panel, finder, task, _b), cost in costs.items():
        key = (panel, finder, task)
        least[key] = np.fmin(least[key], cost) if key in least else cost
    logs: dict[tuple, list[np.ndarray]] = defaultdict(list)
    for (panel, finder, task, builder), cost in costs.items():
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


def bootstrap_ci(rows: Frame, *, seed: int, replicates: int = DEFAULT_REPLICATES) -> pl.DataFrame:
    """One row per R_b (effort_panel, builder) and per recovery finder (and pooled "all"),
    with the point estimate and its percentile interval; `seed` and `replicates` recorded."""
    runs = _runs(rows)
    keys, index = _artifacts(runs)
    weights = artifact_weights([k[0] for k in keys], replicates, seed)
    per_builder: dict[str, int] = defaultdict(int)
    for k in keys:
        per_builder[k[0]] += 1
    out = []
    for (panel, builder), values in sorted(_rb(runs, index, weights).items()):
        out.append({**_row("R_b", panel, builder, None, values), "artifacts": per_builder[builder]})
    recovery = _recovery(runs, index, weights)
    for finder in sorted(recovery, key=lambda f: (f == POOLED, f)):
        row = _row("recovery", None, None, finder, recovery[finder])
        out.append({**row, "artifacts": len(keys)})
    table = pl.DataFrame(out, schema={c: t for c, t in COLUMNS.items() if c not in _FIXED})
    table = table.with_columns(
        replicates=pl.lit(replicates, pl.Int64),
        level=pl.lit(LEVEL, pl.Float64),
        seed=pl.lit(seed, pl.Int64),
    )
    return table.select(list(COLUMNS))


_FIXED = ("replicates", "level", "seed")
