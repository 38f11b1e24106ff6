"""The shared input of the build-and-find extras (rank stability, affinity, prior subsets,
finder calibration, evidence audit, token usage; paper Sections 4.6-4.8, Appendices E, I-M).

`Prepared` aggregates the question rows twice, once per (artifact, finder, question) for the
question agreement and once per find run through `core.run_table` (the one Eq. 1 run table),
and every extra is derived from those. Every extra is a pure transform of the canonical question-rows table
(`metaeval.protocols.buildfind.rows.table`); outputs are sorted so they are deterministic.

Conventions shared by every function (each is a choice where the paper is silent):

- **Run, artifact.** A find run is (slice, task, builder, build_trial, finder, find_trial); an
  artifact is (task, builder, build_trial). Run-level quantities (novel bytes, tokens) are
  repeated on every question row of the run; they are taken once per run, and a run whose rows
  disagree on one of them raises `ConfigError` (the table is corrupt).
- **Scoring set** (Section 3.4). For a formal run, the questions labelled ``implemented_gold``
  for its artifact. An artifact whose rows are all ``unlabeled`` (no audit yet) scores every
  question. An artifact with some labels scores only its ``implemented_gold`` questions
  (``unlabeled`` rows of a partly labelled artifact are not scored). Controls
  (question_only, spec_only) have no artifact and always score every question.
- **Per-run accuracy** (Eq. 1) is correct scored answers / scored questions; a null ``correct``
  counts as not correct. A run with an empty scoring set has no accuracy, is neither all-correct
  nor a failure, and is left out of every mean.
- **Pooled accuracy** of a slice, finder or subset is correct scored rows / scored rows over
  all its runs ("exact-match recovery over audited scoring rows"), i.e. the Eq. 1 mean weighted
  by scoring-set size. "perfect" is the share of runs that are all-correct.
- **Primary panel.** Formal rows are restricted to compile-pass artifacts (``compile_pass`` is
  true; null counts as not passing) unless ``compile_pass_only=False``: Sections 4.2 and 4.6-4.8
  restrict effort, rank stability, affinity and the evidence audit to compile-passing
  artifacts. Controls are never filtered by ``compile_pass`` (it is null for them). Token usage
  (Table 17) defaults to the whole artifact-present panel, as the paper reports it.
- **Subsets.** Restricting to a question subset intersects each run's scoring set with it;
  novel bytes stay whole-run quantities (Appendix L: the subset effort views upper-bound
  subset-specific effort).
"""

from __future__ import annotations

from functools import cached_property

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.core import run_table

RUN_KEY = ["slice", "task", "builder", "build_trial", "finder", "find_trial"]
ARTIFACT_KEY = ["task", "builder", "build_trial"]
QUESTION_KEY = ["task", "question_id"]

LOW_PRIOR_THRESHOLD = 0.90
"""A question is low-prior when its question-only 3-trial agreement is strictly below this."""
IMPLEMENTATION_SIGNAL_MIN_LIFT = 0.05
"""Implementation-signal: formal agreement - question-only agreement >= this (5 points)."""

# Float slack for threshold comparisons, so that an agreement difference of exactly 5 points
# (e.g. 1.0 - 0.95 = 0.04999999999999993 in binary) is treated as exactly 5 points.
_EPS = 1e-9


# --------------------------------------------------------------------------------------------
# shared private helpers
# --------------------------------------------------------------------------------------------


RUN_LEVEL = ["novel_retrieval_bytes", "novel_tool_call_bytes", "input_tokens", "output_tokens"]
TOKENS = ["input_tokens", "output_tokens"]
_SUBSETS = ("", "_lp", "_is")  # whole scoring set, low-prior subset, implementation-signal subset
_CATEGORICAL = (pl.Enum, pl.Categorical)


def is_categorical(dtype: pl.DataType) -> bool:
    return isinstance(dtype, _CATEGORICAL)


def to_string(df: pl.DataFrame) -> pl.DataFrame:
    """Enum / Categorical columns as String (every output is keyed by strings)."""
    cats = [c for c, t in df.schema.items() if is_categorical(t)]
    return df.with_columns(pl.col(cats).cast(pl.Utf8)) if cats else df


