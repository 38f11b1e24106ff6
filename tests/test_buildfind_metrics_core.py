"""Build-and-find core metrics (Eqs. 1-8, Tables 1-3, 9, 11) on small hand-computed tables.

Every expected number is worked out by hand in the comments next to the table it comes from.
"""

from __future__ import annotations

import math

import polars as pl
import pytest

from metaeval.protocols.buildfind.analysis.accuracy import recovery_gate, run_accuracy
from metaeval.protocols.buildfind.analysis.calibration import calibration, repeatability
from metaeval.protocols.buildfind.analysis.coverage import coverage
from metaeval.protocols.buildfind.analysis.effort import aels, cell_costs, rb_effort
from metaeval.protocols.buildfind.analysis.suite import analyze
from metaeval.protocols.buildfind.rows.table import COLUMNS, SCHEMA, conform, empty_rows

G, N, A, U = "implemented_gold", "implemented_non_gold", "absent_ambiguous", "unlabeled"


def rows(data: dict[str, list]) -> pl.DataFrame:
    """A conformed rows table from the given columns; the others get defaults.

    Defaults: formal slice, task t1, builder b1, finder f1, panel high, trials 0, gold "A",
    answer = gold when correct else "B" (or correct = answer == gold when only answer is
    given), compile_pass true for formal rows and null for controls, label implemented_gold
    for formal rows and unlabeled for controls, 100 retrieval bytes and 0 tool-call bytes.
    """
    n = len(next(iter(data.values())))
    sl = data.get("slice", ["formal"] * n)
    control = [s != "formal" for s in sl]
    defaults = {
        "slice": sl,
        "task": ["t1"] * n,
        "builder": ["" if c else "b1" for c in control],
        "builder_family": ["" if c else "fam_b" for c in control],
        "finder": ["f1"] * n,
        "finder_family": ["fam_f"] * n,
        "effort_panel": ["high"] * n,
        "build_trial": [-1 if c else 0 for c in control],
        "find_trial": [0] * n,
        "question_id": ["q1"] * n,
        "gold": ["A"] * n,
        "compile_pass": [None if c else True for c in control],
        "label": [U if c else G for c in control],
        "label_source": ["none" if c else "consensus_prelabel" for c in control],
        "novel_retrieval_bytes": [100] * n,
        "novel_tool_call_bytes": [0] * n,
        "input_tokens": [0] * n,
        "output_tokens": [0] * n,
    }
    if "answer" in data and "correct" not in data:
        gold = data.get("gold", defaults["gold"])
        data = {**data, "correct": [a == g for a, g in zip(data["answer"], gold, strict=True)]}
    if "answer" not in data:
        gold = data.get("gold", defaults["gold"])
        data = {
            **data,
            "answer": [g if c else "B" for c, g in zip(data["correct"], gold, strict=True)],
        }
    df = pl.DataFrame(
        {c: data.get(c, defaults.get(c)) for c in COLUMNS},
        schema=SCHEMA,
    )
    return conform(df)


def col(df: pl.DataFrame, name: str) -> list:
    return df.get_column(name).to_list()


def approx_list(values: list) -> list:
    return [None if v is None else pytest.approx(v, rel=1e-12, abs=1e-12) for v in values]


# --------------------------------------------------------------------------- run accuracy (Eq. 1)

# 4 questions per run. Artifacts:
#   b1 (labels G G N A): Q+ = {q1, q2}
#       find 0 correct 1 0 1 1 -> 1 of 2 = 0.5;   find 1 correct 1 1 0 0 -> 2/2 = 1.0, all-correct
#   b2 (all unlabeled): fallback, all 4 questions; correct 1 1 1 0 (q4 unanswered) -> 0.75
#   b3 (labels N A N A): audited, Q+ empty -> n_scored 0, accuracy null, counted
#   b4 (labels G U U G, partial audit): Q+ = {q1, q4}; correct 1 1 1 0 -> 1/2 = 0.5
#   control question_only (labels G N N N in the table, ignored): all questions, 1 0 1 1 -> 0.75
Q4 = ["q1", "q2", "q3", "q4"]
ACC_ROWS = rows(
    {
        "slice": ["formal"] * 20 + ["question_only"] * 4,
        "builder": ["b1"] * 8 + ["b2"] * 4 + ["b3"] * 4 + ["b4"] * 4 + [""] * 4,
        "build_trial": [0] * 20 + [-1] * 4,
        "find_trial": [0] * 4 + [1] * 4 + [0] * 16,
        "question_id": Q4 * 6,
        "answer": ["A", "B", "A", "A", "A", "A", "C", "D"]
        + ["A", "A", "A", None]
        + ["A", "A", "A", "A"]
        + ["A", "A", "A", None]
        + ["A", "C", "A", "A"],
        "label": [G, G, N, A] * 2 + [U] * 4 + [N, A, N, A] + [G, U, U, G] + [G, N, N, N],
    }
)


