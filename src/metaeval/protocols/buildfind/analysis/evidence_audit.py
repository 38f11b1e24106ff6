"""The evidence audit: a stratified sample of correct formal answers and the summary of its
labels (Section 4.8, Appendix I, Table 12)."""

from __future__ import annotations

import numpy as np
import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.prepared import (
    ARTIFACT_KEY,
    Prepared,
    flag_questions,
    is_categorical,
    keep_expr,
    to_string,
)

EVIDENCE_LABELS = ("supported", "partially_supported", "unsupported", "prior_like")
"""Appendix I audit categories, in Table 12 order."""
EVIDENCE_AUDIT_SEED = 20260601
EVIDENCE_AUDIT_PER_STRATUM = 2
_AUDIT_SLICE_ORDER = {"all": 0, "prior_status": 1, "task": 2, "stratum": 3}
_AUDIT_ORDER = ["task", "builder", "build_trial", "finder", "find_trial", "question_id"]
_SAMPLE_COLUMNS = [
    "audit_id",
    "stratum",
    "task",
    "builder",
    "builder_family",
    "build_trial",
    "finder",
    "finder_family",
    "find_trial",
    "question_id",
    "prior_status",
    "gold",
    "answer",
    "correct",
    "evidence_label",
    "notes",
]


def evidence_audit_sample(
    rows: pl.DataFrame, seed: int, per_stratum: int, *, compile_pass_only: bool = True
) -> pl.DataFrame:
    """Stratified random sample of correct formal answers for the evidence audit (Appendix I).

    Population (Appendix I): correct answers of formal find runs on compile-pass artifacts,
    restricted to the audited scoring set (choice: the audit checks scored recoveries);
    controls are excluded. Strata: task x builder_family x finder_family x prior status
    (``low_prior`` when the question is in `low_prior_subset`, else ``high_prior``, including
    questions without question-only control data). The paper draws 72 answers with seed
    20260601 over 2 tasks x 3 x 3 families x 2 statuses, i.e. ``per_stratum=2``.

    Sampling is deterministic in ``seed`` and independent of input row order: the population is
    sorted by (task, builder, build_trial, finder, find_trial, question_id), each row receives
    a uniform draw from ``numpy.random.default_rng(seed)`` in that order, and the
    ``per_stratum`` rows with the smallest draws in each stratum are kept (all rows of a
    stratum that has fewer). Output order: stratum, then draw; audit_id numbers rows 1..N in
    that order.

    Returns columns audit_id (Int64), stratum ("task|builder_family|finder_family|prior"),
    task, builder, builder_family, build_trial, finder, finder_family, find_trial,
    question_id, prior_status, gold, answer, correct, evidence_label (null, to be filled with
    one of EVIDENCE_LABELS), notes (null).
    """
    if per_stratum < 0:
        raise ConfigError("per_stratum must be >= 0", field="per_stratum")
    return evidence_audit_sample_from(Prepared(rows, compile_pass_only), seed, per_stratum)


def _order_code(s: pl.Series) -> pl.Series:
    """UInt64 codes that sort like ``s`` sorts as strings / numbers (nulls first -> 0)."""
    if is_categorical(s.dtype):
        values = s.unique().drop_nulls()
        rank = values.cast(pl.Utf8).rank("dense").cast(pl.UInt64)
        return (
            s.to_physical()
            .replace_strict(values.to_physical(), rank, default=0, return_dtype=pl.UInt64)
            .rename(s.name)
        )
    if s.dtype.is_integer():
        if s.null_count() == s.len():
            return pl.Series(s.name, [0] * s.len(), dtype=pl.UInt64)
        low = s.min()
        return ((s.cast(pl.Int64) - low + 1).cast(pl.UInt64)).fill_null(0)
    return s.rank("dense").cast(pl.UInt64).fill_null(0)


def _sort_permutation(df: pl.DataFrame) -> np.ndarray:
    """Row indices of ``df`` in the order ``df.sort(df.columns)`` gives (ties arbitrary)."""
    codes = [_order_code(df.get_column(c)) for c in df.columns]
    sizes = []
    for code in codes:
        top = code.max()  # None when every value is null
        sizes.append((top if isinstance(top, int) else 0) + 1)
    if df.height and float(np.prod([float(n) for n in sizes])) < 2.0**63:
        key = pl.Series(np.zeros(df.height, dtype=np.uint64))
        for code, size in zip(codes, sizes, strict=True):
            key = key * size + code
        return key.arg_sort().to_numpy()
    return pl.DataFrame(codes).with_row_index("_i").sort(df.columns).get_column("_i").to_numpy()