def check_run_constant(rows: pl.DataFrame, columns: list[str], key: list[str] = RUN_KEY) -> None:
    """Raise when a run-level column takes more than one value inside a run."""
    bad = (
        rows.group_by(key)
        .agg([pl.col(c).n_unique().alias(c) for c in columns])
        .filter(pl.any_horizontal([pl.col(c) > 1 for c in columns]))
    )
    _raise_not_constant(bad, columns, key)


def _raise_not_constant(bad: pl.DataFrame, columns: list[str], key: list[str] = RUN_KEY) -> None:
    if bad.height:
        first = to_string(bad.select(key)).sort(key).row(0, named=True)
        where = ", ".join(f"{k}={first[k]!r}" for k in key)
        raise ConfigError(
            f"{bad.height} run(s) repeat different values of {', '.join(columns)} across their "
            "question "
            f"rows (first: {where}); these are per-run quantities",
            field=",".join(columns),
        )


def _not_constant(column: str) -> pl.Expr:
    """Aggregation: the run's rows hold more than one value (nulls count as a value), i.e.
    ``n_unique() > 1`` without hashing every value."""
    nulls = pl.col(column).null_count()
    mixed_null = (nulls > 0) & (nulls < pl.len())
    return mixed_null | (pl.col(column).max() != pl.col(column).min()).fill_null(False)


def keep_expr(compile_pass_only: bool) -> pl.Expr:
    """Row is in the primary panel (controls always; formal rows of compile-pass artifacts)."""
    if not compile_pass_only:
        return pl.lit(True)
    return (pl.col("slice") != "formal") | pl.col("compile_pass").fill_null(False)


def flag_questions(lf: pl.LazyFrame, questions: pl.DataFrame, name: str) -> pl.LazyFrame:
    """Add boolean column ``name``: the row's (task, question_id) is in ``questions``.

    ``questions`` holds keys of the same dtypes as the rows. Categorical keys are matched on
    their physical codes (no join over the rows); other dtypes use a left join.
    """
    keys = questions.select(QUESTION_KEY).unique()
    schema = lf.collect_schema()
    if all(is_categorical(schema[c]) for c in QUESTION_KEY):

        def code() -> pl.Expr:
            task = pl.col("task").to_physical().cast(pl.UInt64)
            return task * (1 << 32) + pl.col("question_id").to_physical().cast(pl.UInt64)

        wanted = keys.select(code()).to_series().implode()
        return lf.with_columns(code().is_in(wanted).fill_null(False).alias(name))
    joined = keys.with_columns(pl.lit(True).alias(name)).lazy()
    return lf.join(joined, on=QUESTION_KEY, how="left", maintain_order="left").with_columns(
        pl.col(name).fill_null(False)
    )