def test_run_accuracy_audited_fallback_empty_and_controls() -> None:
    out = run_accuracy(ACC_ROWS)
    assert out.columns == [
        "slice",
        "effort_panel",
        "task",
        "builder",
        "build_trial",
        "finder",
        "find_trial",
        "compile_pass",
        "scoring_set",
        "n_questions",
        "n_scored",
        "n_correct",
        "accuracy",
        "all_correct",
    ]
    # sorted by slice, ..., builder, ..., find_trial
    assert col(out, "slice") == ["formal"] * 5 + ["question_only"]
    assert col(out, "builder") == ["b1", "b1", "b2", "b3", "b4", ""]
    assert col(out, "scoring_set") == ["audited", "audited", "all_questions"] + ["audited"] * 2 + [
        "all_questions"
    ]
    assert col(out, "n_questions") == [4] * 6
    assert col(out, "n_scored") == [2, 2, 4, 0, 2, 4]
    assert col(out, "n_correct") == [1, 2, 3, 0, 1, 3]
    assert col(out, "accuracy") == approx_list([0.5, 1.0, 0.75, None, 0.5, 0.75])
    assert col(out, "all_correct") == [False, True, False, False, False, False]
    assert col(out, "compile_pass") == [True] * 5 + [None]


def test_run_accuracy_empty_table() -> None:
    assert run_accuracy(empty_rows()).height == 0


# ---------------------------------------------------------- calibration (Table 1) and Table 2


# Two tasks x two questions. Runs (correct per q1 q2):
#   question_only f1  t1: find0 1 1 (1.0)  find1 1 0 (0.5; q2 unanswered)   t2: find0 0 1, find1 0 1
#     -> t1 acc .75 perfect .5; t2 acc .5 perfect 0; all (1+.5+.5+.5)/4 = .625, perfect .25
#   spec_only f1      t1: 1 1           t2: 1 1      -> acc 1, perfect 1; delta t1 +25 t2 +50 all +37.5
#   formal b1 t1 (pass, G G):    find0 1 1, find1 1 1          -> 1, 1
#   formal b1 t2 (pass, G N):    find0 1 0 -> Q+={q1}: 1;  find1 0 1 -> 0
#   formal b2 t1 (FAILED, G G):  find0 1 0 -> .5;   find1 1 1 -> 1
#   formal b2 t2 (pass, N A):    Q+ empty: 2 runs, no accuracy
#   compile_pass  t1: runs 1,1 -> acc 1 perfect 1, builds 1 finds 2, delta (1-.75)*100 = 25
#                 t2: runs 1,0 (+2 unscored) -> acc .5 perfect .5, builds 2 finds 4, delta 0
#                 all: 1,1,1,0 -> .75, perfect .75, builds 3 finds 6, delta (.75-.625)*100 = 12.5
#   compile_failed t1: .5, 1 -> .75, perfect .5, builds 1 finds 2, delta 0;  all: same, delta 12.5
#   artifact_present t1: 1,1,.5,1 -> .875 perfect .75 builds 2 finds 4 delta 12.5
#                    t2: = compile_pass t2;  all: 1,1,1,0,.5,1 -> .75 perfect 4/6, 4 builds, 8 finds
def _calibration_rows() -> pl.DataFrame:
    runs = [
        # slice, task, builder, compile_pass, find_trial, answers q1 q2, labels q1 q2
        ("question_only", "t1", "", None, 0, ("A", "A"), (U, U)),
        ("question_only", "t1", "", None, 1, ("A", None), (U, U)),
        ("question_only", "t2", "", None, 0, ("B", "A"), (U, U)),
        ("question_only", "t2", "", None, 1, ("B", "A"), (U, U)),
        ("spec_only", "t1", "", None, 0, ("A", "A"), (U, U)),
        ("spec_only", "t2", "", None, 0, ("A", "A"), (U, U)),
        ("formal", "t1", "b1", True, 0, ("A", "A"), (G, G)),
        ("formal", "t1", "b1", True, 1, ("A", "A"), (G, G)),
        ("formal", "t2", "b1", True, 0, ("A", "B"), (G, N)),
        ("formal", "t2", "b1", True, 1, ("B", "A"), (G, N)),
        ("formal", "t1", "b2", False, 0, ("A", "C"), (G, G)),
        ("formal", "t1", "b2", False, 1, ("A", "A"), (G, G)),
        ("formal", "t2", "b2", True, 0, ("A", "A"), (N, A)),
        ("formal", "t2", "b2", True, 1, ("A", "A"), (N, A)),
    ]
    data: dict[str, list] = {
        k: []
        for k in (
            "slice",
            "task",
            "builder",
            "build_trial",
            "compile_pass",
            "find_trial",
            "question_id",
            "answer",
            "label",
        )
    }
    for sl, task, builder, passed, trial, answers, labels in runs:
        for q, answer, label in zip(("q1", "q2"), answers, labels, strict=True):
            data["slice"].append(sl)
            data["task"].append(task)
            data["builder"].append(builder)
            data["build_trial"].append(-1 if builder == "" else 0)
            data["compile_pass"].append(passed)
            data["find_trial"].append(trial)
            data["question_id"].append(q)
            data["answer"].append(answer)
            data["label"].append(label)
    return rows(data)


