"""Build-and-find analysis extras: rank stability, affinity, prior subsets, finder calibration,
the evidence-audit sample and token usage (paper Sections 4.6-4.8, Appendices E, I, J, K, L, M).

Every function is a pure transform of the canonical question-rows table
(`metaeval.protocols.buildfind.rows`); outputs are sorted so they are deterministic.

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

import numpy as np
import polars as pl

from metaeval.errors import ConfigError

__all__ = [
    "EVIDENCE_LABELS",
    "IMPLEMENTATION_SIGNAL_MIN_LIFT",
    "LOW_PRIOR_THRESHOLD",
    "affinity",
    "affinity_family",
    "analyze_extras",
    "evidence_audit_sample",
    "evidence_audit_summary",
    "finder_calibration",
    "implementation_signal_subset",
    "kendall_tau",
    "low_prior_subset",
    "question_agreement",
    "subset_views",
    "token_usage",
]

RUN_KEY = ["slice", "task", "builder", "build_trial", "finder", "find_trial"]
ARTIFACT_KEY = ["task", "builder", "build_trial"]
QUESTION_KEY = ["task", "question_id"]

LOW_PRIOR_THRESHOLD = 0.90
"""A question is low-prior when its question-only 3-trial agreement is strictly below this."""
IMPLEMENTATION_SIGNAL_MIN_LIFT = 0.05
"""Implementation-signal: formal agreement - question-only agreement >= this (5 points)."""
EVIDENCE_LABELS = ("supported", "partially_supported", "unsupported", "prior_like")
"""Appendix I audit categories, in Table 12 order."""

# Float slack for threshold comparisons, so that an agreement difference of exactly 5 points
# (e.g. 1.0 - 0.95 = 0.04999999999999993 in binary) is treated as exactly 5 points.
_EPS = 1e-9
_SLICE_ORDER = {"question_only": 0, "spec_only": 1, "formal": 2}
_ROLE_ORDER = {"builder": 0, "finder_formal": 1, "finder_question_only": 2, "finder_spec_only": 3}
_AUDIT_SLICE_ORDER = {"all": 0, "prior_status": 1, "task": 2, "stratum": 3}
_SCORES = ("recovery", "all_correct")
AFFINITY_KEY = ["effort_panel", "builder", "finder"]
"""Affinity cells: one builder x finder matrix per effort panel (panel-local, Appendix K)."""


# --------------------------------------------------------------------------------------------
# shared private helpers
# --------------------------------------------------------------------------------------------


_RUN_LEVEL = ["novel_retrieval_bytes", "novel_tool_call_bytes", "input_tokens", "output_tokens"]
_TOKENS = ["input_tokens", "output_tokens"]
_SUBSETS = ("", "_lp", "_is")  # whole scoring set, low-prior subset, implementation-signal subset
_CATEGORICAL = (pl.Enum, pl.Categorical)


def _is_categorical(dtype: pl.DataType) -> bool:
    return isinstance(dtype, _CATEGORICAL)


def _to_string(df: pl.DataFrame) -> pl.DataFrame:
    """Enum / Categorical columns as String (every output is keyed by strings)."""
    cats = [c for c, t in df.schema.items() if _is_categorical(t)]
    return df.with_columns(pl.col(cats).cast(pl.Utf8)) if cats else df


def _check_run_constant(rows: pl.DataFrame, columns: list[str], key: list[str] = RUN_KEY) -> None:
    """Raise when a run-level column takes more than one value inside a run."""
    bad = (
        rows.group_by(key)
        .agg([pl.col(c).n_unique().alias(c) for c in columns])
        .filter(pl.any_horizontal([pl.col(c) > 1 for c in columns]))
    )
    _raise_not_constant(bad, columns, key)


def _raise_not_constant(bad: pl.DataFrame, columns: list[str], key: list[str] = RUN_KEY) -> None:
    if bad.height:
        first = _to_string(bad.select(key)).sort(key).row(0, named=True)
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


def _keep(compile_pass_only: bool) -> pl.Expr:
    """Row is in the primary panel (controls always; formal rows of compile-pass artifacts)."""
    if not compile_pass_only:
        return pl.lit(True)
    return (pl.col("slice") != "formal") | pl.col("compile_pass").fill_null(False)


def _flag(lf: pl.LazyFrame, questions: pl.DataFrame, name: str) -> pl.LazyFrame:
    """Add boolean column ``name``: the row's (task, question_id) is in ``questions``.

    ``questions`` holds keys of the same dtypes as the rows. Categorical keys are matched on
    their physical codes (no join over the rows); other dtypes use a left join.
    """
    keys = questions.select(QUESTION_KEY).unique()
    schema = lf.collect_schema()
    if all(_is_categorical(schema[c]) for c in QUESTION_KEY):

        def code() -> pl.Expr:
            task = pl.col("task").to_physical().cast(pl.UInt64)
            return task * (1 << 32) + pl.col("question_id").to_physical().cast(pl.UInt64)

        wanted = keys.select(code()).to_series().implode()
        return lf.with_columns(code().is_in(wanted).fill_null(False).alias(name))
    joined = keys.with_columns(pl.lit(True).alias(name)).lazy()
    return lf.join(joined, on=QUESTION_KEY, how="left", maintain_order="left").with_columns(
        pl.col(name).fill_null(False)
    )


class _Prepared:
    """Every extra derived from two aggregations of the question rows, computed once.

    * ``cells`` (pass 1) -- one row per (slice, artifact, finder, question) of the formal and
      question-only slices with the find trials collapsed into counts; gives the question
      agreement (hence the low-prior and implementation-signal subsets) and the artifacts
      without any label.
    * ``runs`` (pass 2) -- one row per find run (all runs, also compile-failed ones) with
      the scored / correct counts on the whole scoring set and on both subsets, the run-level
      values and whether they are constant in the run. String keys, sorted by RUN_KEY.

    Scoring sets are evaluated from counts: a formal run of an artifact with labels scores its
    ``implemented_gold`` rows, any other run scores every (primary) row.
    """

    def __init__(self, rows: pl.DataFrame, compile_pass_only: bool) -> None:
        self.rows = rows
        self.compile_pass_only = compile_pass_only
        lf = rows.lazy().with_columns(
            _keep=_keep(compile_pass_only),
            _ok=pl.col("correct").fill_null(False),
            _gold=(pl.col("label") == "implemented_gold").fill_null(False),
        )
        self._lf = lf

    @cached_property
    def _pass1(self) -> tuple[pl.DataFrame, pl.DataFrame]:
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
        return _to_string(self._agreement_native).sort(QUESTION_KEY)

    @cached_property
    def unlabelled_artifacts(self) -> pl.DataFrame:
        return self._pass1[1]

    @cached_property
    def runs(self) -> pl.DataFrame:
        return self._run_table(self._lf)

    # ---- pass 1 ------------------------------------------------------------------------
    def _question_agreement(self, lf: pl.LazyFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(question agreement with native key dtypes, formal artifacts without any label)."""
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
            cells.filter((pl.col("slice") == "formal") & ~pl.col("_has"))
            .select(ARTIFACT_KEY)
            .unique()
        )
        scored = pl.when(pl.col("_has")).then(pl.col("_ng")).otherwise(pl.col("_n"))
        wrong = pl.when(pl.col("_has")).then(pl.col("_badg")).otherwise(pl.col("_bad"))
        cells = cells.select(
            "slice", *ARTIFACT_KEY, "finder", "question_id", _scored=scored, _wrong=wrong
        )
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
            low_prior=(pl.col("question_only_agreement") < LOW_PRIOR_THRESHOLD - _EPS).fill_null(
                False
            ),
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
        return agreement, unlabelled

    # ---- pass 2 ------------------------------------------------------------------------
    def _run_table(self, lf: pl.LazyFrame) -> pl.DataFrame:
        lf = _flag(_flag(lf, self.low_native, "_lp"), self.impl_native, "_is")
        keep, ok, gold = pl.col("_keep"), pl.col("_ok"), pl.col("_gold")
        counts = []
        for suffix in _SUBSETS:
            k = keep & pl.col(suffix) if suffix else keep
            counts += [
                k.sum().alias(f"_k{suffix}"),
                (k & ok).sum().alias(f"_kc{suffix}"),
                (k & gold).sum().alias(f"_kg{suffix}"),
                (k & gold & ok).sum().alias(f"_kgc{suffix}"),
            ]
        runs = (
            lf.group_by(RUN_KEY)
            .agg(
                pl.col("effort_panel").first(),
                pl.col("builder_family").first(),
                pl.col("finder_family").first(),
                *counts,
                _lab=(pl.col("label") != "unlabeled").fill_null(False).sum(),
                _kept=(pl.col("slice") != "formal").any()
                | pl.col("compile_pass").fill_null(False).any(),
                bytes=(pl.col("novel_retrieval_bytes") + pl.col("novel_tool_call_bytes")).first(),
                input_tokens=pl.col("input_tokens").first(),
                output_tokens=pl.col("output_tokens").first(),
                **{f"_bad_{c}": _not_constant(c) for c in _RUN_LEVEL},
            )
            .collect()
        )
        has = (pl.col("_lab").sum().over(["slice", *ARTIFACT_KEY]) > 0) & (
            pl.col("slice") == "formal"
        )
        runs = runs.with_columns(_has=has)
        scored_counts = []
        for suffix in _SUBSETS:
            use_gold = pl.col("_has")
            scored_counts += [
                pl.when(use_gold)
                .then(pl.col(f"_kg{suffix}"))
                .otherwise(pl.col(f"_k{suffix}"))
                .cast(pl.Int64)
                .alias(f"n_scored{suffix}"),
                pl.when(use_gold)
                .then(pl.col(f"_kgc{suffix}"))
                .otherwise(pl.col(f"_kc{suffix}"))
                .cast(pl.Int64)
                .alias(f"n_correct{suffix}"),
            ]
        runs = runs.with_columns(scored_counts).drop(
            [f"_{p}{s}" for s in _SUBSETS for p in ("k", "kc", "kg", "kgc")] + ["_lab", "_has"]
        )
        return _to_string(runs).sort(RUN_KEY)

    # ---- derived tables ------------------------------------------------------------------
    def check(self, columns: list[str]) -> None:
        bad = self.runs.filter(pl.any_horizontal([pl.col(f"_bad_{c}") for c in columns]))
        _raise_not_constant(bad, columns)

    def run_view(self, subset: str = "") -> pl.DataFrame:
        """`_runs` of the whole scoring set ("") or of a subset ("_lp", "_is")."""
        self.check(_RUN_LEVEL)
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