class Prepared:
    """Every extra derived from two aggregations of the question rows, computed once.

    * ``cells`` (pass 1) -- one row per (slice, artifact, finder, question) of the formal and
      question-only slices with the find trials collapsed into counts; gives the question
      agreement (hence the low-prior and implementation-signal subsets) and the artifacts
      without any label.
    * ``runs`` (pass 2) -- one row per find run (all runs, also compile-failed ones) with
      the scored / correct counts on the whole scoring set and on both subsets, the run-level
      values and whether they are constant in the run. String keys, sorted by RUN_KEY.

    Scoring sets are evaluated from counts: a formal run of an artifact with labels scores its
    ``implemented_gold`` rows, any other run scores every (primary) row. ``subsets_from``
    takes pass 1 from another `Prepared` (the per-panel reading defines the question subsets
    on every pair of the run, `analysis.pair_sets`).
    """

    def __init__(
        self, rows: pl.DataFrame, compile_pass_only: bool, subsets_from: Prepared | None = None
    ) -> None:
        self.rows = rows
        self.compile_pass_only = compile_pass_only
        self._subsets_from = subsets_from  # whose question agreement defines the subsets
        lf = rows.lazy().with_columns(
            _keep=keep_expr(compile_pass_only),
            _ok=pl.col("correct").fill_null(False),
            _gold=(pl.col("label") == "implemented_gold").fill_null(False),
        )
        self._lf = lf

    @cached_property
    def _pass1(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        if self._subsets_from is not None:
            return self._subsets_from._pass1
        return self._question_agreement(self._lf)

    @cached_property
    def _agreement_native(self) -> pl.DataFrame:
        return self._pass1[0]

    @cached_property
    def low_native(self) -> pl.DataFrame:
        return self._agreement_native.filter(pl.col("low_prior"))

    @cached_property
    def impl_native(self) -> pl.DataFrame:
        return self._agreement_native.filter(pl.col("implementation_signal"))

    @cached_property
    def agreement(self) -> pl.DataFrame:
        return to_string(self._agreement_native).sort(QUESTION_KEY)

    @cached_property
    def unlabelled_artifacts(self) -> pl.DataFrame:
        return self._pass1[1]

    @cached_property
    def runs(self) -> pl.DataFrame:
        return self._run_table(self._lf)

    # ---- pass 1 ------------------------------------------------------------------------
    def _question_agreement(self, lf: pl.LazyFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(question agreement with native key dtypes, formal artifacts without any label)."""
        cells, unlabelled = _scored_cells(lf)
        return _agreement_of(cells), unlabelled

    # ---- pass 2 ------------------------------------------------------------------------
    def _run_table(self, lf: pl.LazyFrame) -> pl.DataFrame:
        """`core.run_table` with scored / correct counts on both subsets, the families and
        whether each run-level value is constant in the run."""
        lf = flag_questions(flag_questions(lf, self.low_native, "_lp"), self.impl_native, "_is")
        extra = [
            pl.col("builder_family").first(),
            pl.col("finder_family").first(),
            *(_not_constant(c).alias(f"_bad_{c}") for c in RUN_LEVEL),
        ]
        runs = run_table(lf, subsets=_SUBSETS[1:], extra=extra).collect()
        kept = (pl.col("slice") != "formal") | pl.col("compile_pass").fill_null(False)
        runs = runs.select(
            *RUN_KEY,
            "effort_panel",
            "builder_family",
            "finder_family",
            *(f"n_{p}{s}" for s in _SUBSETS for p in ("scored", "correct")),
            *(f"_bad_{c}" for c in RUN_LEVEL),
            _kept=kept,
            bytes=pl.col("total_bytes"),
            input_tokens=pl.col("input_tokens"),
            output_tokens=pl.col("output_tokens"),
        )
        return to_string(runs).sort(RUN_KEY)

    # ---- derived tables ------------------------------------------------------------------
    def check(self, columns: list[str]) -> None:
        bad = self.runs.filter(pl.any_horizontal([pl.col(f"_bad_{c}") for c in columns]))
        _raise_not_constant(bad, columns)

    def run_view(self, subset: str = "") -> pl.DataFrame:
        """`_runs` of the whole scoring set ("") or of a subset ("_lp", "_is")."""
        self.check(RUN_LEVEL)
        runs = self.runs.filter(pl.col("_kept")) if self.compile_pass_only else self.runs
        has = pl.col("n_scored") > 0
        return runs.select(
            *RUN_KEY,
            "effort_panel",
            "builder_family",
            "finder_family",
            n_scored=pl.col(f"n_scored{subset}"),
            n_correct=pl.col(f"n_correct{subset}"),
            bytes=pl.col("bytes"),
            input_tokens=pl.col("input_tokens"),
            output_tokens=pl.col("output_tokens"),
        ).with_columns(
            accuracy=pl.when(has).then(pl.col("n_correct") / pl.col("n_scored")),
            all_correct=pl.when(has).then(pl.col("n_correct") == pl.col("n_scored")),
        )

    def low_prior(self) -> pl.DataFrame:
        return self.agreement.filter(pl.col("low_prior")).select(
            *QUESTION_KEY, "question_only_cells", "question_only_agreement"
        )

    def implementation_signal(self) -> pl.DataFrame:
        return self.agreement.filter(pl.col("implementation_signal")).select(
            *QUESTION_KEY, "question_only_agreement", "formal_agreement", "lift_pp"
        )

    def formal_grid_rows(self) -> pl.DataFrame:
        """Stand-in for the rows in `_recovery_gate` (its formal (panel, builder, task))."""
        return self.runs.select("slice", "effort_panel", "builder", "task")


def _scored_cells(lf: pl.LazyFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(scored and wrong rows per formal or question-only (artifact, finder, question) cell
    under its scoring set, formal artifacts without any label)."""
    artifact = ["slice", *ARTIFACT_KEY]
    bad = ~pl.col("_ok")
    cells = (
        lf.filter((pl.col("slice") == "formal") | (pl.col("slice") == "question_only"))
        .group_by([*artifact, "finder", "question_id"])
        .agg(
            _n=pl.col("_keep").sum(),
            _bad=(pl.col("_keep") & bad).sum(),
            _ng=(pl.col("_keep") & pl.col("_gold")).sum(),
            _badg=(pl.col("_keep") & pl.col("_gold") & bad).sum(),
            _lab=(pl.col("label") != "unlabeled").fill_null(False).sum(),
        )
        .collect()
    )
    labelled = (pl.col("_lab").sum().over(artifact) > 0) & (pl.col("slice") == "formal")
    cells = cells.with_columns(_has=labelled)
    unlabelled = (
        cells.filter((pl.col("slice") == "formal") & ~pl.col("_has")).select(ARTIFACT_KEY).unique()
    )
    scored = pl.when(pl.col("_has")).then(pl.col("_ng")).otherwise(pl.col("_n"))
    wrong = pl.when(pl.col("_has")).then(pl.col("_badg")).otherwise(pl.col("_bad"))
    cells = cells.select(
        "slice", *ARTIFACT_KEY, "finder", "question_id", _scored=scored, _wrong=wrong
    )
    return cells, unlabelled


def _agreement_of(cells: pl.DataFrame) -> pl.DataFrame:
    """Per question: question-only and formal agreement over the cells that score it, the
    lift, and the low-prior and implementation-signal flags."""
    qonly = (
        cells.filter(pl.col("slice") == "question_only")
        .group_by([*QUESTION_KEY, "finder"])
        .agg(_scored=pl.col("_scored").sum(), _wrong=pl.col("_wrong").sum())
        .filter(pl.col("_scored") > 0)
        .group_by(QUESTION_KEY)
        .agg(
            question_only_cells=pl.len().cast(pl.Int64),
            question_only_agreement=(pl.col("_wrong") == 0).cast(pl.Float64).mean(),
        )
    )
    formal = (
        cells.filter((pl.col("slice") == "formal") & (pl.col("_scored") > 0))
        .group_by(QUESTION_KEY)
        .agg(
            formal_cells=pl.len().cast(pl.Int64),
            formal_agreement=(pl.col("_wrong") == 0).cast(pl.Float64).mean(),
        )
    )
    out = qonly.join(formal, on=QUESTION_KEY, how="full", coalesce=True)
    diff = pl.col("formal_agreement") - pl.col("question_only_agreement")
    agreement = out.with_columns(
        pl.col("question_only_cells").fill_null(0),
        pl.col("formal_cells").fill_null(0),
        lift_pp=diff * 100.0,
        low_prior=(pl.col("question_only_agreement") < LOW_PRIOR_THRESHOLD - _EPS).fill_null(False),
        implementation_signal=(diff >= IMPLEMENTATION_SIGNAL_MIN_LIFT - _EPS).fill_null(False),
    ).select(
        *QUESTION_KEY,
        "question_only_cells",
        "question_only_agreement",
        "formal_cells",
        "formal_agreement",
        "lift_pp",
        "low_prior",
        "implementation_signal",
    )
    return agreement


def pooled(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Pooled accuracy over runs grouped by ``by``: runs, scored_rows, accuracy, perfect."""
    out = runs.group_by(by).agg(
        runs=(pl.col("n_scored") > 0).sum().cast(pl.Int64),
        scored_rows=pl.col("n_scored").sum().cast(pl.Int64),
        _correct=pl.col("n_correct").sum().cast(pl.Int64),
        perfect=pl.col("all_correct").cast(pl.Float64).mean(),
    )
    return out.with_columns(
        accuracy=pl.when(pl.col("scored_rows") > 0).then(pl.col("_correct") / pl.col("scored_rows"))
    ).drop("_correct")


def formal_runs(runs: pl.DataFrame) -> pl.DataFrame:
    return runs.filter(pl.col("slice") == "formal")


# --------------------------------------------------------------------------------------------
# 1. rank stability (Section 4.6, Appendix Figure 4)
# --------------------------------------------------------------------------------------------