def test_calibration_table1() -> None:
    out = calibration(_calibration_rows())
    assert out.columns == [
        "slice",
        "task",
        "builds",
        "finds",
        "accuracy",
        "perfect",
        "delta_vs_question_only",
    ]
    expected = [
        ("question_only", "t1", None, 2, 0.75, 0.5, None),
        ("question_only", "t2", None, 2, 0.5, 0.0, None),
        ("question_only", "all", None, 4, 0.625, 0.25, None),
        ("spec_only", "t1", None, 1, 1.0, 1.0, 25.0),
        ("spec_only", "t2", None, 1, 1.0, 1.0, 50.0),
        ("spec_only", "all", None, 2, 1.0, 1.0, 37.5),
        ("artifact_present", "t1", 2, 4, 0.875, 0.75, 12.5),
        ("artifact_present", "t2", 2, 4, 0.5, 0.5, 0.0),
        ("artifact_present", "all", 4, 8, 0.75, 4 / 6, 12.5),
        ("compile_pass", "t1", 1, 2, 1.0, 1.0, 25.0),
        ("compile_pass", "t2", 2, 4, 0.5, 0.5, 0.0),
        ("compile_pass", "all", 3, 6, 0.75, 0.75, 12.5),
        ("compile_failed", "t1", 1, 2, 0.75, 0.5, 0.0),
        ("compile_failed", "all", 1, 2, 0.75, 0.5, 12.5),
    ]
    assert out.rows() == [
        (s, t, b, f, pytest.approx(a), pytest.approx(p), None if d is None else pytest.approx(d))
        for s, t, b, f, a, p, d in expected
    ]


# Table 2 on the same rows, agreement = all trials correct (paper default):
#   formal (compile-pass, scored groups): b1 t1 q1 [1,1] agree, q2 [1,1] agree;
#     b1 t2 q1 [1,0] no (q2 is non-gold: not scored); b2 t2 nothing scored; b2 t1 compile-failed.
#     t1: rows 4, agreement 1, reliable 2/2 = 1;  t2: rows 2, agreement 0, reliable 0/1
#     all: rows 6, agreement 2/3, reliable 2/3
#   question_only: t1 q1 [1,1] yes, q2 [1, unanswered] no -> .5, reliable .5
#                  t2 q1 [0,0] no, q2 [1,1] yes -> .5, reliable .5;  all rows 8, .5, .5
#   spec_only: one trial each, all correct -> 1, 1; rows 2 per task, 4 overall
def test_repeatability_table2_all_correct() -> None:
    out = repeatability(_calibration_rows())
    assert out.columns == ["slice", "task", "answer_rows", "agreement", "reliable_questions"]
    expected = [
        ("formal", "t1", 4, 1.0, 1.0),
        ("formal", "t2", 2, 0.0, 0.0),
        ("formal", "all", 6, 2 / 3, 2 / 3),
        ("spec_only", "t1", 2, 1.0, 1.0),
        ("spec_only", "t2", 2, 1.0, 1.0),
        ("spec_only", "all", 4, 1.0, 1.0),
        ("question_only", "t1", 4, 0.5, 0.5),
        ("question_only", "t2", 4, 0.5, 0.5),
        ("question_only", "all", 8, 0.5, 0.5),
    ]
    assert out.rows() == [
        (s, t, n, pytest.approx(a), pytest.approx(r)) for s, t, n, a, r in expected
    ]