def evidence_audit_sample_from(prep: Prepared, seed: int, per_stratum: int) -> pl.DataFrame:
    """`evidence_audit_sample` without materialising the (large) sorted population.

    The draw of a population row depends only on its position in the documented order, so the
    population keeps its sort keys and a row index, draws are scattered to it through one
    arg-sort, and only the ``per_stratum`` smallest draws of each stratum are gathered.
    """
    population = _audit_population(prep)
    candidates = _smallest_draws(population, seed, per_stratum)
    chosen = to_string(
        prep.rows[candidates.get_column("_row")].with_columns(
            candidates.get_column("_u"), candidates.get_column("_low")
        )
    )
    sample = (
        chosen.with_columns(
            correct=pl.col("correct").fill_null(False),
            prior_status=pl.when(pl.col("_low"))
            .then(pl.lit("low_prior"))
            .otherwise(pl.lit("high_prior")),
        )
        .with_columns(
            stratum=pl.concat_str(
                ["task", "builder_family", "finder_family", "prior_status"], separator="|"
            )
        )
        .filter(pl.col("_u").rank("ordinal").over("stratum") <= per_stratum)
        .sort(["stratum", "_u"])
    )
    return sample.with_columns(
        audit_id=pl.int_range(1, sample.height + 1, dtype=pl.Int64),
        evidence_label=pl.lit(None, dtype=pl.Utf8),
        notes=pl.lit(None, dtype=pl.Utf8),
    ).select(_SAMPLE_COLUMNS)


def evidence_audit_rule(
    rows: pl.DataFrame, seed: int, per_stratum: int, *, compile_pass_only: bool = True
) -> pl.DataFrame:
    """The rule of `evidence_audit_sample` with these arguments, as one row (see
    `evidence_audit_rule_from`)."""
    return evidence_audit_rule_from(Prepared(rows, compile_pass_only), seed, per_stratum)


def evidence_audit_rule_from(prep: Prepared, seed: int, per_stratum: int) -> pl.DataFrame:
    """The sample's rule as one row (Appendix I): its seed, answers per stratum, the size of
    the population (correct formal compile-pass answers in the audited scoring set), the
    strata it falls into, how many of them hold the full per-stratum count, and the rows the
    rule draws (the paper's 72 = 36 strata x 2)."""
    strata = ["task", "builder_family", "finder_family", "_low"]
    sizes = _audit_population(prep).group_by(strata).len().get_column("len")
    return pl.DataFrame(
        {
            "seed": [seed],
            "per_stratum": [per_stratum],
            "population": [int(sizes.sum())],
            "strata": [sizes.len()],
            "full_strata": [int((sizes >= per_stratum).sum())],
            "rows": [int(sizes.clip(upper_bound=per_stratum).sum())],
        },
        schema={
            "seed": pl.Int64,
            "per_stratum": pl.Int64,
            "population": pl.Int64,
            "strata": pl.Int64,
            "full_strata": pl.Int64,
            "rows": pl.Int64,
        },
    )


def _audit_population(prep: Prepared) -> pl.DataFrame:
    """The population's row index, sort keys, families and low-prior flag (``_low``): correct
    formal answers (compile-pass only when asked) in the audited scoring set."""
    lf = prep.rows.lazy().with_row_index("_row")
    base = lf.filter(
        (pl.col("slice") == "formal")
        & pl.col("correct").fill_null(False)
        & keep_expr(prep.compile_pass_only)
    )
    gold = (pl.col("label") == "implemented_gold").fill_null(False)
    pool = pl.concat(
        [
            base.filter(gold),
            base.filter(~gold).join(prep.unlabelled_artifacts.lazy(), on=ARTIFACT_KEY, how="semi"),
        ]
    )
    return flag_questions(
        pool.select("_row", *_AUDIT_ORDER, "builder_family", "finder_family"),
        prep.low_native,
        "_low",
    ).collect()


def _smallest_draws(population: pl.DataFrame, seed: int, per_stratum: int) -> pl.DataFrame:
    """Each population row's uniform draw (``_u``, given in the documented order) and, per
    stratum, the rows (``_row``) of the ``per_stratum`` smallest draws (at least one)."""
    draws = np.random.default_rng(seed).random(population.height)
    u = np.empty(population.height, dtype=np.float64)
    u[_sort_permutation(population.select(_AUDIT_ORDER))] = draws
    strata = ["task", "builder_family", "finder_family", "_low"]
    return (
        population.select(*strata, "_row", _u=pl.Series(u, dtype=pl.Float64))
        .group_by(strata)
        .agg(pl.col("_row", "_u").bottom_k_by("_u", max(per_stratum, 1)))
        .explode("_row", "_u")
        .select("_row", "_u", "_low")
    )


