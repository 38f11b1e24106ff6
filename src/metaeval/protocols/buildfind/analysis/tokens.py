"""Vendor token usage by role and agent (Appendix M, Table 17)."""

from __future__ import annotations

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.prepared import TOKENS, Prepared, check_run_constant

_ROLE_ORDER = {"builder": 0, "finder_formal": 1, "finder_question_only": 2, "finder_spec_only": 3}
_USAGE_COLUMNS = [
    "role",
    "agent",
    "runs",
    "input_tokens",
    "output_tokens",
    "total",
    "mean_per_run",
    "runs_missing_tokens",
]


def _usage(runs: pl.DataFrame) -> pl.DataFrame:
    return (
        runs.group_by(["role", "agent"])
        .agg(
            runs=pl.len().cast(pl.Int64),
            input_tokens=pl.col("input_tokens").sum().cast(pl.Int64),
            output_tokens=pl.col("output_tokens").sum().cast(pl.Int64),
            runs_missing_tokens=(
                pl.col("input_tokens").is_null() | pl.col("output_tokens").is_null()
            )
            .sum()
            .cast(pl.Int64),
        )
        .with_columns(total=pl.col("input_tokens") + pl.col("output_tokens"))
        .with_columns(mean_per_run=pl.col("total") / pl.col("runs"))
    )


def token_usage(
    rows: pl.DataFrame, builds: pl.DataFrame | None = None, *, compile_pass_only: bool = False
) -> pl.DataFrame:
    """Vendor token usage by role and agent (Appendix M, Table 17).

    Tokens are per run and the rows table repeats a find run's input_tokens / output_tokens on
    every question row, so they are deduplicated to one value per find run (a run whose rows
    disagree raises `ConfigError`). Roles: ``finder_formal``, ``finder_question_only``,
    ``finder_spec_only`` (agent = finder) and, when ``builds`` is given (columns builder, task,
    build_trial, input_tokens, output_tokens; one row per build run, duplicates of the same
    (builder, task, build_trial) with equal tokens collapse, unequal ones raise), ``builder``
    (agent = builder).

    Choices: by default the formal role covers the whole artifact-present panel, including
    compile-failed artifacts, as Table 17 does (``compile_pass_only=True`` restricts it).
    Null token counts contribute nothing to the sums and are flagged in runs_missing_tokens.

    Returns columns role, agent, runs, input_tokens, output_tokens, total (input + output),
    mean_per_run (total / runs; the paper prints it in thousands), runs_missing_tokens; sorted
    by role (builder, finder_formal, finder_question_only, finder_spec_only), then agent.
    """
    return token_usage_from(Prepared(rows, compile_pass_only), builds, compile_pass_only)


def token_usage_from(
    prep: Prepared, builds: pl.DataFrame | None, compile_pass_only: bool
) -> pl.DataFrame:
    prep.check(TOKENS)
    runs = prep.runs.filter(pl.col("_kept")) if compile_pass_only else prep.runs
    find = runs.select(
        role=pl.concat_str([pl.lit("finder_"), pl.col("slice")]),
        agent=pl.col("finder"),
        input_tokens=pl.col("input_tokens").cast(pl.Int64),
        output_tokens=pl.col("output_tokens").cast(pl.Int64),
    )
    parts = [find]
    if builds is not None:
        needed = ["builder", "task", "build_trial", "input_tokens", "output_tokens"]
        missing = [c for c in needed if c not in builds.columns]
        if missing:
            raise ConfigError(f"builds table lacks column(s): {', '.join(missing)}", field="builds")
        key = ["builder", "task", "build_trial"]
        b = builds.select(
            pl.col("builder").cast(pl.Utf8),
            pl.col("task").cast(pl.Utf8),
            pl.col("build_trial").cast(pl.Int64),
            pl.col("input_tokens").cast(pl.Int64),
            pl.col("output_tokens").cast(pl.Int64),
        )
        check_run_constant(b, ["input_tokens", "output_tokens"], key)
        parts.append(
            b.group_by(key)
            .agg(pl.col("input_tokens").first(), pl.col("output_tokens").first())
            .select(
                role=pl.lit("builder"),
                agent=pl.col("builder"),
                input_tokens="input_tokens",
                output_tokens="output_tokens",
            )
        )
    return (
        _usage(pl.concat(parts))
        .with_columns(_rank=pl.col("role").replace_strict(_ROLE_ORDER, default=9))
        .sort(["_rank", "agent"])
        .select(_USAGE_COLUMNS)
    )