# Same answer mode: question_only t2 q1 answered "B" twice -> agrees (wrong but consistent);
#   t1 q2 ["A", unanswered] -> an unanswered trial breaks agreement.
#   question_only t1 .5 / .5, t2 1 / 1, all .75 / .75. Formal b1 t2 q1 answers A,B -> still no.
def test_repeatability_same_answer_and_unanswered() -> None:
    out = repeatability(_calibration_rows(), agreement="same_answer")
    qonly = out.filter(pl.col("slice") == "question_only")
    assert qonly.rows() == [
        ("question_only", "t1", 4, pytest.approx(0.5), pytest.approx(0.5)),
        ("question_only", "t2", 4, pytest.approx(1.0), pytest.approx(1.0)),
        ("question_only", "all", 8, pytest.approx(0.75), pytest.approx(0.75)),
    ]
    formal = out.filter(pl.col("slice") == "formal")
    assert col(formal, "agreement") == approx_list([1.0, 0.0, 2 / 3])
    with pytest.raises(ValueError):
        repeatability(_calibration_rows(), agreement="majority")


# Reliable threshold: one question-only question, 10 finders x 2 trials; finder f9 misses once.
#   agreement = 9/10 = 0.9 exactly -> reliable at the default 0.9 threshold, not at 1.0 (strict).
def test_reliable_question_threshold() -> None:
    finders = [f"f{i}" for i in range(10)]
    data = rows(
        {
            "slice": ["question_only"] * 20,
            "finder": [f for f in finders for _ in range(2)],
            "find_trial": [0, 1] * 10,
            "correct": [True] * 19 + [False],
        }
    )
    default = repeatability(data)
    assert col(default, "agreement") == approx_list([0.9, 0.9])
    assert col(default, "reliable_questions") == [1.0, 1.0]
    strict = repeatability(data, reliable_threshold=1.0)
    assert col(strict, "reliable_questions") == [0.0, 0.0]


# ------------------------------------------------- effort (Eqs. 2-4), gate (Eqs. 5-6), AELS (Eq. 7)

# Panel "high": builders b1 b2 b3 b5, finders f1 f2, tasks t1 t2 (|F x T| = 4).
# Panel "low": builder b4 alone, finder f3 alone, task t1 (single builder, single finder).
# Every run has two questions (all implemented_gold); bytes = (retrieval, tool-call) per run.
#   cell          runs: correct q1 q2 (bytes)                     g     total c    status
#   b1 f1 t1      find0 11 (100,20)  find1 11 (150,30)            1     150        ok  r = 1 (tie)
#   b2 f1 t1      find0 11 (100,50)  find1 10 (5,5)               .75   150        ok  r = 1 (tie)
#   b3 f1 t1      find0 11 (300,0)                                1     300        ok  r = 2
#   b5 f1 t1      find0 01 (100,0)                                .5    -          no_all_correct
#   b1 f2 t1      find0 01 (100,0)                                .5    -          no_all_correct
#   b2 f2 t1      find0 11 (200,200)                              1     400        ok  r = 4
#   b3 f2 t1      find0 11 (100,0)                                1     100        ok  r = 1
#   b1 f1/f2 t2   find0 11 (50,0) on a compile-FAILED artifact    -     -          no_runs
#   b2 f1 t2      find0 11 (0,0)                                  1     0          zero_cost
#   b3 f1 t2      find0 11 (200,0)                                1     200        ok  r = 1 (min of
#                                                                                  positive costs)
#   b2 f2 t2      (no run at all: empty cell)                     -     -          no_runs
#   b3 f2 t2      find0 11 (60,40)                                1     100        ok  r = 1
#   b5 others     (no run)                                                         no_runs
#   b4 f3 t1      find0 11 (500,0)  [panel low]                   1     500        ok  r = 1
# R_b (total bytes): b1 = 1 (1 cell); b2 = exp((log 1 + log 4)/2) = 2 (2 cells, 1 zero-cost);
#   b3 = (2*1*1*1)^(1/4) = 2^0.25 (4 cells); b4 = 1; b5 = null (0 cells).
EFFORT_RUNS = [
    # panel, builder, finder, task, compile_pass, find_trial, (q1, q2), retrieval, tool_call
    ("high", "b1", "f1", "t1", True, 0, (1, 1), 100, 20),
    ("high", "b1", "f1", "t1", True, 1, (1, 1), 150, 30),
    ("high", "b2", "f1", "t1", True, 0, (1, 1), 100, 50),
    ("high", "b2", "f1", "t1", True, 1, (1, 0), 5, 5),
    ("high", "b3", "f1", "t1", True, 0, (1, 1), 300, 0),
    ("high", "b5", "f1", "t1", True, 0, (0, 1), 100, 0),
    ("high", "b1", "f2", "t1", True, 0, (0, 1), 100, 0),
    ("high", "b2", "f2", "t1", True, 0, (1, 1), 200, 200),
    ("high", "b3", "f2", "t1", True, 0, (1, 1), 100, 0),
    ("high", "b1", "f1", "t2", False, 0, (1, 1), 50, 0),
    ("high", "b1", "f2", "t2", False, 0, (1, 1), 50, 0),
    ("high", "b2", "f1", "t2", True, 0, (1, 1), 0, 0),
    ("high", "b3", "f1", "t2", True, 0, (1, 1), 200, 0),
    ("high", "b3", "f2", "t2", True, 0, (1, 1), 60, 40),
    ("low", "b4", "f3", "t1", True, 0, (1, 1), 500, 0),
]


