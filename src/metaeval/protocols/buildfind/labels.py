"""Implementation labels for artifact-question pairs (paper, Section 4.1).

A finder should only be scored on claims the artifact actually implements, so every
(artifact, question) pair gets one of three labels: ``implemented_gold`` (the artifact
implements the gold behaviour), ``implemented_non_gold`` (it implements another option) or
``absent_ambiguous`` (it implements none of them, or not clearly). Labels come from two stages:

1. **Consensus prelabel** (:func:`consensus_prelabels`). Only formal (artifact-conditioned)
   rows of the selected *base finders* are used. A pair is prelabelled when every expected base
   finder answered it in at least ``min_trials`` find trials and all of those answers, across
   all base finders and all their trials, are one and the same option. The label is
   ``implemented_gold`` when that option is the gold key and ``implemented_non_gold``
   otherwise.
2. **Manual review** (:func:`review_queue`; the CSV file is written and read by
   `review_csv`). Every other pair goes to a CSV a person fills in.

Rules this module fixes where the paper leaves them open:

* *Which base finders are expected for an artifact.* A finder panel is usually split by effort
  (high-effort builders are inspected by high-effort finders). The expected base finders of an
  artifact are the base finders that have formal rows in any effort panel the artifact's formal
  rows belong to. A base finder that belongs to the panel but has no answer for the pair sends
  the pair to review; an artifact whose panel contains no base finder is reviewed entirely.
* *Unanswered answers.* A null answer never counts as agreement. If the base finders agree
  only in not answering, the pair goes to review rather than being prelabelled
  ``absent_ambiguous``: the paper derives prelabels from stable *answers*, and a missing answer
  may be a harness failure rather than evidence that the behaviour is absent. Deciding
  ``absent_ambiguous`` is left to the reviewer.
* *Non-base finders* never influence the prelabel; their answers are only shown to reviewers.
* *Precedence* (:func:`apply_labels`): a filled manual-review label wins over a prelabel; a
  pair with neither stays ``unlabeled`` with source ``none``. Control rows (question_only and
  spec_only) always carry ``unlabeled``/``none``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.rows.table import conform

PAIR_KEY = ("task", "builder", "build_trial", "question_id")
ARTIFACT_KEY = ["task", "builder", "build_trial"]
FILLABLE_LABELS = ("implemented_gold", "implemented_non_gold", "absent_ambiguous")
CONSENSUS = "consensus_prelabel"
MANUAL = "manual_review"

PRELABEL_COLUMNS = (
    *PAIR_KEY,
    "gold",
    "base_answers",
    "consensus_answer",
    "label",
    "label_source",
    "reason",
)
REVIEW_COLUMNS = (
    *PAIR_KEY,
    "question",
    "gold",
    "observed_answers",
    "base_answers",
    "reason",
    "label",
    "reviewer",
    "notes",
)
UNANSWERED = "none"

_KEY_SCHEMA = {"task": pl.Utf8, "builder": pl.Utf8, "build_trial": pl.Int32, "question_id": pl.Utf8}


# ---------------------------------------------------------------------------------------------
# helpers


def _summary(answers: Sequence[str | None]) -> str:
    """'A×4, C×2': counts per option, most frequent first; unanswered shown as 'none'."""
    counts: dict[str, int] = {}
    for answer in answers:
        key = UNANSWERED if answer is None else answer
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0] == UNANSWERED, kv[0]))
    return ", ".join(f"{key}×{n}" for key, n in ordered)


def _formal(rows: pl.DataFrame) -> pl.DataFrame:
    return conform(rows).filter(pl.col("slice") == "formal")


def _pairs(formal: pl.DataFrame) -> pl.DataFrame:
    """One row per formal artifact-question pair with its gold key (checked to be unique)."""
    pairs = formal.group_by(list(PAIR_KEY)).agg(pl.col("gold").drop_nulls().unique().alias("golds"))
    bad = pairs.filter(pl.col("golds").list.len() != 1)
    if bad.height:
        first = bad.row(0, named=True)
        raise ConfigError(
            f"{bad.height} artifact-question pair(s) have no single gold key, e.g. "
            f"{_key_text(first)}: {first['golds']}",
            file="<rows>",
            field="gold",
        )
    return pairs.with_columns(pl.col("golds").list.first().alias("gold")).drop("golds")


def _key_text(row: Mapping[str, object]) -> str:
    return "/".join(str(row[k]) for k in PAIR_KEY)


def _keys(df: pl.DataFrame, source: str) -> pl.DataFrame:
    missing = [k for k in PAIR_KEY if k not in df.columns]
    if missing:
        raise ConfigError(f"missing column(s): {', '.join(missing)}", file=source)
    try:
        return df.with_columns([pl.col(k).cast(t, strict=True) for k, t in _KEY_SCHEMA.items()])
    except (pl.exceptions.InvalidOperationError, pl.exceptions.ComputeError) as exc:
        raise ConfigError(f"key columns have the wrong type: {exc}", file=source) from exc


def _check_unique(df: pl.DataFrame, source: str) -> None:
    dup = df.filter(pl.struct(list(PAIR_KEY)).is_duplicated())
    if dup.height:
        raise ConfigError(
            f"artifact-question pair listed more than once: {_key_text(dup.row(0, named=True))}",
            file=source,
            field="question_id",
        )


def _check_labels(df: pl.DataFrame, source: str) -> None:
    bad = df.filter(~pl.col("label").is_in(list(FILLABLE_LABELS)))
    if bad.height:
        value = bad.get_column("label")[0]
        raise ConfigError(
            f"label {value!r} is not one of {', '.join(FILLABLE_LABELS)}",
            file=source,
            field="label",
        )


# ---------------------------------------------------------------------------------------------
# stage 1: consensus prelabels


def consensus_prelabels(
    rows: pl.DataFrame, base_finders: Sequence[str], *, min_trials: int = 1
) -> pl.DataFrame:
    """Triage every formal artifact-question pair with the base finders' stable answers.

    Returns one row per (task, builder, build_trial, question_id) seen in the formal slice, with
    the columns of ``PRELABEL_COLUMNS``. Prelabelled pairs carry ``label`` implemented_gold or
    implemented_non_gold, ``label_source`` consensus_prelabel and the agreed
    ``consensus_answer``; the others carry ``unlabeled``/``none`` and a ``reason`` saying why
    they need review. ``base_answers`` summarises each base finder's answers, for example
    ``"codex: A×3; opus: A×2, B×1"``. ``min_trials`` is the number of find trials each base
    finder needs on the pair (the paper used three repeated runs).
    """
    base = list(dict.fromkeys(base_finders))
    if not base:
        raise ConfigError("at least one base finder is needed", field="base_finders")
    if min_trials < 1:
        raise ConfigError("min_trials must be at least 1", field="min_trials")
    formal = _formal(rows)
    expected_by_artifact = _expected_base_finders(formal, base)
    by_pair = _base_answers(formal, base)
    out: list[dict[str, object]] = []
    for rec in _pairs(formal).sort(list(PAIR_KEY)).iter_rows(named=True):
        key = tuple(rec[k] for k in PAIR_KEY)
        want = expected_by_artifact.get(key[:3], [])
        seen = by_pair.get(key, {})
        consensus, reason = _consensus(want, seen, min_trials)
        if consensus is None:
            label, source = "unlabeled", "none"
        else:
            label = "implemented_gold" if consensus == rec["gold"] else "implemented_non_gold"
            source = CONSENSUS
        out.append(
            {
                **{k: rec[k] for k in PAIR_KEY},
                "gold": rec["gold"],
                "base_answers": "; ".join(f"{f}: {_summary(seen[f])}" for f in sorted(seen)),
                "consensus_answer": consensus,
                "label": label,
                "label_source": source,
                "reason": reason,
            }
        )
    schema = {**_KEY_SCHEMA, **{c: pl.Utf8 for c in PRELABEL_COLUMNS if c not in _KEY_SCHEMA}}
    return pl.DataFrame(out, schema=schema) if out else pl.DataFrame(schema=schema)


def _expected_base_finders(formal: pl.DataFrame, base: list[str]) -> dict[tuple, list[str]]:
    """(task, builder, build_trial) -> the base finders active in the artifact's effort
    panel(s), sorted."""
    panel = pl.col("effort_panel").fill_null("")
    panel_base = (
        formal.filter(pl.col("finder").is_in(base))
        .select(panel.alias("panel"), pl.col("finder"))
        .unique()
    )
    expected = (
        formal.select([*ARTIFACT_KEY, panel.alias("panel")])
        .unique()
        .join(panel_base, on="panel", how="inner")
        .group_by(ARTIFACT_KEY)
        .agg(pl.col("finder").unique().sort().alias("expected"))
    )
    return {
        tuple(rec[k] for k in ARTIFACT_KEY): list(rec["expected"])
        for rec in expected.iter_rows(named=True)
    }


def _base_answers(formal: pl.DataFrame, base: list[str]) -> dict[tuple, dict[str, list]]:
    """Pair key -> base finder -> its answers over its find trials."""
    answers = (
        formal.filter(pl.col("finder").is_in(base))
        .group_by([*PAIR_KEY, "finder"])
        .agg(pl.col("answer"))
    )
    by_pair: dict[tuple, dict[str, list]] = {}
    for rec in answers.iter_rows(named=True):
        key = tuple(rec[k] for k in PAIR_KEY)
        by_pair.setdefault(key, {})[rec["finder"]] = rec["answer"]
    return by_pair


def _consensus(
    expected: list[str], seen: Mapping[str, list[str | None]], min_trials: int
) -> tuple[str | None, str | None]:
    """(agreed option, None) or (None, reason the pair needs review)."""
    if not expected:
        return None, "no base finder inspected this artifact's effort panel"
    missing = [f for f in expected if f not in seen]
    if missing:
        return None, f"no answers from base finder(s) {', '.join(missing)}"
    few = [f for f in expected if len(seen[f]) < min_trials]
    if few:
        return None, f"fewer than {min_trials} find trial(s) from {', '.join(few)}"
    unstable = [f for f in expected if len(set(seen[f])) > 1]
    if unstable:
        return None, f"unstable answers from {', '.join(unstable)}"
    stable = {f: seen[f][0] for f in expected}
    if len(set(stable.values())) > 1:
        return None, "base finders disagree"
    agreed = next(iter(stable.values()))
    if agreed is None:
        return None, "base finders consistently left the question unanswered"
    return agreed, None


# ---------------------------------------------------------------------------------------------
# stage 2: manual review


def review_queue(
    rows: pl.DataFrame,
    prelabels: pl.DataFrame | None,
    questions: Mapping[object, str] | None = None,
) -> pl.DataFrame:
    """Every formal artifact-question pair without a consensus prelabel, ready to review.

    Columns are ``REVIEW_COLUMNS``: the pair key, the question text (looked up in
    ``questions`` by ``(task, question_id)`` first, then by ``question_id``; empty when not
    found), the gold key, ``observed_answers`` over all finders' formal trials (``"A×4, C×2"``),
    the base finders' answers and the triage reason when ``prelabels`` carries them, and empty
    ``label``, ``reviewer`` and ``notes`` fields to fill in. ``prelabels`` may be None (no
    base finders configured): then every formal pair is queued.
    """
    formal = _formal(rows)
    pairs = _pairs(formal)
    if prelabels is None:
        prelabels = pl.DataFrame(schema=_KEY_SCHEMA)
    pre = _keys(prelabels, "<prelabels>")
    if "label_source" in pre.columns:
        labelled = pre.filter(pl.col("label_source") == CONSENSUS)
    elif "label" in pre.columns:
        labelled = pre.filter(pl.col("label").is_in(list(FILLABLE_LABELS)))
    else:
        labelled = pre.clear()
    todo = pairs.join(labelled.select(list(PAIR_KEY)), on=list(PAIR_KEY), how="anti")
    observed = formal.group_by(list(PAIR_KEY)).agg(pl.col("answer"))
    obs = {tuple(r[k] for k in PAIR_KEY): r["answer"] for r in observed.iter_rows(named=True)}
    context: dict[tuple, dict[str, object]] = {}
    extra = [c for c in ("base_answers", "reason") if c in pre.columns]
    for rec in pre.select([*PAIR_KEY, *extra]).iter_rows(named=True):
        context[tuple(rec[k] for k in PAIR_KEY)] = rec

    out: list[dict[str, object]] = []
    for rec in todo.sort(list(PAIR_KEY)).iter_rows(named=True):
        key = tuple(rec[k] for k in PAIR_KEY)
        info = context.get(key, {})
        out.append(
            {
                **{k: rec[k] for k in PAIR_KEY},
                "question": _question_text(questions, rec["task"], rec["question_id"]),
                "gold": rec["gold"],
                "observed_answers": _summary(obs.get(key, [])),
                "base_answers": info.get("base_answers") or "",
                "reason": info.get("reason") or "no consensus prelabel",
                "label": "",
                "reviewer": "",
                "notes": "",
            }
        )
    schema = {**_KEY_SCHEMA, **{c: pl.Utf8 for c in REVIEW_COLUMNS if c not in _KEY_SCHEMA}}
    return pl.DataFrame(out, schema=schema) if out else pl.DataFrame(schema=schema)


def _question_text(questions: Mapping[object, str] | None, task: str, qid: str) -> str:
    if not questions:
        return ""
    text = questions.get((task, qid))
    if text is None:
        text = questions.get(qid)
    return "" if text is None else str(text)


# ---------------------------------------------------------------------------------------------
# merge


def apply_labels(
    rows: pl.DataFrame, prelabels: pl.DataFrame | None, reviewed: pl.DataFrame | None
) -> pl.DataFrame:
    """Set ``label``/``label_source`` on every row from prelabels and manual review.

    Each formal row takes the label of its (task, builder, build_trial, question_id) pair: a
    filled manual-review label (source ``manual_review``) if there is one, else a consensus
    prelabel (source ``consensus_prelabel``), else ``unlabeled``/``none``. Labels already on the
    input rows are replaced. Control rows always get ``unlabeled``/``none``. Review or prelabel
    entries for pairs absent from ``rows`` are ignored, so one review file can serve several
    panels (e.g. artifact-present and compile-pass). Returns a conformed table in input order.
    """
    rows = conform(rows)
    key = list(PAIR_KEY)
    pre = _label_map(prelabels, "<prelabels>", CONSENSUS)
    man = _label_map(reviewed, "<reviewed>", None)
    merged = (
        rows.with_row_index("_order")
        .drop(["label", "label_source"])
        .join(pre.rename({"label": "_pre"}), on=key, how="left")
        .join(man.rename({"label": "_man"}), on=key, how="left")
        .sort("_order")
    )
    formal = pl.col("slice") == "formal"
    merged = merged.with_columns(
        pl.when(formal & pl.col("_man").is_not_null())
        .then(pl.col("_man"))
        .when(formal & pl.col("_pre").is_not_null())
        .then(pl.col("_pre"))
        .otherwise(pl.lit("unlabeled"))
        .alias("label"),
        pl.when(formal & pl.col("_man").is_not_null())
        .then(pl.lit(MANUAL))
        .when(formal & pl.col("_pre").is_not_null())
        .then(pl.lit(CONSENSUS))
        .otherwise(pl.lit("none"))
        .alias("label_source"),
    )
    return conform(merged.drop(["_order", "_pre", "_man"]))


def _label_map(df: pl.DataFrame | None, source: str, only_source: str | None) -> pl.DataFrame:
    """Key columns plus a validated, non-empty label; one row per pair."""
    empty = pl.DataFrame(schema={**_KEY_SCHEMA, "label": pl.Utf8})
    if df is None or df.height == 0:
        return empty
    if "label" not in df.columns:
        raise ConfigError("missing column(s): label", file=source)
    df = _keys(df, source)
    if only_source is not None and "label_source" in df.columns:
        df = df.filter(pl.col("label_source") == only_source)
    df = df.with_columns(pl.col("label").cast(pl.Utf8).str.strip_chars())
    df = df.filter(pl.col("label").is_not_null() & (pl.col("label") != ""))
    df = df.select([*PAIR_KEY, "label"])
    _check_labels(df, source)
    _check_unique(df, source)
    return df
