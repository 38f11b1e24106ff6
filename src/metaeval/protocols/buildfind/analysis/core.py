"""Shared building blocks of the build-and-find analysis (paper Sections 3.3-3.4, Appendix F).

Every metric is a pure function of the canonical question-rows table
(`metaeval.protocols.buildfind.rows.table`). The heavy work over the question rows happens in exactly
two aggregations, both defined here, and every metric is derived from their (much smaller)
results:

* `run_table` -- one row per find run (Eq. 1 inputs: scored and correct counts, run bytes);
* `question_groups` -- one row per (artifact or control, finder, question) with the repeated find
  trials collapsed (inputs of repeatability, of the AELS stability term and of coverage).

`analyze` computes both once and derives every published table from them; the per-metric
functions (`run_accuracy`, `calibration`, ...) compute what they need from the rows on each call.

Conventions shared by all metrics (each also restated where it matters):

* The input may be a `DataFrame` or `LazyFrame`, with string columns as `String`, `Categorical`
  or `Enum` (the bench uses `Enum` to stay inside its memory budget). Output key columns are
  always `String`, counts `Int64`, rates `Float64`, and every output is sorted by its keys.
* A run is (slice, effort_panel, task, builder, build_trial, finder, find_trial). The brief's
  run key has no effort_panel; it is included because every panel-local metric needs it and a
  run has a single panel, so it never splits a run.
* An artifact is (task, builder, build_trial); for label bookkeeping the slice is added so the
  two controls (builder "" and build_trial -1 in both) never share an "artifact".
* `correct` is taken as recorded (contract: answer == gold, unanswered is not correct); a null
  `correct` is read as not correct.
* Run-level measurements (bytes, tokens, compile_pass) are constant across a run's question rows
  by contract; the run value is their maximum so the result never depends on row order.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

FORMAL = "formal"
QUESTION_ONLY = "question_only"
SPEC_ONLY = "spec_only"
IMPLEMENTED_GOLD = "implemented_gold"
IMPLEMENTED_NON_GOLD = "implemented_non_gold"
ABSENT_AMBIGUOUS = "absent_ambiguous"
UNLABELED = "unlabeled"
AUDITED = "audited"
ALL_QUESTIONS = "all_questions"
ALL_TASKS = "all"  # reserved task name of the pooled rows in calibration and repeatability

METRICS = ("total_bytes", "novel_retrieval_bytes", "novel_tool_call_bytes")
RUN_KEYS = ["slice", "effort_panel", "task", "builder", "build_trial", "finder", "find_trial"]
ARTIFACT_KEYS = ["slice", "task", "builder", "build_trial"]
QUESTION_GROUP_KEYS = [
    "slice",
    "effort_panel",
    "task",
    "builder",
    "build_trial",
    "finder",
    "question_id",
]
CELL_KEYS = ["effort_panel", "builder", "finder", "task"]
STRING_KEYS = ("slice", "effort_panel", "task", "builder", "finder", "question_id", "metric")

Frame = pl.DataFrame | pl.LazyFrame


def lazy(rows: Frame) -> pl.LazyFrame:
    """The rows as a LazyFrame (no copy)."""
    return rows.lazy() if isinstance(rows, pl.DataFrame) else rows


def keyed(rows: Frame) -> pl.LazyFrame:
    """The rows with their String key and label columns cast to Categorical (lazy).

    Grouping 10M rows by seven String keys row-encodes every string; categorical keys are
    grouped on their 4-byte codes, which halves the extra memory of the two big aggregations at
    about the same speed (bench/buildfind_analysis.py). Columns already Categorical or Enum are
    left alone.
    """
    lf = lazy(rows)
    schema = lf.collect_schema()
    wanted = (
        "slice",
        "effort_panel",
        "task",
        "builder",
        "finder",
        "question_id",
        "answer",
        "label",
    )
    strings = [c for c in wanted if c in schema and schema[c] == pl.String]
    return lf.with_columns(pl.col(strings).cast(pl.Categorical)) if strings else lf


def finish(df: pl.DataFrame | pl.LazyFrame, keys: list[str]) -> pl.DataFrame:
    """Cast categorical key columns to String and sort by `keys` (deterministic output)."""
    lf = lazy(df)
    names = lf.collect_schema().names()
    lf = lf.with_columns(pl.col(c).cast(pl.String) for c in STRING_KEYS if c in names)
    return lf.sort(keys, nulls_last=True, maintain_order=True).collect()


def fmean(expr: pl.Expr) -> pl.Expr:
    """Order-independent mean of a float expression inside an aggregation.

    Rows reach a group in an order that depends on parallel scheduling, and float addition is
    not associative, so a plain mean can differ in the last bits between two runs. Sorting the
    group's values first and summing them sequentially (a cumulative sum, which the query
    optimizer cannot reorder or drop the sort of, as it may for a plain `sort().mean()`) makes the
    result deterministic. Nulls are skipped; an empty or all-null group gives null.
    """
    values = expr.drop_nulls().sort()
    return values.cum_sum().last() / values.len()


def _correct() -> pl.Expr:
    return pl.col("correct").fill_null(False)


def _label_is(value: str) -> pl.Expr:
    return (pl.col("label") == value).fill_null(False)


def primary(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Formal rows of compile-pass artifacts: the primary panel (Sec. 3.3, Alg. 1 line 6).

    A formal row with a null compile_pass is outside the primary panel (treated as failed).
    """
    return frame.filter((pl.col("slice") == FORMAL) & pl.col("compile_pass").fill_null(False))