def _effort_rows() -> pl.DataFrame:
    names = ("effort_panel", "builder", "finder", "task", "compile_pass", "find_trial")
    data: dict[str, list] = {
        k: [] for k in (*names, "question_id", "correct", "novel_retrieval_bytes")
    }
    data["novel_tool_call_bytes"] = []
    for *keys, correct, retrieval, tool_call in EFFORT_RUNS:
        for q, c in zip(("q1", "q2"), correct, strict=True):
            for name, value in zip(names, keys, strict=True):
                data[name].append(value)
            data["question_id"].append(q)
            data["correct"].append(bool(c))
            data["novel_retrieval_bytes"].append(retrieval)
            data["novel_tool_call_bytes"].append(tool_call)
    # A question-only control run by a finder (f9) and on a task (t3) that no formal row has:
    # controls never enter the panel grid, the gate, the effort cells or AELS.
    control = rows(
        {
            "slice": ["question_only"] * 2,
            "finder": ["f9"] * 2,
            "task": ["t3"] * 2,
            "question_id": ["q1", "q2"],
            "correct": [True, True],
        }
    )
    return pl.concat([rows(data), control])


def test_cell_costs_eq2_eq3_statuses_and_ties() -> None:
    out = cell_costs(_effort_rows())
    assert out.columns == [
        "effort_panel",
        "builder",
        "finder",
        "task",
        "metric",
        "runs",
        "all_correct_runs",
        "cost",
        "ratio",
        "status",
    ]
    # full grid: high 4 builders x 2 finders x 2 tasks + low 1 cell
    assert out.height == 17
    got = {(p, b, f, t): (n, k, c, r, s) for p, b, f, t, _, n, k, c, r, s in out.rows()}
    assert got[("high", "b1", "f1", "t1")] == (2, 2, pytest.approx(150.0), 1.0, "ok")
    assert got[("high", "b2", "f1", "t1")] == (2, 1, pytest.approx(150.0), 1.0, "ok")  # tie
    assert got[("high", "b3", "f1", "t1")] == (1, 1, pytest.approx(300.0), pytest.approx(2.0), "ok")
    assert got[("high", "b5", "f1", "t1")] == (1, 0, None, None, "no_all_correct")
    assert got[("high", "b1", "f2", "t1")] == (1, 0, None, None, "no_all_correct")
    assert got[("high", "b2", "f2", "t1")] == (1, 1, pytest.approx(400.0), pytest.approx(4.0), "ok")
    assert got[("high", "b3", "f2", "t1")] == (1, 1, pytest.approx(100.0), 1.0, "ok")
    assert got[("high", "b1", "f1", "t2")] == (0, 0, None, None, "no_runs")  # compile-failed
    assert got[("high", "b2", "f1", "t2")] == (1, 1, 0.0, None, "zero_cost")
    assert got[("high", "b3", "f1", "t2")] == (1, 1, pytest.approx(200.0), 1.0, "ok")
    assert got[("high", "b2", "f2", "t2")] == (0, 0, None, None, "no_runs")  # empty cell
    assert got[("low", "b4", "f3", "t1")] == (1, 1, pytest.approx(500.0), 1.0, "ok")
    with pytest.raises(ValueError):
        cell_costs(_effort_rows(), metric="input_tokens")


def test_rb_effort_eq4_total_bytes() -> None:
    out = rb_effort(_effort_rows())
    assert out.columns == [
        "effort_panel",
        "builder",
        "metric",
        "R_b",
        "cells",
        "total_cells",
        "missing_cells",
        "zero_cost_cells",
    ]
    assert out.rows() == [
        ("high", "b1", "total_bytes", pytest.approx(1.0), 1, 4, 3, 0),
        ("high", "b2", "total_bytes", pytest.approx(2.0), 2, 4, 1, 1),
        ("high", "b3", "total_bytes", pytest.approx(2**0.25), 4, 4, 0, 0),
        ("high", "b5", "total_bytes", None, 0, 4, 4, 0),
        ("low", "b4", "total_bytes", 1.0, 1, 1, 0, 0),  # single builder, single finder: exactly 1
    ]