def _pooled(runs: pl.DataFrame, by: list[str]) -> pl.DataFrame:
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


def _formal_runs(runs: pl.DataFrame) -> pl.DataFrame:
    return runs.filter(pl.col("slice") == "formal")


# --------------------------------------------------------------------------------------------
# 1. rank stability (Section 4.6, Appendix Figure 4)
# --------------------------------------------------------------------------------------------


def _kendall(runs: pl.DataFrame) -> pl.DataFrame:
    panel_task = ["effort_panel", "task"]
    formal = _formal_runs(runs)
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
    return _kendall(_Prepared(rows, compile_pass_only).run_view())


# --------------------------------------------------------------------------------------------
# 2. builder x finder affinity (Section 4.7, Appendix K)
# --------------------------------------------------------------------------------------------


def _affinity(runs: pl.DataFrame, score: str) -> pl.DataFrame:
    if score not in _SCORES:
        raise ConfigError(f"unknown affinity score {score!r}; use one of {', '.join(_SCORES)}")
    value = pl.col("accuracy") if score == "recovery" else pl.col("all_correct").cast(pl.Float64)
    cells = (
        _formal_runs(runs)
        .filter(pl.col("n_scored") > 0)
        .group_by(AFFINITY_KEY)
        .agg(
            pl.col("builder_family").first(),
            pl.col("finder_family").first(),
            score=value.mean(),
            runs=pl.len().cast(pl.Int64),
        )
    )
    panel = "effort_panel"
    residual = (
        pl.col("score")
        - pl.col("score").mean().over(panel, "builder")
        - pl.col("score").mean().over(panel, "finder")
        + pl.col("score").mean().over(panel)
    )
    return (
        cells.with_columns(residual=residual)
        .select(*AFFINITY_KEY, "residual", "score", "runs", "builder_family", "finder_family")
        .sort(AFFINITY_KEY)
    )