def run_table(
    rows: Frame, *, subsets: Sequence[str] = (), extra: Sequence[pl.Expr] = ()
) -> pl.LazyFrame:
    """One row per find run with the audited scoring set of Eq. 1 applied: the one run table
    every metric (core and extras) is derived from.

    Returned as a LazyFrame over the materialized table (about rows / questions-per-run rows), so
    plans that use it several times do not repeat the aggregation over the question rows.

    Columns: RUN_KEYS, compile_pass, scoring_set, n_questions, n_scored, n_correct, accuracy,
    all_correct, novel_retrieval_bytes, novel_tool_call_bytes, total_bytes, input_tokens,
    output_tokens.

    Scoring set Q+_{b,t,r} (Eq. 1, Sec. 3.4): the questions labelled implemented_gold for the
    run's artifact. Choices:

    * An artifact counts as audited when at least one of its (artifact, question) pairs carries a
      label other than 'unlabeled' (in any of its find runs). Audited artifacts score only their
      implemented_gold questions; their 'unlabeled' questions (a partial audit) are not in Q+.
    * Fallback: a formal artifact with no label at all (e.g. before labelling) and every control
      run (no artifact, so no audit, whatever its label column says) score all questions;
      `scoring_set` is "all_questions" instead of "audited".
    * An audited artifact whose Q+ is empty contributes no accuracy: its runs keep a row with
      n_scored = 0, accuracy null and all_correct false, so they are counted but never averaged.
    """
    runs = _with_scoring_set(_run_counts(rows, subsets, extra), subsets)
    return (
        runs.select(
            *RUN_KEYS,
            "compile_pass",
            "scoring_set",
            "n_questions",
            "n_scored",
            "n_correct",
            "accuracy",
            "all_correct",
            "novel_retrieval_bytes",
            "novel_tool_call_bytes",
            "total_bytes",
            "input_tokens",
            "output_tokens",
            *(f"n_{p}{s}" for s in subsets for p in ("scored", "correct")),
            *(e.meta.output_name() for e in extra),
        )
        .collect()
        .lazy()
    )


def _run_counts(rows: Frame, subsets: Sequence[str], extra: Sequence[pl.Expr]) -> pl.LazyFrame:
    """One row per find run: question counts under both scoring-set rules (all questions;
    implemented_gold only), how many are labelled, and the run's effort and tokens."""
    gold = _label_is(IMPLEMENTED_GOLD)
    return (
        keyed(rows)
        .group_by(RUN_KEYS)
        .agg(
            *_subset_counts(subsets),
            *extra,
            n_questions=pl.len().cast(pl.Int64),
            n_labelled=(pl.col("label") != UNLABELED).fill_null(False).sum().cast(pl.Int64),
            n_gold=gold.sum().cast(pl.Int64),
            n_gold_correct=(gold & _correct()).sum().cast(pl.Int64),
            n_any_correct=_correct().sum().cast(pl.Int64),
            compile_pass=pl.col("compile_pass").max(),
            novel_retrieval_bytes=pl.col("novel_retrieval_bytes").max(),
            novel_tool_call_bytes=pl.col("novel_tool_call_bytes").max(),
            input_tokens=pl.col("input_tokens").max(),
            output_tokens=pl.col("output_tokens").max(),
        )
    )