# novel_retrieval_bytes: f1 t1 b1 (100+150)/2 = 125, b2 100 (its only all-correct run), b3 300
#   -> r 1.25, 1, 3;  f2 t1 b2 200, b3 100 -> 2, 1;  f1 t2 b2 0 (zero), b3 200 -> 1; f2 t2 b3 60 -> 1
#   R: b1 1.25; b2 sqrt(1 * 2); b3 (3 * 1 * 1 * 1)^(1/4)
# novel_tool_call_bytes: f1 t1 b1 25, b2 50, b3 0 (zero) -> 1, 2;  f2 t1 b2 200, b3 0 -> b2 1;
#   f1 t2 b2 0, b3 0 (both zero);  f2 t2 b3 40 -> 1
#   R: b1 1 (1 cell); b2 sqrt(2 * 1) (2 cells, 1 zero); b3 1 (1 cell, 3 zero);
#   low b4 0 tool-call bytes -> zero cost, no cell, R null
def test_rb_effort_metric_variants() -> None:
    retrieval = rb_effort(_effort_rows(), metric="novel_retrieval_bytes")
    assert col(retrieval, "R_b") == approx_list([1.25, math.sqrt(2), 3**0.25, None, 1.0])
    assert col(retrieval, "cells") == [1, 2, 4, 0, 1]
    assert col(retrieval, "zero_cost_cells") == [0, 1, 0, 0, 0]
    tool = rb_effort(_effort_rows(), metric="novel_tool_call_bytes")
    assert col(tool, "R_b") == approx_list([1.0, math.sqrt(2), 1.0, None, None])
    assert col(tool, "cells") == [1, 2, 1, 0, 0]
    assert col(tool, "zero_cost_cells") == [0, 1, 3, 0, 1]
    assert set(col(tool, "metric")) == {"novel_tool_call_bytes"}


# Eq. 5-6 on the effort rows (compile-pass runs only):
#   b1 t1: g(f1) = 1, g(f2) = .5 -> G = .75 (2/2);  b1 t2: compile-failed only -> null (0/2)
#   b2 t1: g(f1) = (1 + .5)/2 = .75, g(f2) = 1 -> .875 (2/2);  b2 t2: g(f1) = 1 -> 1 (1/2)
#   b3: every g = 1 -> 1 (2/2) on both tasks;  b5 t1: .5 (1/2), t2 null (0/2)
#   low b4 t1: 1 (1/1)
def test_recovery_gate_eq5_eq6() -> None:
    out = recovery_gate(_effort_rows())
    assert out.columns == [
        "effort_panel",
        "builder",
        "task",
        "G_task",
        "contributing_cells",
        "total_cells",
    ]
    assert out.rows() == [
        ("high", "b1", "t1", pytest.approx(0.75), 2, 2),
        ("high", "b1", "t2", None, 0, 2),
        ("high", "b2", "t1", pytest.approx(0.875), 2, 2),
        ("high", "b2", "t2", pytest.approx(1.0), 1, 2),
        ("high", "b3", "t1", pytest.approx(1.0), 2, 2),
        ("high", "b3", "t2", pytest.approx(1.0), 2, 2),
        ("high", "b5", "t1", pytest.approx(0.5), 1, 2),
        ("high", "b5", "t2", None, 0, 2),
        ("low", "b4", "t1", pytest.approx(1.0), 1, 1),
    ]