def _family(pairs: pl.DataFrame) -> pl.DataFrame:
    key = ["effort_panel", "builder_family", "finder_family"]
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
    return _affinity(_Prepared(rows, compile_pass_only).run_view(), score)


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
    return _family(affinity(rows, score=score, compile_pass_only=compile_pass_only))


# --------------------------------------------------------------------------------------------
# 3. low-prior and implementation-signal subsets (Sections 4.8, Appendices J, L)
# --------------------------------------------------------------------------------------------


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
    return _Prepared(rows, compile_pass_only).agreement


def low_prior_subset(rows: pl.DataFrame) -> pl.DataFrame:
    """Low-prior questions (Sections 4.8, J, L): question-only 3-trial agreement < 90%.

    See `question_agreement` for the agreement definition and boundary semantics. Returns
    columns task, question_id, question_only_cells, question_only_agreement; sorted.
    """
    return _Prepared(rows, True).low_prior()


def implementation_signal_subset(
    rows: pl.DataFrame, *, compile_pass_only: bool = True
) -> pl.DataFrame:
    """Implementation-signal questions (Appendix J): formal 3-trial agreement exceeds
    question-only agreement by at least 5 percentage points (inclusive).

    Formal agreement is over the audited scoring set of compile-pass artifacts by default. See
    `question_agreement`. Returns columns task, question_id, question_only_agreement,
    formal_agreement, lift_pp; sorted.
    """
    return _Prepared(rows, compile_pass_only).implementation_signal()