def evidence_audit_summary(labelled: pl.DataFrame) -> pl.DataFrame:
    """Summary of a labelled evidence-audit sample (Table 12).

    ``labelled`` is `evidence_audit_sample` output with ``evidence_label`` filled in (only the
    columns evidence_label, task, prior_status and stratum are used). Labels are compared after
    stripping whitespace and lower-casing; null or blank labels are **pending** and are never
    counted as a category; any other value raises `ConfigError`.

    Slices (slice_kind, slice): ("all", "all"); ("prior_status", low_prior / high_prior);
    ("task", each task); ("stratum", each stratum) - Table 12's rows plus the per-stratum view.

    Returns columns slice_kind, slice, n (sampled rows), pending, labelled (n - pending),
    supported, partially_supported, unsupported, prior_like, unsupported_or_prior_like
    (Table 12's combined column), and share_<category> for each of those five counts as a
    fraction of the labelled rows (null when nothing is labelled yet). Sorted by slice_kind in
    the order above, then slice.
    """
    lab = _normalised_labels(labelled)
    long = pl.concat(
        [
            lab.with_columns(slice_kind=pl.lit("all"), slice=pl.lit("all")),
            lab.with_columns(slice_kind=pl.lit("prior_status"), slice=pl.col("prior_status")),
            lab.with_columns(slice_kind=pl.lit("task"), slice=pl.col("task")),
            lab.with_columns(slice_kind=pl.lit("stratum"), slice=pl.col("stratum")),
        ]
    )
    counts = [(pl.col("_label") == c).sum().cast(pl.Int64).alias(c) for c in EVIDENCE_LABELS]
    out = (
        long.group_by(["slice_kind", "slice"])
        .agg(
            *counts,
            n=pl.len().cast(pl.Int64),
            pending=pl.col("_label").is_null().sum().cast(pl.Int64),
        )
        .with_columns(
            labelled=pl.col("n") - pl.col("pending"),
            unsupported_or_prior_like=pl.col("unsupported") + pl.col("prior_like"),
        )
    )
    return _with_shares(out)


def _normalised_labels(labelled: pl.DataFrame) -> pl.DataFrame:
    """task, prior_status, stratum and ``_label`` (stripped, lower-cased, null when blank);
    ConfigError for a missing column or a label outside EVIDENCE_LABELS."""
    required = ["evidence_label", "task", "prior_status", "stratum"]
    missing = [c for c in required if c not in labelled.columns]
    if missing:
        raise ConfigError(f"missing column(s): {', '.join(missing)}", field="evidence_label")
    lab = labelled.select(
        pl.col("task").cast(pl.Utf8),
        pl.col("prior_status").cast(pl.Utf8),
        pl.col("stratum").cast(pl.Utf8),
        _label=pl.col("evidence_label").cast(pl.Utf8).str.strip_chars().str.to_lowercase(),
    ).with_columns(_label=pl.when(pl.col("_label") != "").then(pl.col("_label")))
    bad = (
        lab.filter(pl.col("_label").is_not_null() & ~pl.col("_label").is_in(EVIDENCE_LABELS))
        .get_column("_label")
        .unique()
        .sort()
        .to_list()
    )
    if bad:
        raise ConfigError(
            f"unknown evidence label(s) {', '.join(bad)}; use one of {', '.join(EVIDENCE_LABELS)}",
            field="evidence_label",
        )
    return lab


def _with_shares(out: pl.DataFrame) -> pl.DataFrame:
    """Each count as a share of the labelled rows, in Table 12's column and row order."""
    share_of = [*EVIDENCE_LABELS, "unsupported_or_prior_like"]
    return (
        out.with_columns(
            [
                pl.when(pl.col("labelled") > 0)
                .then(pl.col(c) / pl.col("labelled"))
                .alias(f"share_{c}")
                for c in share_of
            ],
            _kind=pl.col("slice_kind").replace_strict(_AUDIT_SLICE_ORDER),
        )
        .sort(["_kind", "slice"])
        .select(
            "slice_kind",
            "slice",
            "n",
            "pending",
            "labelled",
            *share_of,
            *[f"share_{c}" for c in share_of],
        )
    )