# Eq. 7 (eta = 0.1), agreement = all trials correct over (finder, artifact, question) groups:
#   b1: A = mean(1, .5) = .75; groups f1t1q1 [1,1] yes, f1t1q2 [1,1] yes, f2t1q1 [0] no,
#       f2t1q2 [1] yes -> S = 3/4; C = 1/4; R = 1 -> AELS = .75 * .75 * .25 = 0.140625
#   b2: A = mean(.75, 1, 1) = 11/12; groups f1t1q1 [1,1] yes, f1t1q2 [1,0] no, f2t1 q1 q2 yes,
#       f1t2 q1 q2 yes -> S = 5/6; C = 2/4; R = 2 -> AELS = 11/12 * 5/6 * .5 * 2^-0.1
#   b3: A = 1, S = 1, C = 1, R = 2^0.25 -> AELS = 2^-0.025
#   b5: A = .5, S = 1/2 (q1 [0] no, q2 [1] yes), C = 0 -> AELS = 0 (R undefined)
#   b4 (low): 1, 1, 1, 1 -> 1
def test_aels_eq7() -> None:
    out = aels(_effort_rows())
    assert out.columns == ["effort_panel", "builder", "A", "S", "C", "R_b", "AELS"]
    assert out.rows() == [
        (
            "high",
            "b1",
            pytest.approx(0.75),
            pytest.approx(0.75),
            0.25,
            pytest.approx(1.0),
            pytest.approx(0.140625),
        ),
        (
            "high",
            "b2",
            pytest.approx(11 / 12),
            pytest.approx(5 / 6),
            0.5,
            pytest.approx(2.0),
            pytest.approx(11 / 12 * 5 / 6 * 0.5 * 2**-0.1),
        ),
        ("high", "b3", 1.0, 1.0, 1.0, pytest.approx(2**0.25), pytest.approx(2**-0.025)),
        ("high", "b5", pytest.approx(0.5), pytest.approx(0.5), 0.0, None, 0.0),
        ("low", "b4", 1.0, 1.0, 1.0, 1.0, 1.0),
    ]
    # eta = 0 drops the effort discount: b2 -> 11/12 * 5/6 * .5
    assert aels(_effort_rows(), eta=0.0).row(1)[-1] == pytest.approx(11 / 12 * 5 / 6 * 0.5)


# ----------------------------------------------------------- coverage (Table 11) and D_b (Eq. 8)


# b1: artifact (t1, build 0, compile pass) labels G G N, artifact (t1, build 1, compile FAILED)
#     labels G A G; finders f1 (panel high) and f2 (panel low), one trial each:
#       build 0: f1 1 0 1, f2 1 1 0   -> gold rows q1 q2: 1 0 1 1 -> 3 of 4
#       build 1: f1 1 1 1, f2 0 0 1   -> gold rows q1 q3: 1 1 0 1 -> 3 of 4
#     pairs 6, implemented_gold 4, non_gold 1, ambiguous 1 -> coverage 4/6;
#     recovery 6/8 = .75; D_b = .75 * 4/6 = .5
# b2: unlabeled artifact (3 pairs) -> coverage null, D_b null, unlabeled 3
# b3: labels G U U (partial audit): 1 labelled pair, gold -> coverage 1; f1 answers q1 wrong ->
#     recovery 0 -> D_b 0
# A question_only control row is ignored.
def test_coverage_table11_eq8() -> None:
    q3 = ["q1", "q2", "q3"]
    data = rows(
        {
            "slice": ["formal"] * 18 + ["question_only"],
            "builder": ["b1"] * 12 + ["b2"] * 3 + ["b3"] * 3 + [""],
            "build_trial": [0] * 6 + [1] * 6 + [0] * 6 + [-1],
            "compile_pass": [True] * 6 + [False] * 6 + [True] * 6 + [None],
            "finder": (["f1"] * 3 + ["f2"] * 3) * 2 + ["f1"] * 7,
            "effort_panel": (["high"] * 3 + ["low"] * 3) * 2 + ["high"] * 7,
            "question_id": q3 * 6 + ["q1"],
            "correct": [True, False, True, True, True, False]
            + [True, True, True, False, False, True]
            + [True, True, True]
            + [False, True, True]
            + [True],
            "label": [G, G, N] * 2 + [G, A, G] * 2 + [U] * 3 + [G, U, U] + [U],
        }
    )
    out = coverage(data)
    assert out.columns == [
        "builder",
        "pairs",
        "implemented_gold",
        "coverage",
        "non_gold",
        "ambiguous",
        "D_b",
        "recovery",
        "unlabeled",
    ]
    assert out.rows() == [
        ("b1", 6, 4, pytest.approx(4 / 6), 1, 1, pytest.approx(0.5), pytest.approx(0.75), 0),
        ("b2", 3, 0, None, 0, 0, None, None, 3),
        ("b3", 3, 1, 1.0, 0, 0, 0.0, 0.0, 2),
    ]


# ------------------------------------------------------------------ analyze and categorical input


def _all_tables(data: pl.DataFrame) -> dict[str, pl.DataFrame]:
    metrics = ("total_bytes", "novel_retrieval_bytes", "novel_tool_call_bytes")
    costs = [cell_costs(data, m) for m in metrics]
    rbs = [rb_effort(data, m) for m in metrics]
    return {
        "run_accuracy": run_accuracy(data),
        "calibration": calibration(data),
        "repeatability": repeatability(data),
        "recovery_gate": recovery_gate(data),
        "cell_costs": pl.concat(costs).sort("metric", maintain_order=True),
        "rb_effort": pl.concat(rbs).sort("metric", maintain_order=True),
        "aels": aels(data),
        "coverage": coverage(data),
    }