def _slice_accuracy(runs: pl.DataFrame) -> pl.DataFrame:
    by_task = _pooled(runs, ["slice", "task"])
    overall = _pooled(runs, ["slice"]).with_columns(task=pl.lit("all"))
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
    formal = _formal_runs(runs)
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

    Effort stays whole-run (Appendix L), so the tau views use the run's full novel bytes. The
    conditional effort score R_b (Figure 6) belongs to the core metrics and is not repeated.
    """
    return _subset_views(_Prepared(rows, compile_pass_only))


def _subset_views(prep: _Prepared) -> dict[str, pl.DataFrame]:
    subsets = {
        "low_prior": (prep.low_prior(), "_lp"),
        "implementation_signal": (prep.implementation_signal(), "_is"),
    }
    grid_rows = prep.formal_grid_rows()
    views: dict[str, pl.DataFrame] = {}
    for name, (subset, suffix) in subsets.items():
        runs = prep.run_view(suffix)
        pairs = _affinity(runs, "recovery")
        views[f"{name}_subset"] = subset
        views[f"{name}_accuracy"] = _slice_accuracy(runs)
        views[f"{name}_recovery_gate"] = _recovery_gate(runs, grid_rows)
        views[f"{name}_kendall_tau"] = _kendall(runs)
        views[f"{name}_affinity"] = pairs
        views[f"{name}_affinity_family"] = _family(pairs)
    return views


# --------------------------------------------------------------------------------------------
# 4. finder calibration (Appendix E, Table 8)
# --------------------------------------------------------------------------------------------


def _finder_slice_accuracy(runs: pl.DataFrame, slice_: str, name: str) -> pl.DataFrame:
    return _pooled(runs.filter(pl.col("slice") == slice_), ["finder"]).select(
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
    return _finder_calibration(_Prepared(rows, compile_pass_only))


def _finder_calibration(prep: _Prepared) -> pl.DataFrame:
    runs = prep.run_view()
    lp_runs = prep.run_view("_lp")
    is_runs = prep.run_view("_is")
    finders = prep.runs.group_by("finder").agg(pl.col("finder_family").sort().first())
    formal = _formal_runs(runs)
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


# --------------------------------------------------------------------------------------------
# 5. evidence audit (Section 4.8, Appendix I, Table 12)
# --------------------------------------------------------------------------------------------

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
    return _evidence_audit_sample(_Prepared(rows, compile_pass_only), seed, per_stratum)


def _order_code(s: pl.Series) -> pl.Series:
    """UInt64 codes that sort like ``s`` sorts as strings / numbers (nulls first -> 0)."""
    if _is_categorical(s.dtype):
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


def _evidence_audit_sample(prep: _Prepared, seed: int, per_stratum: int) -> pl.DataFrame:
    """`evidence_audit_sample` without materialising the (large) sorted population.

    The draw of a population row depends only on its position in the documented order, so the
    population keeps its sort keys and a row index, draws are scattered to it through one
    arg-sort, and only the ``per_stratum`` smallest draws of each stratum are gathered.
    """
    lf = prep.rows.lazy().with_row_index("_row")
    base = lf.filter(
        (pl.col("slice") == "formal")
        & pl.col("correct").fill_null(False)
        & _keep(prep.compile_pass_only)
    )
    gold = (pl.col("label") == "implemented_gold").fill_null(False)
    pool = pl.concat(
        [
            base.filter(gold),
            base.filter(~gold).join(prep.unlabelled_artifacts.lazy(), on=ARTIFACT_KEY, how="semi"),
        ]
    )
    population = _flag(
        pool.select("_row", *_AUDIT_ORDER, "builder_family", "finder_family"),
        prep.low_native,
        "_low",
    ).collect()
    draws = np.random.default_rng(seed).random(population.height)
    u = np.empty(population.height, dtype=np.float64)
    u[_sort_permutation(population.select(_AUDIT_ORDER))] = draws
    strata = ["task", "builder_family", "finder_family", "_low"]
    candidates = (
        population.select(*strata, "_row", _u=pl.Series(u, dtype=pl.Float64))
        .group_by(strata)
        .agg(pl.col("_row", "_u").bottom_k_by("_u", max(per_stratum, 1)))
        .explode("_row", "_u")
        .select("_row", "_u", "_low")
    )
    chosen = _to_string(
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


# --------------------------------------------------------------------------------------------
# 6. token usage (Appendix M, Table 17)
# --------------------------------------------------------------------------------------------

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
    return _token_usage(_Prepared(rows, compile_pass_only), builds, compile_pass_only)


def _token_usage(
    prep: _Prepared, builds: pl.DataFrame | None, compile_pass_only: bool
) -> pl.DataFrame:
    prep.check(_TOKENS)
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
        _check_run_constant(b, ["input_tokens", "output_tokens"], key)
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


# --------------------------------------------------------------------------------------------
# 7. every extra at once
# --------------------------------------------------------------------------------------------

EVIDENCE_AUDIT_SEED = 20260601
EVIDENCE_AUDIT_PER_STRATUM = 2


def analyze_extras(
    rows: pl.DataFrame,
    builds: pl.DataFrame | None = None,
    *,
    seed: int = EVIDENCE_AUDIT_SEED,
    per_stratum: int = EVIDENCE_AUDIT_PER_STRATUM,
) -> dict[str, pl.DataFrame]:
    """Every extra table with its default options, from two shared aggregations of the rows.

    Equal to calling `kendall_tau`, `affinity`, `affinity_family`, `question_agreement`,
    `finder_calibration`, `token_usage` (with ``builds``), `subset_views` and
    `evidence_audit_sample` (with ``seed``, ``per_stratum``) one by one, but the question rows
    are aggregated once (per run, and per (artifact, finder, question)) and every table is
    derived from those. String columns may be String, Categorical or Enum; outputs are keyed
    by String columns either way.

    Returns a dict with keys kendall_tau, affinity, affinity_family, question_agreement,
    finder_calibration, token_usage, every `subset_views` key and evidence_audit_sample.
    """
    if per_stratum < 0:
        raise ConfigError("per_stratum must be >= 0", field="per_stratum")
    prep = _Prepared(rows, True)
    runs = prep.run_view()
    pairs = _affinity(runs, "recovery")
    tables = {
        "kendall_tau": _kendall(runs),
        "affinity": pairs,
        "affinity_family": _family(pairs),
        "question_agreement": prep.agreement,
        "finder_calibration": _finder_calibration(prep),
        "token_usage": _token_usage(prep, builds, False),
    }
    tables.update(_subset_views(prep))
    tables["evidence_audit_sample"] = _evidence_audit_sample(prep, seed, per_stratum)
    return tables