def _with_scoring_set(runs: pl.LazyFrame, subsets: Sequence[str]) -> pl.LazyFrame:
    """Pick each run's scoring set (audited formal artifact: Q+; else all questions) and
    derive n_scored, n_correct, accuracy, all_correct and total_bytes from it."""
    audited = (pl.col("slice") == FORMAL) & (pl.col("n_labelled").sum().over(ARTIFACT_KEYS) > 0)
    return (
        runs.with_columns(_audited=audited)
        .with_columns(
            *(
                pl.when("_audited")
                .then(f"_{p}_gold{s}")
                .otherwise(f"_{p}_all{s}")
                .alias(f"n_{p}{s}")
                for s in subsets
                for p in ("scored", "correct")
            ),
            scoring_set=pl.when("_audited").then(pl.lit(AUDITED)).otherwise(pl.lit(ALL_QUESTIONS)),
            n_scored=pl.when("_audited").then("n_gold").otherwise("n_questions"),
            n_correct=pl.when("_audited").then("n_gold_correct").otherwise("n_any_correct"),
        )
        .with_columns(
            accuracy=pl.when(pl.col("n_scored") > 0).then(pl.col("n_correct") / pl.col("n_scored")),
            all_correct=(pl.col("n_scored") > 0) & (pl.col("n_correct") == pl.col("n_scored")),
            total_bytes=pl.col("novel_retrieval_bytes") + pl.col("novel_tool_call_bytes"),
        )
    )


def _subset_counts(subsets: Sequence[str]) -> list[pl.Expr]:
    """Per subset column s: scored / correct counts of both scoring-set rules, in the rows
    where s is true (`run_table` picks one rule per run)."""
    gold, ok = _label_is(IMPLEMENTED_GOLD), _correct()
    counts = []
    for s in subsets:
        inside = pl.col(s).fill_null(False)
        counts += [
            (inside & gold).sum().cast(pl.Int64).alias(f"_scored_gold{s}"),
            (inside & gold & ok).sum().cast(pl.Int64).alias(f"_correct_gold{s}"),
            inside.sum().cast(pl.Int64).alias(f"_scored_all{s}"),
            (inside & ok).sum().cast(pl.Int64).alias(f"_correct_all{s}"),
        ]
    return counts


def question_groups(rows: Frame) -> pl.LazyFrame:
    """One row per (slice, panel, artifact or control, finder, question): find trials collapsed.

    Returned as a LazyFrame over the materialized table (see `run_table`).

    Columns: QUESTION_GROUP_KEYS, compile_pass, n_trials, n_correct, all_correct, same_answer,
    label_class, scored.

    * all_correct: every trial answered correctly (unanswered is not correct).
    * same_answer: every trial answered and all answers are equal (an unanswered trial breaks
      agreement: "no answer" is never counted as agreeing with anything, itself included).
    * label_class: the pair's label; labels are constant per pair by contract, and should they
      differ the pair is implemented_gold only if every row says so, else implemented_non_gold,
      absent_ambiguous, unlabeled in that priority (deterministic, conservative).
    * scored: the group is in the scoring set of `run_table` (implemented_gold in an audited
      artifact; any question of an unlabeled artifact or of a control).
    """
    label_class = (
        pl.when(pl.col("_all_gold"))
        .then(pl.lit(IMPLEMENTED_GOLD))
        .when(pl.col("_any_non_gold"))
        .then(pl.lit(IMPLEMENTED_NON_GOLD))
        .when(pl.col("_any_ambiguous"))
        .then(pl.lit(ABSENT_AMBIGUOUS))
        .otherwise(pl.lit(UNLABELED))
    )
    audited = (pl.col("slice") == FORMAL) & pl.col("_labelled").any().over(ARTIFACT_KEYS)
    groups = (
        keyed(rows)
        .group_by(QUESTION_GROUP_KEYS)
        .agg(
            compile_pass=pl.col("compile_pass").max(),
            n_trials=pl.len().cast(pl.Int64),
            n_correct=_correct().sum().cast(pl.Int64),
            all_correct=_correct().all(),
            same_answer=(pl.col("answer").null_count() == 0) & (pl.col("answer").n_unique() == 1),
            _all_gold=_label_is(IMPLEMENTED_GOLD).all(),
            _any_non_gold=_label_is(IMPLEMENTED_NON_GOLD).any(),
            _any_ambiguous=_label_is(ABSENT_AMBIGUOUS).any(),
            _labelled=(pl.col("label") != UNLABELED).fill_null(False).any(),
        )
        .with_columns(label_class=label_class, scored=~audited | pl.col("_all_gold"))
        .drop("_all_gold", "_any_non_gold", "_any_ambiguous", "_labelled")
    )
    return groups.collect().lazy()


def panel_grid(runs: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame, pl.LazyFrame]:
    """The fixed analysis panel (Appendix F): builders B, finders F and tasks T per effort panel.

    Taken from the formal runs of each effort panel, compile-failed artifacts included (a builder
    whose artifacts all failed the probe stays in B and shows up as missing cells). Returns the
    (effort_panel, builder), (effort_panel, finder) and (effort_panel, task) frames.
    """
    formal = runs.filter(pl.col("slice") == FORMAL)
    return (
        formal.select("effort_panel", "builder").unique(),
        formal.select("effort_panel", "finder").unique(),
        formal.select("effort_panel", "task").unique(),
    )