def _synthetic(seed: int) -> pl.DataFrame:
    """~26k rows: 2 panels x 3 builders x 2 build trials x 3 finders x 3 find trials x
    8 tasks x 10 questions, with pseudo-random correctness, labels, compile results and bytes."""
    grid = (
        pl.DataFrame({"effort_panel": ["high", "low"]})
        .join(pl.DataFrame({"b": [0, 1, 2]}), how="cross")
        .join(pl.DataFrame({"build_trial": [0, 1]}, schema={"build_trial": pl.Int32}), how="cross")
        .join(pl.DataFrame({"f": [0, 1, 2]}), how="cross")
        .join(pl.DataFrame({"find_trial": [0, 1, 2]}, schema={"find_trial": pl.Int32}), how="cross")
        .join(pl.DataFrame({"task": [f"t{i}" for i in range(8)]}), how="cross")
        .join(pl.DataFrame({"question_id": [f"q{i}" for i in range(10)]}), how="cross")
    )
    artifact = pl.struct("effort_panel", "b", "build_trial", "task")
    run = pl.struct("effort_panel", "b", "build_trial", "f", "find_trial", "task")
    pair = pl.struct("effort_panel", "b", "build_trial", "task", "question_id")
    draw = pl.struct(pl.all()).hash(seed) % 1000
    df = grid.with_columns(
        slice=pl.lit("formal"),
        builder=pl.format("b{}_{}", "b", "effort_panel"),
        builder_family=pl.lit("fam"),
        finder=pl.format("f{}_{}", "f", "effort_panel"),
        finder_family=pl.lit("fam"),
        gold=pl.lit("A"),
        correct=draw < 930,
        compile_pass=artifact.hash(seed) % 10 < 8,
        label=pl.when(pair.hash(seed) % 20 == 0)
        .then(pl.lit(N))
        .when(pair.hash(seed) % 20 == 1)
        .then(pl.lit(A))
        .otherwise(pl.lit(G)),
        label_source=pl.lit("consensus_prelabel"),
        novel_retrieval_bytes=(run.hash(seed) % 5000).cast(pl.Int64),
        novel_tool_call_bytes=(run.hash(seed + 1) % 300).cast(pl.Int64),
        input_tokens=pl.lit(0, pl.Int64),
        output_tokens=pl.lit(0, pl.Int64),
    ).with_columns(answer=pl.when("correct").then(pl.lit("A")).otherwise(pl.lit("C")))
    return conform(df.select([c for c in COLUMNS if c in df.columns]))  # optional ones: null


def test_results_do_not_depend_on_row_order() -> None:
    # float means are order-independent (core.fmean): a shuffled table gives identical tables,
    # bit for bit, and so do repeated calls
    data = pl.concat([_synthetic(7), _calibration_rows(), _effort_rows()])
    want = analyze(data)
    # 3 metrics x (high: 3 synthetic + b1 b2 b3 b5; low: 3 synthetic + b4) builders
    assert want["rb_effort"].height == 3 * (7 + 4)
    for seed in (1, 2):
        got = analyze(data.sample(fraction=1.0, shuffle=True, seed=seed))
        for name in want:
            assert got[name].equals(want[name]), name
    assert recovery_gate(data).equals(want["recovery_gate"])
    assert aels(data.reverse()).equals(want["aels"])


@pytest.mark.parametrize("make", [_effort_rows, _calibration_rows, lambda: ACC_ROWS])
def test_analyze_matches_public_functions(make) -> None:
    data = make()
    tables = analyze(data)
    expected = _all_tables(data)
    assert tables.keys() == expected.keys()
    for name, table in tables.items():
        assert table.equals(expected[name]), name


def test_categorical_and_lazy_input_give_identical_tables() -> None:
    data = pl.concat([_effort_rows(), _calibration_rows()])
    strings = [c for c, dtype in SCHEMA.items() if dtype == pl.Utf8]
    categorical = data.with_columns(pl.col(strings).cast(pl.Categorical)).lazy()
    want = analyze(data)
    got = analyze(categorical)
    for name in want:
        assert got[name].equals(want[name]), name
    assert run_accuracy(categorical).equals(want["run_accuracy"])


def test_empty_rows_give_empty_tables() -> None:
    for name, table in analyze(empty_rows()).items():
        assert table.height == 0, name
