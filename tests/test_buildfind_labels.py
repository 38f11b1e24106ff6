"""Build-and-find implementation labels: consensus prelabels, review CSV, merge."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.labels import (
    FILLABLE_LABELS,
    REVIEW_COLUMNS,
    apply_labels,
    consensus_prelabels,
    review_queue,
)
from metaeval.protocols.buildfind.review_csv import read_review_csv, write_review_csv
from metaeval.protocols.buildfind.rows.table import COLUMNS, conform

BASE = ["base1", "base2"]


def row(
    finder: str,
    qid: str,
    answer: str | None,
    *,
    trial: int = 0,
    builder: str = "b1",
    build_trial: int = 0,
    slice_: str = "formal",
    gold: str = "A",
    panel: str = "high",
    task: str = "t1",
) -> dict:
    control = slice_ != "formal"
    return {
        "slice": slice_,
        "task": task,
        "builder": "" if control else builder,
        "builder_family": "" if control else "fam",
        "finder": finder,
        "finder_family": "fam",
        "effort_panel": panel,
        "build_trial": -1 if control else build_trial,
        "find_trial": trial,
        "question_id": qid,
        "gold": gold,
        "answer": answer,
        "correct": answer == gold,
        "compile_pass": None if control else True,
        "label": "unlabeled",
        "label_source": "none",
        "novel_retrieval_bytes": 100,
        "novel_tool_call_bytes": 10,
        "input_tokens": 1000,
        "output_tokens": 50,
    }


def table(records: list[dict]) -> pl.DataFrame:
    return conform(pl.DataFrame(records, schema={c: t for c, (t, _) in COLUMNS.items()}))


def trials(finder: str, qid: str, answers: list[str | None], **kw) -> list[dict]:
    return [row(finder, qid, a, trial=i, **kw) for i, a in enumerate(answers)]


@pytest.fixture
def rows() -> pl.DataFrame:
    recs: list[dict] = []
    # q1: stable and agreeing on gold -> implemented_gold
    recs += trials("base1", "q1", ["A", "A", "A"]) + trials("base2", "q1", ["A", "A"])
    # q2: stable and agreeing on a non-gold option -> implemented_non_gold
    recs += trials("base1", "q2", ["C", "C"]) + trials("base2", "q2", ["C", "C"])
    # q3: base1 unstable -> review
    recs += trials("base1", "q3", ["A", "B"]) + trials("base2", "q3", ["A", "A"])
    # q4: both stable but disagreeing -> review
    recs += trials("base1", "q4", ["A", "A"]) + trials("base2", "q4", ["B", "B"])
    # q5: non-base finder disagrees, base finders agree -> still prelabelled gold
    recs += trials("base1", "q5", ["A", "A"]) + trials("base2", "q5", ["A", "A"])
    recs += trials("other", "q5", ["D", "B", None])
    # q6: base finders agree only in leaving it unanswered -> review
    recs += trials("base1", "q6", [None, None]) + trials("base2", "q6", [None, None])
    # q7: only one base finder answered -> review
    recs += trials("base1", "q7", ["A", "A"]) + trials("other", "q7", ["A"])
    # controls never get labels
    recs += trials("base1", "q1", ["A", "B"], slice_="question_only")
    recs += trials("base1", "q1", ["A"], slice_="spec_only")
    return table(recs)


def by_q(df: pl.DataFrame) -> dict[str, dict]:
    return {r["question_id"]: r for r in df.iter_rows(named=True)}


def test_consensus_rules(rows: pl.DataFrame) -> None:
    pre = by_q(consensus_prelabels(rows, BASE))
    assert set(pre) == {f"q{i}" for i in range(1, 8)}  # one row per formal pair
    assert pre["q1"]["label"] == "implemented_gold"
    assert pre["q1"]["label_source"] == "consensus_prelabel"
    assert pre["q1"]["consensus_answer"] == "A"
    assert pre["q1"]["reason"] is None
    assert pre["q2"]["label"] == "implemented_non_gold"
    assert pre["q2"]["consensus_answer"] == "C"
    assert pre["q5"]["label"] == "implemented_gold"  # non-base finder ignored
    for q, reason in {
        "q3": "unstable",
        "q4": "disagree",
        "q6": "unanswered",
        "q7": "base2",
    }.items():
        assert pre[q]["label"] == "unlabeled", q
        assert pre[q]["label_source"] == "none", q
        assert pre[q]["consensus_answer"] is None, q
        assert reason in pre[q]["reason"], (q, pre[q]["reason"])
    assert pre["q3"]["base_answers"] == "base1: A×1, B×1; base2: A×2"


def test_min_trials_and_errors(rows: pl.DataFrame) -> None:
    pre = by_q(consensus_prelabels(rows, BASE, min_trials=3))
    assert pre["q1"]["label"] == "unlabeled"  # base2 ran only two trials
    assert "fewer than 3" in pre["q1"]["reason"]
    with pytest.raises(ConfigError, match="base_finders"):
        consensus_prelabels(rows, [])


def test_base_finders_are_expected_per_effort_panel() -> None:
    recs = trials("hi1", "q1", ["A", "A"], builder="bh") + trials("hi2", "q1", ["A"], builder="bh")
    recs += trials("lo1", "q1", ["B", "B"], builder="bl", panel="low")
    recs += trials("lo2", "q1", ["B"], builder="bl", panel="low")
    recs += trials("x", "q1", ["A"], builder="bn", panel="none")
    pre = consensus_prelabels(table(recs), ["hi1", "hi2", "lo1", "lo2"])
    got = {r["builder"]: r for r in pre.iter_rows(named=True)}
    assert got["bh"]["label"] == "implemented_gold"
    assert got["bl"]["label"] == "implemented_non_gold"
    assert got["bn"]["label"] == "unlabeled"
    assert "no base finder" in got["bn"]["reason"]


def test_review_queue(rows: pl.DataFrame) -> None:
    pre = consensus_prelabels(rows, BASE)
    queue = review_queue(rows, pre, {("t1", "q3"): "Which storage?", "q4": "Which index?"})
    assert tuple(queue.columns) == REVIEW_COLUMNS
    got = by_q(queue)
    assert set(got) == {"q3", "q4", "q6", "q7"}
    assert got["q3"]["question"] == "Which storage?"
    assert got["q4"]["question"] == "Which index?"
    assert got["q6"]["question"] == ""
    assert got["q3"]["observed_answers"] == "A×3, B×1"
    assert got["q6"]["observed_answers"] == "none×4"
    assert got["q7"]["observed_answers"] == "A×3"
    assert "unstable" in got["q3"]["reason"]
    assert all(r["label"] == "" and r["reviewer"] == "" for r in got.values())
    # a prelabel table holding only prelabelled pairs (no triage columns) works too
    slim = pre.filter(pl.col("label_source") == "consensus_prelabel").select(
        "task", "builder", "build_trial", "question_id", "label"
    )
    assert set(by_q(review_queue(rows, slim))) == {"q3", "q4", "q6", "q7"}
    # no base finders configured: every formal pair is queued
    everything = review_queue(rows, None)
    assert set(by_q(everything)) == {f"q{i}" for i in range(1, 8)}
    assert set(everything.get_column("reason")) == {"no consensus prelabel"}


def test_review_csv_round_trip(rows: pl.DataFrame, tmp_path: Path) -> None:
    queue = review_queue(
        rows, consensus_prelabels(rows, BASE), {"q3": 'Text, with "quotes"\nand a newline'}
    )
    filled = queue.with_columns(
        pl.when(pl.col("question_id") == "q3")
        .then(pl.lit("absent_ambiguous"))
        .when(pl.col("question_id") == "q4")
        .then(pl.lit("implemented_non_gold"))
        .otherwise(pl.lit(""))
        .alias("label"),
        pl.lit("ann").alias("reviewer"),
    )
    path = write_review_csv(filled, tmp_path / "review" / "queue.csv")
    back = read_review_csv(path)
    assert back.columns == filled.columns
    assert back.get_column("build_trial").dtype == pl.Int32
    got = by_q(back)
    assert got["q3"]["label"] == "absent_ambiguous"
    assert got["q3"]["question"] == 'Text, with "quotes"\nand a newline'
    assert got["q4"]["label"] == "implemented_non_gold"
    assert got["q6"]["label"] is None  # unfilled
    assert got["q7"]["observed_answers"] == "A×3"


def test_invalid_label_names_file_row_and_field(tmp_path: Path) -> None:
    path = tmp_path / "review.csv"
    path.write_text(
        "task,builder,build_trial,question_id,label,notes\n"
        "t1,b1,0,q1,implemented_gold,ok\n"
        "t1,b1,0,q2,,later\n"
        "t1,b1,0,q3,maybe_gold,typo\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        read_review_csv(path)
    assert err.value.file == str(path)
    assert err.value.field == "label"
    assert "row 3" in str(err.value)
    assert "maybe_gold" in str(err.value)


@pytest.mark.parametrize(
    ("body", "field", "needle"),
    [
        ("t1,b1,x,q1,implemented_gold\n", "build_trial", "row 1"),
        ("t1,b1,0,q1,implemented_gold\nt1,b1,0,q1,absent_ambiguous\n", "question_id", "row 2"),
        ("t1,b1,0,,implemented_gold\n", "question_id", "row 1"),
    ],
)
def test_other_review_errors(tmp_path: Path, body: str, field: str, needle: str) -> None:
    path = tmp_path / "review.csv"
    path.write_text("task,builder,build_trial,question_id,label\n" + body, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        read_review_csv(path)
    assert err.value.field == field
    assert needle in str(err.value)


def test_missing_review_file_and_column(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        read_review_csv(tmp_path / "nope.csv")
    path = tmp_path / "r.csv"
    path.write_text("task,builder,question_id,label\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="build_trial"):
        read_review_csv(path)


def test_apply_labels_provenance(rows: pl.DataFrame) -> None:
    pre = consensus_prelabels(rows, BASE)
    reviewed = pl.DataFrame(
        {
            "task": ["t1", "t1", "t1", "t9"],
            "builder": ["b1", "b1", "b1", "b1"],
            "build_trial": [0, 0, 0, 0],
            "question_id": ["q1", "q3", "q4", "q1"],
            "label": ["absent_ambiguous", "implemented_gold", None, "implemented_gold"],
        }
    )
    out = apply_labels(rows, pre, reviewed)
    assert out.columns == list(COLUMNS)
    assert out.height == rows.height
    # order and all other values are kept
    assert out.drop("label", "label_source").equals(rows.drop("label", "label_source"))
    formal = out.filter(pl.col("slice") == "formal")
    pairs = formal.group_by("question_id").agg(
        pl.col("label").unique().alias("labels"), pl.col("label_source").unique().alias("sources")
    )
    got = {r["question_id"]: (r["labels"], r["sources"]) for r in pairs.iter_rows(named=True)}
    assert got["q1"] == (["absent_ambiguous"], ["manual_review"])  # manual wins
    assert got["q2"] == (["implemented_non_gold"], ["consensus_prelabel"])
    assert got["q3"] == (["implemented_gold"], ["manual_review"])
    assert got["q4"] == (["unlabeled"], ["none"])  # unfilled review, no prelabel
    assert got["q5"] == (["implemented_gold"], ["consensus_prelabel"])
    controls = out.filter(pl.col("slice") != "formal")
    assert controls.height == 3
    assert set(controls.get_column("label")) == {"unlabeled"}
    assert set(controls.get_column("label_source")) == {"none"}


def test_apply_labels_resets_controls_and_checks_inputs(rows: pl.DataFrame) -> None:
    dirty = rows.with_columns(
        pl.lit("implemented_gold").alias("label"), pl.lit("manual_review").alias("label_source")
    )
    out = apply_labels(dirty, None, None)
    assert set(out.get_column("label")) == {"unlabeled"}
    assert set(out.get_column("label_source")) == {"none"}
    bad = pl.DataFrame(
        {
            "task": ["t1"],
            "builder": ["b1"],
            "build_trial": [0],
            "question_id": ["q1"],
            "label": ["gold"],
        }
    )
    with pytest.raises(ConfigError) as err:
        apply_labels(rows, None, bad)
    assert err.value.field == "label"
    twice = pl.concat([bad, bad]).with_columns(pl.lit(FILLABLE_LABELS[0]).alias("label"))
    with pytest.raises(ConfigError, match="more than once"):
        apply_labels(rows, None, twice)


def test_empty_inputs() -> None:
    empty = table([])
    pre = consensus_prelabels(empty, BASE)
    assert pre.height == 0
    assert review_queue(empty, pre).height == 0
    assert apply_labels(empty, pre, None).height == 0
