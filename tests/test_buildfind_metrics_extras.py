"""Build-and-find analysis extras against hand-computed values (paper 4.6-4.8, App. E/I/J/K/L/M).

Every table is written literally below; the helpers only fill columns a test does not care
about. Expected numbers are derived by hand in the comments next to each table.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.affinity import (
    affinity,
    affinity_family,
    affinity_matrix,
    affinity_matrix_family,
)
from metaeval.protocols.buildfind.analysis.effort_accuracy import effort_accuracy
from metaeval.protocols.buildfind.analysis.evidence_audit import (
    evidence_audit_rule,
    evidence_audit_sample,
    evidence_audit_summary,
)
from metaeval.protocols.buildfind.analysis.finder_calibration import finder_calibration
from metaeval.protocols.buildfind.analysis.ranking import kendall_tau
from metaeval.protocols.buildfind.analysis.robustness import robustness_pivots
from metaeval.protocols.buildfind.analysis.subsets import (
    implementation_signal_subset,
    low_prior_subset,
    question_agreement,
    subset_views,
)
from metaeval.protocols.buildfind.analysis.suite import analyze_extras
from metaeval.protocols.buildfind.analysis.tokens import token_usage
from metaeval.protocols.buildfind.rows.table import conform, empty_rows

# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


def table(data: dict[str, list]) -> pl.DataFrame:
    """A conformed rows table from column lists; fills every column not given."""
    n = len(next(iter(data.values())))
    cols = {k: list(v) for k, v in data.items()}
    slices = cols.setdefault("slice", ["formal"] * n)
    control = [s != "formal" for s in slices]
    cols.setdefault("task", ["t1"] * n)
    cols.setdefault("builder", ["" if c else "b1" for c in control])
    cols.setdefault("builder_family", ["" if c else "famB" for c in control])
    cols.setdefault("finder", ["f1"] * n)
    cols.setdefault("finder_family", ["famF"] * n)
    cols.setdefault("effort_panel", ["high"] * n)
    cols.setdefault("build_trial", [-1 if c else 0 for c in control])
    cols.setdefault("find_trial", [0] * n)
    cols.setdefault("question_id", ["q1"] * n)
    cols.setdefault("gold", ["A"] * n)
    cols.setdefault("correct", [True] * n)
    cols.setdefault(
        "answer", [g if ok else "B" for g, ok in zip(cols["gold"], cols["correct"], strict=True)]
    )
    cols.setdefault("compile_pass", [None if c else True for c in control])
    cols.setdefault("label", ["unlabeled" if c else "implemented_gold" for c in control])
    cols.setdefault("label_source", ["none" if c else "consensus_prelabel" for c in control])
    for c in ("novel_retrieval_bytes", "novel_tool_call_bytes", "input_tokens", "output_tokens"):
        cols.setdefault(c, [0] * n)
    return conform(pl.DataFrame(cols, strict=False))


def expand(runs: list[dict]) -> pl.DataFrame:
    """One literal dict per find run -> question rows.

    ``answers`` maps question_id -> True (correct) / False (wrong) / None (unanswered);
    ``labels`` optionally maps question_id -> label; ``bytes`` is split as total-1 retrieval
    bytes + 1 tool-call byte; every other key is a run-level column.
    """
    tables = []
    for run in runs:
        run = dict(run)
        answers = run.pop("answers")
        labels = run.pop("labels", None)
        total = run.pop("bytes", None)
        if total is not None:
            run["novel_retrieval_bytes"] = total - 1
            run["novel_tool_call_bytes"] = 1
        data: dict[str, list] = {}
        for qid, outcome in answers.items():
            row = dict(run, question_id=qid, correct=bool(outcome))
            row["answer"] = None if outcome is None else ("A" if outcome else "C")
            if labels is not None:
                row["label"] = labels.get(qid, "implemented_gold")
            for k, v in row.items():
                data.setdefault(k, []).append(v)
        tables.append(table(data))
    return pl.concat(tables)


def qonly(finder: str, answers: dict, **kw) -> dict:
    return dict(slice="question_only", finder=finder, answers=answers, **kw)


def approx(value: float) -> object:
    return pytest.approx(value, abs=1e-12)


# ------------------------------------------------------------------------------------------
# 1. Kendall tau-b
# ------------------------------------------------------------------------------------------


def tau_table() -> pl.DataFrame:
    runs = []
    # finder fA, panel high, task t1. Cell costs (mean bytes over all-correct runs):
    #   b1: trials 0 (6 bytes, correct) and 1 (14, correct) -> 10; trial 2 is wrong (1000) and
    #       is excluded; b2: 20; b3: 20; b4: 40; b5: 5.
    for trial, total, ok in ((0, 6, True), (1, 14, True), (2, 1000, False)):
        runs.append(
            dict(finder="fA", builder="b1", find_trial=trial, bytes=total, answers={"q1": ok})
        )
    for b, total in (("b2", 20), ("b3", 20), ("b4", 40), ("b5", 5)):
        runs.append(dict(finder="fA", builder=b, bytes=total, answers={"q1": True}))
    # finder fB: b1 5, b2 15, b3 25, b4 25; b5's only run is wrong -> no all-correct cell.
    for b, total in (("b1", 5), ("b2", 15), ("b3", 25), ("b4", 25)):
        runs.append(dict(finder="fB", builder=b, bytes=total, answers={"q1": True}))
    runs.append(dict(finder="fB", builder="b5", bytes=3, answers={"q1": False}))
    # finder fC: only b1 is all-correct (b2's run has one wrong answer of two).
    runs.append(dict(finder="fC", builder="b1", bytes=9, answers={"q1": True}))
    runs.append(dict(finder="fC", builder="b2", bytes=9, answers={"q1": True, "q2": False}))
    # low panel: a single finder fL -> no pair inside the low panel, never paired with high.
    runs.append(dict(finder="fL", builder="b1", effort_panel="low", bytes=9, answers={"q1": True}))
    runs.append(dict(finder="fL", builder="b2", effort_panel="low", bytes=8, answers={"q1": True}))
    return expand(runs)


def test_kendall_tau_b_with_ties_and_missing_cells():
    out = kendall_tau(tau_table())
    assert out.columns == ["effort_panel", "task", "finder_a", "finder_b", "tau", "n"]
    assert out.select("finder_a", "finder_b").rows() == [("fA", "fB"), ("fA", "fC"), ("fB", "fC")]
    # fA vs fB over b1..b4 (b5 has no fB cell): x = (10, 20, 20, 40), y = (5, 15, 25, 25)
    #   (b1,b2) +1  (b1,b3) +1  (b1,b4) +1  (b2,b3) x tied -> 0  (b2,b4) +1  (b3,b4) y tied -> 0
    #   S = 4, n0 = 6, n1 = 1, n2 = 1 -> tau_b = 4 / sqrt(5 * 5) = 0.8 (tau_a would be 4/6)
    ab = out.row(0, named=True)
    assert (ab["effort_panel"], ab["task"], ab["n"]) == ("high", "t1", 4)
    assert ab["tau"] == approx(0.8)
    # fC has a cell only for b1 -> n = 1 -> tau null
    assert out.row(1, named=True)["n"] == 1 and out.row(1, named=True)["tau"] is None
    assert out.row(2, named=True)["n"] == 1 and out.row(2, named=True)["tau"] is None


def test_kendall_tau_single_finder_is_empty_and_reversal_is_minus_one():
    single = expand(
        [
            dict(finder="f1", builder="b1", bytes=10, answers={"q1": True}),
            dict(finder="f1", builder="b2", bytes=20, answers={"q1": True}),
        ]
    )
    out = kendall_tau(single)
    assert out.height == 0
    assert out.columns == ["effort_panel", "task", "finder_a", "finder_b", "tau", "n"]
    # reversed orderings over 3 builders: every pair discordant -> tau = -3/3 = -1
    rev = expand(
        [
            dict(finder=f, builder=b, bytes=v, answers={"q1": True})
            for f, costs in (("f1", (1, 2, 3)), ("f2", (30, 20, 10)))
            for b, v in zip(("b1", "b2", "b3"), costs, strict=True)
        ]
    )
    assert kendall_tau(rev)["tau"].to_list() == [approx(-1.0)]


def test_kendall_tau_all_tied_ordering_is_null():
    # f2 gives both builders 7 bytes: n0 = 1, n2 = 1 -> denominator 0 -> tau null, n = 2
    df = expand(
        [
            dict(finder="f1", builder="b1", bytes=10, answers={"q1": True}),
            dict(finder="f1", builder="b2", bytes=20, answers={"q1": True}),
            dict(finder="f2", builder="b1", bytes=7, answers={"q1": True}),
            dict(finder="f2", builder="b2", bytes=7, answers={"q1": True}),
        ]
    )
    out = kendall_tau(df)
    assert out.select("n", "tau").rows() == [(2, None)]


def test_kendall_tau_skips_compile_failed_artifacts_by_default():
    # b3 failed the compile probe; with it, f1 (1,2,3) vs f2 (3,2,1)... without it (1,2)/(3,2)
    df = expand(
        [
            dict(finder="f1", builder="b1", bytes=1, answers={"q1": True}),
            dict(finder="f1", builder="b2", bytes=2, answers={"q1": True}),
            dict(finder="f1", builder="b3", bytes=3, compile_pass=False, answers={"q1": True}),
            dict(finder="f2", builder="b1", bytes=2, answers={"q1": True}),
            dict(finder="f2", builder="b2", bytes=3, answers={"q1": True}),
            dict(finder="f2", builder="b3", bytes=1, compile_pass=False, answers={"q1": True}),
        ]
    )
    # primary: b1 < b2 for both -> tau 1, n 2
    assert kendall_tau(df).select("tau", "n").rows() == [(approx(1.0), 2)]
    # all artifacts: (b1,b2) +1, (b1,b3) -1, (b2,b3) -1 -> S = -1, tau = -1/3
    assert kendall_tau(df, compile_pass_only=False).select("tau", "n").rows() == [
        (approx(-1 / 3), 3)
    ]


# ------------------------------------------------------------------------------------------
# 2. affinity
# ------------------------------------------------------------------------------------------


def affinity_table() -> pl.DataFrame:
    X, Y = "famX", "famY"
    return expand(
        [
            # (b1,f1): Eq. 1 = 2/2 and 1/2 -> mean 0.75; all-correct share 0.5
            dict(builder="b1", builder_family=X, finder="f1", finder_family=X, find_trial=0,
                 answers={"q1": True, "q2": True}),
            dict(builder="b1", builder_family=X, finder="f1", finder_family=X, find_trial=1,
                 answers={"q1": True, "q2": False}),
            # (b1,f2): 0/2 -> 0
            dict(builder="b1", builder_family=X, finder="f2", finder_family=Y,
                 answers={"q1": False, "q2": None}),
            # b2's artifact implements q2 as non-gold -> scoring set {q1}: (b2,f1) = 1/1
            dict(builder="b2", builder_family=Y, finder="f1", finder_family=X,
                 labels={"q2": "implemented_non_gold"}, answers={"q1": True, "q2": False}),
            dict(builder="b2", builder_family=Y, finder="f2", finder_family=Y,
                 labels={"q2": "implemented_non_gold"}, answers={"q1": True, "q2": True}),
            # (b3,f1) = 1, (b3,f2) = 1/2
            dict(builder="b3", builder_family=X, finder="f1", finder_family=X,
                 answers={"q1": True, "q2": True}),
            dict(builder="b3", builder_family=X, finder="f2", finder_family=Y,
                 answers={"q1": True, "q2": False}),
            # compile-failed b3 artifact (trial 1): excluded by default
            dict(builder="b3", builder_family=X, finder="f1", finder_family=X, build_trial=1,
                 compile_pass=False, answers={"q1": False, "q2": False}),
        ]
    )  # fmt: skip


def test_affinity_residuals_double_centred():
    out = affinity(affinity_table())
    assert out.columns[:4] == ["effort_panel", "builder", "finder", "residual"]
    # s =      f1    f2      builder means: b1 3/8, b2 1, b3 3/4
    #   b1   3/4    0        finder means: f1 11/12, f2 1/2; grand 17/24
    #   b2   1      1
    #   b3   1      1/2
    # residual = s - row - col + grand (in 24ths):
    #   b1f1 18-9-22+17 = 4    b1f2 0-9-12+17 = -4
    #   b2f1 24-24-22+17 = -5  b2f2 24-24-12+17 = 5
    #   b3f1 24-18-22+17 = 1   b3f2 12-18-12+17 = -1
    expected = {
        ("b1", "f1"): 4 / 24,
        ("b1", "f2"): -4 / 24,
        ("b2", "f1"): -5 / 24,
        ("b2", "f2"): 5 / 24,
        ("b3", "f1"): 1 / 24,
        ("b3", "f2"): -1 / 24,
    }
    got = {(r["builder"], r["finder"]): r["residual"] for r in out.iter_rows(named=True)}
    assert got == {k: approx(v) for k, v in expected.items()}
    assert out.filter(builder="b1", finder="f1").select("score", "runs").row(0) == (0.75, 2)


def test_affinity_family_table_and_options():
    fam = affinity_family(affinity_table())
    assert fam.columns == ["effort_panel", "builder_family", "finder_family", "residual", "cells"]
    # X builders = b1, b3; Y builder = b2; f1 is X, f2 is Y
    #   X-X: mean(4/24, 1/24) = 5/48   X-Y: mean(-4/24, -1/24) = -5/48
    #   Y-X: -5/24                     Y-Y: 5/24
    assert fam.rows() == [
        ("high", "famX", "famX", approx(5 / 48), 2),
        ("high", "famX", "famY", approx(-5 / 48), 2),
        ("high", "famY", "famX", approx(-5 / 24), 1),
        ("high", "famY", "famY", approx(5 / 24), 1),
    ]
    # all-correct share: b1f1 1/2, b1f2 0, b2f1 1, b2f2 1, b3f1 1, b3f2 0
    #   row means b1 1/4, b2 1, b3 1/2; col means f1 5/6, f2 1/3; grand 7/12
    #   b1f1 = 1/2 - 1/4 - 5/6 + 7/12 = 0
    ac = affinity(affinity_table(), score="all_correct")
    assert ac.filter(builder="b1", finder="f1")["residual"].item() == approx(0.0)
    # b3f2 = 0 - 1/2 - 1/3 + 7/12 = -1/4
    assert ac.filter(builder="b3", finder="f2")["residual"].item() == approx(-0.25)
    # with the compile-failed artifact: (b3,f1) = mean(1, 0) = 1/2
    every = affinity(affinity_table(), compile_pass_only=False)
    assert every.filter(builder="b3", finder="f1").select("score", "runs").row(0) == (0.5, 2)
    with pytest.raises(ConfigError):
        affinity(affinity_table(), score="bytes")


def two_panel_table() -> pl.DataFrame:
    """Builders and finders paired within effort panels: a block-diagonal matrix whose
    off-diagonal blocks are empty (no 'low' builder is read by a 'high' finder)."""
    runs = []
    # panel high: builders h1, h2 x finders fh1, fh2; Eq. 1 accuracy over 4 questions
    #   s = fh1  fh2
    #   h1  1    3/4
    #   h2  1/2  1/4
    # panel low: builders l1, l2 x finders fl1, fl2
    #   s = fl1  fl2
    #   l1  1/4  1/2
    #   l2  1    1/4
    scores = {
        ("high", "h1", "fh1"): 4, ("high", "h1", "fh2"): 3,
        ("high", "h2", "fh1"): 2, ("high", "h2", "fh2"): 1,
        ("low", "l1", "fl1"): 1, ("low", "l1", "fl2"): 2,
        ("low", "l2", "fl1"): 4, ("low", "l2", "fl2"): 1,
    }  # fmt: skip
    for (panel, builder, finder), n_correct in scores.items():
        answers = {f"q{i}": i < n_correct for i in range(4)}
        runs.append(dict(effort_panel=panel, builder=builder, finder=finder, answers=answers))
    return expand(runs)


def test_affinity_is_panel_local_on_a_block_diagonal_matrix():
    """Hand computation, each panel on its own (Appendix K, "panel-local").

    high: builder means h1 7/8, h2 3/8; finder means fh1 3/4, fh2 1/2; grand 5/8
      h1 fh1 = 1 - 7/8 - 3/4 + 5/8 = 0        h1 fh2 = 3/4 - 7/8 - 1/2 + 5/8 = 0
      h2 fh1 = 1/2 - 3/8 - 3/4 + 5/8 = 0      h2 fh2 = 1/4 - 3/8 - 1/2 + 5/8 = 0
    low: builder means l1 3/8, l2 5/8; finder means fl1 5/8, fl2 3/8; grand 1/2
      l1 fl1 = 1/4 - 3/8 - 5/8 + 1/2 = -1/4   l1 fl2 = 1/2 - 3/8 - 3/8 + 1/2 = 1/4
      l2 fl1 = 1 - 5/8 - 5/8 + 1/2 = 1/4      l2 fl2 = 1/4 - 5/8 - 3/8 + 1/2 = -1/4
    Pooling both panels into one 4 x 4 matrix with one grand mean (9/16 over the 8 observed
    cells) would instead shift every high residual by 9/16 - 5/8 = -1/16 and every low one by
    9/16 - 1/2 = +1/16, so neither panel would sum to zero.
    """
    out = affinity(two_panel_table())
    got = {
        (r["effort_panel"], r["builder"], r["finder"]): r["residual"]
        for r in out.iter_rows(named=True)
    }
    assert got == {
        ("high", "h1", "fh1"): approx(0.0),
        ("high", "h1", "fh2"): approx(0.0),
        ("high", "h2", "fh1"): approx(0.0),
        ("high", "h2", "fh2"): approx(0.0),
        ("low", "l1", "fl1"): approx(-0.25),
        ("low", "l1", "fl2"): approx(0.25),
        ("low", "l2", "fl1"): approx(0.25),
        ("low", "l2", "fl2"): approx(-0.25),
    }
    for panel in ("high", "low"):
        part = out.filter(effort_panel=panel)
        assert part["residual"].sum() == approx(0.0)
        for by in ("builder", "finder"):  # a full panel matrix is double-centred
            sums = part.group_by(by).agg(pl.col("residual").sum())["residual"].to_list()
            assert sums == [approx(0.0)] * 2
    fam = affinity_family(two_panel_table())
    assert fam.select("effort_panel", "residual", "cells").rows() == [
        ("high", approx(0.0), 4),
        ("low", approx(0.0), 4),
    ]


# ------------------------------------------------------------------------------------------
# 3. low-prior and implementation-signal subsets (boundary semantics)
# ------------------------------------------------------------------------------------------


def boundary_table() -> pl.DataFrame:
    runs = []
    # question-only control: finders f0..f9, 3 trials each. Agreement (all 3 trials correct):
    #   qA: f9 always wrong                        -> 9/10 = 0.90 (exactly at the threshold)
    #   qB: f8 always wrong, f9 wrong on trial 2    -> 8/10 = 0.80
    #   qC: all right                              -> 1.00
    #   qD: f9 always wrong                        -> 0.90
    for i in range(10):
        for k in range(3):
            answers = {
                "qA": i != 9,
                "qB": not (i == 8 or (i == 9 and k == 2)),
                "qC": True,
                "qD": i != 9,
            }
            runs.append(qonly(f"f{i}", answers, find_trial=k))
    # formal: finders f0..f9 x artifacts b1, b2 = 20 cells, 3 trials each.
    #   qA: (f9, b2) wrong on trial 0 only   -> 19/20 = 0.95; lift = 5 points exactly
    #   qB: (f8, b2), (f9, b2) wrong         -> 18/20 = 0.90; lift = 10
    #   qC: all right                        -> 1.00; lift 0
    #   qD: (f8, b1), (f9, b1) wrong         -> 0.90; lift 0
    #   qE: all right, but no question-only data -> agreement null, in neither subset
    for i in range(10):
        for b in ("b1", "b2"):
            for k in range(3):
                answers = {
                    "qA": not (i == 9 and b == "b2" and k == 0),
                    "qB": not (i in (8, 9) and b == "b2"),
                    "qC": True,
                    "qD": not (i in (8, 9) and b == "b1"),
                    "qE": True,
                }
                runs.append(dict(finder=f"f{i}", builder=b, find_trial=k, answers=answers))
    # a compile-failed artifact answering everything wrong is ignored
    runs.append(
        dict(
            finder="f0",
            builder="b3",
            compile_pass=False,
            answers=dict.fromkeys(("qA", "qB", "qC", "qD", "qE"), False),
        )
    )
    control = [r for r in runs if r.get("slice") == "question_only"]
    formal = [r for r in runs if r.get("slice") != "question_only"]
    return pl.concat([expand(control), expand(formal)])


def test_question_agreement_thresholds_are_strict_90_and_inclusive_5():
    out = question_agreement(boundary_table())
    got = {r["question_id"]: r for r in out.iter_rows(named=True)}
    assert got["qA"]["question_only_agreement"] == approx(0.9)
    assert got["qA"]["formal_agreement"] == approx(0.95)
    assert got["qA"]["lift_pp"] == approx(5.0)
    assert (got["qA"]["low_prior"], got["qA"]["implementation_signal"]) == (False, True)
    assert got["qB"]["question_only_agreement"] == approx(0.8)
    assert (got["qB"]["low_prior"], got["qB"]["implementation_signal"]) == (True, True)
    assert (got["qC"]["low_prior"], got["qC"]["implementation_signal"]) == (False, False)
    assert (got["qD"]["low_prior"], got["qD"]["implementation_signal"]) == (False, False)
    assert got["qE"]["question_only_cells"] == 0
    assert got["qE"]["question_only_agreement"] is None
    assert (got["qE"]["low_prior"], got["qE"]["implementation_signal"]) == (False, False)
    assert got["qA"]["question_only_cells"] == 10 and got["qA"]["formal_cells"] == 20
    # with the compile-failed artifact every question gets a 21st failing cell:
    #   qA formal = 19/21 = 0.905 < 0.9 + 0.05 -> no longer implementation-signal
    every = question_agreement(boundary_table(), compile_pass_only=False)
    assert every.filter(question_id="qA")["formal_cells"].item() == 21
    assert not every.filter(question_id="qA")["implementation_signal"].item()


def test_subset_tables():
    df = boundary_table()
    low = low_prior_subset(df)
    assert low.select("task", "question_id").rows() == [("t1", "qB")]
    assert low["question_only_agreement"].to_list() == [approx(0.8)]
    sig = implementation_signal_subset(df)
    assert sig.select("task", "question_id").rows() == [("t1", "qA"), ("t1", "qB")]
    assert sig["lift_pp"].to_list() == [approx(5.0), approx(10.0)]


def test_empty_subsets():
    # every finder right everywhere: question-only agreement 1.0, formal 1.0, lift 0
    df = pl.concat(
        [
            expand([qonly("f1", {"q1": True, "q2": True})]),
            expand([dict(finder="f1", answers={"q1": True, "q2": True})]),
        ]
    )
    assert low_prior_subset(df).height == 0
    assert implementation_signal_subset(df).height == 0
    views = subset_views(df)
    assert views["low_prior_accuracy"].filter(task="all")["scored_rows"].to_list() == [0, 0]
    assert (
        views["low_prior_accuracy"]["accuracy"].null_count() == views["low_prior_accuracy"].height
    )
    assert views["low_prior_kendall_tau"].height == 0
    assert views["low_prior_affinity"].height == 0
    # the recovery gate still lists the builder, with no contributing cell
    gate = views["implementation_signal_recovery_gate"]
    assert gate.select("builder", "recovery", "cells", "panel_finders").rows() == [
        ("b1", None, 0, 1)
    ]
    cal = finder_calibration(df)
    assert cal["low_prior_lift_pp"].to_list() == [None]
    assert cal["qonly_lift_pp"].to_list() == [approx(0.0)]


# ------------------------------------------------------------------------------------------
# subset views and finder calibration on one small panel
# ------------------------------------------------------------------------------------------


def small_panel() -> pl.DataFrame:
    F1, F2 = "fam1", "fam2"
    return expand(
        [
            # question-only: q1 agreement 1/2 (low-prior), q2 1/1
            qonly("f1", {"q1": True, "q2": True}, finder_family=F1),
            qonly("f2", {"q1": False, "q2": True}, finder_family=F2),
            dict(slice="spec_only", finder="f1", finder_family=F1, answers={"q1": True, "q2": True}),
            dict(slice="spec_only", finder="f2", finder_family=F2, answers={"q1": True, "q2": True}),
            # formal; b2's artifact labels q2 implemented_non_gold (scoring set {q1})
            dict(builder="b1", finder="f1", finder_family=F1, bytes=100,
                 input_tokens=1000, output_tokens=10, answers={"q1": True, "q2": True}),
            dict(builder="b1", finder="f2", finder_family=F2, bytes=300,
                 input_tokens=500, output_tokens=5, answers={"q1": True, "q2": False}),
            dict(builder="b2", finder="f1", finder_family=F1, bytes=200,
                 input_tokens=3000, output_tokens=30, labels={"q2": "implemented_non_gold"},
                 answers={"q1": True, "q2": True}),
            dict(builder="b2", finder="f2", finder_family=F2, bytes=50,
                 input_tokens=700, output_tokens=7, labels={"q2": "implemented_non_gold"},
                 answers={"q1": False, "q2": True}),
        ]
    )  # fmt: skip


def test_subset_views_low_prior():
    df = small_panel()
    # formal q1 agreement 3/4, question-only 1/2 -> lift 25: q1 is low-prior and impl-signal;
    # q2: question-only 1.0, formal cells (b1f1 ok, b1f2 wrong) = 1/2 -> neither.
    views = subset_views(df)
    assert views["low_prior_subset"]["question_id"].to_list() == ["q1"]
    assert views["implementation_signal_subset"]["question_id"].to_list() == ["q1"]
    acc = views["low_prior_accuracy"]
    assert acc.columns == ["slice", "task", "runs", "scored_rows", "accuracy", "perfect", "lift_pp"]
    # q1 only: question-only 1/2 ; spec-only 2/2 (+50) ; formal 3/4 (+25)
    assert acc.filter(task="all").rows() == [
        ("question_only", "all", 2, 2, 0.5, 0.5, 0.0),
        ("spec_only", "all", 2, 2, 1.0, 1.0, 50.0),
        ("formal", "all", 4, 4, 0.75, 0.75, 25.0),
    ]
    assert acc.filter(task="t1").drop("task").rows() == acc.filter(task="all").drop("task").rows()
    # gate: b1: g(f1) = 1, g(f2) = 1 -> 1.0 (2 cells); b2: g(f1) = 1, g(f2) = 0 -> 0.5
    gate = views["low_prior_recovery_gate"]
    assert gate.rows() == [("high", "b1", "t1", 1.0, 2, 2), ("high", "b2", "t1", 0.5, 2, 2)]
    # tau on q1: f1 all-correct on b1 (100), b2 (200); f2 only on b1 -> n = 1, tau null.
    # On the full set f2 has no all-correct run at all (n = 0).
    assert views["low_prior_kendall_tau"].select("n", "tau").rows() == [(1, None)]
    assert kendall_tau(df).select("n", "tau").rows() == [(0, None)]
    # affinity on q1: s = b1f1 1, b1f2 1, b2f1 1, b2f2 0; rows 1, 1/2; cols 1, 1/2; grand 3/4
    #   b1f1 = 1-1-1+.75 = -.25 ; b1f2 = 1-1-.5+.75 = .25 ; b2f1 = .25 ; b2f2 = -.25
    aff = views["low_prior_affinity"]
    assert aff.select("builder", "finder", "residual").rows() == [
        ("b1", "f1", approx(-0.25)),
        ("b1", "f2", approx(0.25)),
        ("b2", "f1", approx(0.25)),
        ("b2", "f2", approx(-0.25)),
    ]
    assert set(views) == {
        f"{name}_{view}"
        for name in ("low_prior", "implementation_signal")
        for view in (
            "subset",
            "accuracy",
            "recovery_gate",
            "kendall_tau",
            "affinity",
            "affinity_family",
        )
    } | {"low_prior_rb_effort"}


def test_finder_calibration_table8_columns():
    cal = finder_calibration(small_panel())
    assert cal["finder"].to_list() == ["f1", "f2"]  # formal recovery descending
    f1, f2 = cal.row(0, named=True), cal.row(1, named=True)
    # f1 formal: b1 2/2 + b2 1/1 (q2 not scored) = 3/3
    assert (f1["formal_runs"], f1["formal_recovery"]) == (2, 1.0)
    assert (f1["question_only_accuracy"], f1["spec_only_accuracy"]) == (1.0, 1.0)
    assert (f1["qonly_lift_pp"], f1["low_prior_lift_pp"], f1["impl_signal_lift_pp"]) == (0, 0, 0)
    # f1 tokens per formal run: (1000 + 10 + 3000 + 30) / 2 = 2020
    assert f1["mean_tokens_per_run"] == 2020.0
    # f2 formal pooled over scored rows: b1 1/2, b2 0/1 -> 1/3 (mean of runs would be 1/4)
    assert f2["formal_recovery"] == approx(1 / 3)
    assert f2["question_only_accuracy"] == 0.5
    assert f2["qonly_lift_pp"] == approx(100 * (1 / 3 - 1 / 2))
    assert f2["spec_only_lift_pp"] == approx(50.0)
    assert f2["formal_minus_spec_only_pp"] == approx(100 * (1 / 3 - 1))
    # low-prior q1: formal b1 right, b2 wrong = 1/2; question-only 0/1 -> +50
    assert (f2["low_prior_formal"], f2["low_prior_question_only"]) == (0.5, 0.0)
    assert f2["low_prior_lift_pp"] == approx(50.0)
    assert f2["impl_signal_lift_pp"] == approx(50.0)
    assert f2["mean_tokens_per_run"] == (505 + 707) / 2
    assert f1["finder_family"] == "fam1" and f2["finder_family"] == "fam2"


def test_scoring_set_rules():
    df = expand(
        [
            # all-unlabeled artifact: every question scored -> 1/2
            dict(builder="b1", labels={"q1": "unlabeled", "q2": "unlabeled"},
                 answers={"q1": True, "q2": False}),
            # partly labelled: only the implemented_gold question is scored -> 1/1
            dict(builder="b2", labels={"q2": "unlabeled"}, answers={"q1": True, "q2": False}),
            # nothing implemented-gold: empty scoring set, the run is left out
            dict(builder="b3", labels={"q1": "absent_ambiguous", "q2": "implemented_non_gold"},
                 answers={"q1": False, "q2": False}),
        ]
    )  # fmt: skip
    cal = finder_calibration(df)
    # pooled: (1 + 1) / (2 + 1) = 2/3 over 2 runs
    assert cal.select("formal_runs", "formal_recovery").row(0) == (2, approx(2 / 3))


# ------------------------------------------------------------------------------------------
# 5. evidence-audit sample and summary
# ------------------------------------------------------------------------------------------


def audit_table() -> pl.DataFrame:
    X, Y = "famX", "famY"
    runs = [
        # question-only: q1 wrong (agreement 0 -> low-prior), q2 right (high-prior)
        qonly("f1", {"q1": False, "q2": True}, finder_family=X),
    ]
    # b1 x f1, 3 trials, all correct on q1, q2 -> strata t1|X|X|low_prior (3 rows),
    # t1|X|X|high_prior (3 rows); q3 is implemented_non_gold for b1 -> not in the population
    for k in range(3):
        runs.append(
            dict(builder="b1", builder_family=X, finder="f1", finder_family=X, find_trial=k,
                 labels={"q3": "implemented_non_gold"},
                 answers={"q1": True, "q2": True, "q3": True})
        )  # fmt: skip
    # b2 x f1: q1 right (t1|Y|X|low_prior: 1 row), q2 and q3 wrong (not sampled)
    runs.append(
        dict(builder="b2", builder_family=Y, finder="f1", finder_family=X,
             answers={"q1": True, "q2": False, "q3": None})
    )  # fmt: skip
    # compile-failed artifact: excluded
    runs.append(
        dict(builder="b3", builder_family=Y, finder="f1", finder_family=X, compile_pass=False,
             answers={"q1": True, "q2": True, "q3": True})
    )  # fmt: skip
    return pl.concat([expand(runs[:1]), expand(runs[1:])])


def test_evidence_audit_sample_strata_cap_and_columns():
    sample = evidence_audit_sample(audit_table(), seed=20260601, per_stratum=2)
    assert sample.columns == [
        "audit_id", "stratum", "task", "builder", "builder_family", "build_trial", "finder",
        "finder_family", "find_trial", "question_id", "prior_status", "gold", "answer",
        "correct", "evidence_label", "notes",
    ]  # fmt: skip
    counts = dict(sample.group_by("stratum").len().rows())
    # 2 of 3, 2 of 3, and the 1-row stratum capped at what it has
    assert counts == {
        "t1|famX|famX|high_prior": 2,
        "t1|famX|famX|low_prior": 2,
        "t1|famY|famX|low_prior": 1,
    }
    assert sample["audit_id"].to_list() == [1, 2, 3, 4, 5]
    assert sample["correct"].all()
    assert set(sample["question_id"]) <= {"q1", "q2"}
    assert sample["builder"].is_in(["b1", "b2"]).all()
    assert sample["evidence_label"].null_count() == 5 and sample["notes"].null_count() == 5
    assert sample.filter(question_id="q1")["prior_status"].unique().to_list() == ["low_prior"]
    assert evidence_audit_sample(audit_table(), seed=1, per_stratum=0).height == 0
    big = evidence_audit_sample(audit_table(), seed=1, per_stratum=10)
    assert big.height == 7  # every population row: 3 + 3 + 1
    with pytest.raises(ConfigError):
        evidence_audit_sample(audit_table(), seed=1, per_stratum=-1)


def test_evidence_audit_sample_is_deterministic_and_follows_the_documented_draw():
    df = audit_table()
    a = evidence_audit_sample(df, seed=7, per_stratum=2)
    assert a.equals(evidence_audit_sample(df, seed=7, per_stratum=2))
    # independent of input row order
    shuffled = df.sample(fraction=1.0, shuffle=True, seed=3)
    assert a.equals(evidence_audit_sample(shuffled, seed=7, per_stratum=2))
    # different seeds pick different rows (3-choose-2 twice: 9 possible samples)
    keys = ["builder", "find_trial", "question_id"]
    picks = {
        tuple(evidence_audit_sample(df, seed=s, per_stratum=2).select(keys).rows())
        for s in range(8)
    }
    assert len(picks) > 1
    # the documented rule: population sorted by (task, builder, build_trial, finder,
    # find_trial, question_id); draw i = default_rng(seed).random(N)[i]; keep the smallest
    # per_stratum draws per stratum. Population order: b1 trials 0..2 x (q1, q2), then b2 q1.
    draws = np.random.default_rng(7).random(7)
    population = [(("b1", k, q)) for k in range(3) for q in ("q1", "q2")] + [("b2", 0, "q1")]
    low = sorted((draws[i], population[i]) for i in range(6) if population[i][2] == "q1")[:2]
    high = sorted((draws[i], population[i]) for i in range(6) if population[i][2] == "q2")[:2]
    expected = [p for _, p in high] + [p for _, p in low] + [("b2", 0, "q1")]
    assert a.select(keys).rows() == expected


def test_evidence_audit_summary_counts_pending_separately():
    labelled = pl.DataFrame(
        {
            "task": ["t1", "t1", "t1", "t2", "t2", "t2"],
            "prior_status": ["low_prior", "low_prior", "high_prior", "high_prior", "low_prior", "high_prior"],
            "stratum": ["t1|X|X|low_prior", "t1|X|X|low_prior", "t1|X|X|high_prior",
                        "t2|X|X|high_prior", "t2|X|X|low_prior", "t2|X|X|high_prior"],
            "evidence_label": ["supported", "supported", "partially_supported", " Prior_Like ", None, ""],
        }
    )  # fmt: skip
    out = evidence_audit_summary(labelled)
    cols = ["n", "pending", "labelled", "supported", "partially_supported", "unsupported",
            "prior_like", "unsupported_or_prior_like"]  # fmt: skip
    got = {(r["slice_kind"], r["slice"]): r for r in out.iter_rows(named=True)}
    # all: 6 sampled, 2 pending (null, blank), 4 labelled: 2 supported, 1 partial, 1 prior-like
    assert [got[("all", "all")][c] for c in cols] == [6, 2, 4, 2, 1, 0, 1, 1]
    assert got[("all", "all")]["share_supported"] == 0.5
    assert got[("all", "all")]["share_unsupported_or_prior_like"] == 0.25
    # low-prior: rows 1, 2, 5 -> 2 supported of 2 labelled, 1 pending
    assert [got[("prior_status", "low_prior")][c] for c in cols] == [3, 1, 2, 2, 0, 0, 0, 0]
    assert got[("prior_status", "low_prior")]["share_supported"] == 1.0
    # high-prior: rows 3, 4, 6 -> 1 partial, 1 prior-like, 1 pending
    assert [got[("prior_status", "high_prior")][c] for c in cols] == [3, 1, 2, 0, 1, 0, 1, 1]
    assert [got[("task", "t2")][c] for c in cols] == [3, 2, 1, 0, 0, 0, 1, 1]
    # a stratum with nothing labelled has null shares, not zero
    only_pending = got[("stratum", "t2|X|X|low_prior")]
    assert (only_pending["pending"], only_pending["labelled"]) == (1, 0)
    assert only_pending["share_supported"] is None
    assert (
        out["slice_kind"].to_list()
        == ["all"] + ["prior_status"] * 2 + ["task"] * 2 + ["stratum"] * 4
    )
    # unknown labels are rejected
    with pytest.raises(ConfigError):
        evidence_audit_summary(labelled.with_columns(evidence_label=pl.lit("yes")))
    # a fresh sample is entirely pending
    fresh = evidence_audit_summary(evidence_audit_sample(audit_table(), seed=1, per_stratum=2))
    assert fresh.filter(slice_kind="all").select("n", "pending", "labelled").row(0) == (5, 5, 0)
    assert fresh["share_supported"].null_count() == fresh.height


# ------------------------------------------------------------------------------------------
# 6. token usage
# ------------------------------------------------------------------------------------------


def usage_table() -> pl.DataFrame:
    return expand(
        [
            # formal run 1: 3 question rows, tokens repeated on each -> counted once
            dict(finder="f1", find_trial=0, input_tokens=100, output_tokens=10,
                 answers={"q1": True, "q2": True, "q3": False}),
            dict(finder="f1", find_trial=1, input_tokens=200, output_tokens=20,
                 answers={"q1": True, "q2": True, "q3": True}),
            # compile-failed artifact: counted by default (Table 17 covers artifact-present)
            dict(finder="f1", builder="b2", compile_pass=False, input_tokens=50, output_tokens=5,
                 answers={"q1": True, "q2": True, "q3": True}),
            dict(slice="question_only", finder="f1", input_tokens=30, output_tokens=3,
                 answers={"q1": True, "q2": True, "q3": True}),
            dict(slice="spec_only", finder="f2", input_tokens=40, output_tokens=None,
                 answers={"q1": True, "q2": True, "q3": True}),
        ]
    )  # fmt: skip


def test_token_usage_dedups_per_run():
    builds = pl.DataFrame(
        {
            "builder": ["b1", "b1", "b2"],  # b1's build listed twice -> one run
            "task": ["t1", "t1", "t1"],
            "build_trial": [0, 0, 0],
            "input_tokens": [1000, 1000, 500],
            "output_tokens": [100, 100, 50],
        }
    )
    out = token_usage(usage_table(), builds)
    assert out.columns == [
        "role", "agent", "runs", "input_tokens", "output_tokens", "total", "mean_per_run",
        "runs_missing_tokens",
    ]  # fmt: skip
    assert out.rows() == [
        ("builder", "b1", 1, 1000, 100, 1100, 1100.0, 0),
        ("builder", "b2", 1, 500, 50, 550, 550.0, 0),
        # 3 runs: 100+200+50 = 350 in, 10+20+5 = 35 out (not 3x per question row)
        ("finder_formal", "f1", 3, 350, 35, 385, approx(385 / 3), 0),
        ("finder_question_only", "f1", 1, 30, 3, 33, 33.0, 0),
        # missing output: contributes 0 and is flagged
        ("finder_spec_only", "f2", 1, 40, 0, 40, 40.0, 1),
    ]
    primary = token_usage(usage_table(), compile_pass_only=True)
    assert primary.filter(role="finder_formal").select("runs", "total").row(0) == (2, 330)
    assert "builder" not in primary["role"].to_list()


def test_token_usage_rejects_inconsistent_run_tokens():
    bad = usage_table().with_columns(
        input_tokens=pl.when(pl.col("question_id") == "q2")
        .then(pl.col("input_tokens") + 1)
        .otherwise(pl.col("input_tokens"))
    )
    with pytest.raises(ConfigError, match="per-run"):
        token_usage(bad)
    builds = pl.DataFrame(
        {"builder": ["b1", "b1"], "task": ["t1", "t1"], "build_trial": [0, 0],
         "input_tokens": [1, 2], "output_tokens": [0, 0]}
    )  # fmt: skip
    with pytest.raises(ConfigError):
        token_usage(usage_table(), builds)


# ------------------------------------------------------------------------------------------
# empty input
# ------------------------------------------------------------------------------------------


def test_empty_rows_give_empty_tables():
    rows = empty_rows()
    assert kendall_tau(rows).height == 0
    assert affinity(rows).height == 0
    assert affinity_family(rows).height == 0
    assert low_prior_subset(rows).height == 0
    assert implementation_signal_subset(rows).height == 0
    assert finder_calibration(rows).height == 0
    assert evidence_audit_sample(rows, seed=1, per_stratum=2).height == 0
    assert token_usage(rows).height == 0
    views = subset_views(rows)
    assert all(v.height == 0 for v in views.values())


# ------------------------------------------------------------------------------------------
# every extra at once
# ------------------------------------------------------------------------------------------


def mixed_table() -> pl.DataFrame:
    """Several of the tables above, each under its own task, plus an all-unlabeled artifact."""
    parts = [tau_table(), small_panel(), audit_table(), usage_table(), affinity_table()]
    unlabeled = expand(
        [
            dict(builder="b9", labels={"q1": "unlabeled", "q2": "unlabeled"}, find_trial=k,
                 answers={"q1": True, "q2": k != 1})
            for k in range(3)
        ]
    )  # fmt: skip
    parts.append(unlabeled)
    return pl.concat(
        [p.with_columns(task=pl.lit(f"t{i}")) for i, p in enumerate(parts)], how="vertical"
    )


def separately(rows: pl.DataFrame, builds: pl.DataFrame | None) -> dict[str, pl.DataFrame]:
    tables = {
        "kendall_tau": kendall_tau(rows),
        "affinity": affinity(rows),
        "affinity_family": affinity_family(rows),
        "affinity_matrix": affinity_matrix(rows),
        "affinity_matrix_family": affinity_matrix_family(rows),
        "question_agreement": question_agreement(rows),
        "finder_calibration": finder_calibration(rows),
        "token_usage": token_usage(rows, builds),
    }
    tables.update(subset_views(rows))
    tables["evidence_audit_sample"] = evidence_audit_sample(rows, seed=20260601, per_stratum=2)
    tables["evidence_audit_rule"] = evidence_audit_rule(rows, seed=20260601, per_stratum=2)
    tables["robustness_pivots"] = robustness_pivots(rows)
    tables["effort_accuracy"] = effort_accuracy(rows)
    return tables


@pytest.mark.parametrize("dtype", ["string", "enum", "categorical"])
def test_analyze_extras_equals_the_individual_functions(dtype):
    rows = mixed_table()
    builds = pl.DataFrame(
        {"builder": ["b1"], "task": ["t0"], "build_trial": [0], "input_tokens": [9],
         "output_tokens": [1]}
    )  # fmt: skip
    want = separately(rows, builds)
    assert want["low_prior_subset"].height > 0 and want["evidence_audit_sample"].height > 0
    strings = [c for c, t in rows.schema.items() if t == pl.String]
    if dtype == "enum":
        rows = rows.with_columns(
            pl.col(c).cast(pl.Enum(sorted(rows[c].drop_nulls().unique().to_list(), reverse=True)))
            for c in strings
        )
    elif dtype == "categorical":
        rows = rows.with_columns(pl.col(strings).cast(pl.Categorical))
    got = analyze_extras(rows, builds)
    assert list(got) == list(want)
    for name, table_ in want.items():
        assert got[name].schema == table_.schema, name
        assert_frame_equal(got[name], table_, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)
    sample = analyze_extras(rows, seed=7, per_stratum=1)["evidence_audit_sample"]
    assert sample.equals(evidence_audit_sample(mixed_table(), seed=7, per_stratum=1))


# ------------------------------------------------------------------------------------------
# 2b. the paper's one-matrix affinity (Figure 5, Table 15) against per-panel centring
# ------------------------------------------------------------------------------------------


def matrix_table() -> pl.DataFrame:
    """Paper-shaped matched grid: builders H1, H2 (high) read by finders h1, h2; L1, L2 (low)
    read by l1, l2; two find runs per pair on five questions, so a run scores k/5."""
    correct_per_run = {
        ("H1", "h1"): (5, 5), ("H1", "h2"): (3, 5), ("H2", "h1"): (3, 3), ("H2", "h2"): (2, 4),
        ("L1", "l1"): (2, 2), ("L1", "l2"): (1, 3), ("L2", "l1"): (1, 1), ("L2", "l2"): (3, 3),
    }  # fmt: skip
    family = {
        "H1": "A",
        "L1": "A",
        "H2": "B",
        "L2": "B",
        "h1": "A",
        "l1": "A",
        "h2": "B",
        "l2": "B",
    }
    runs = []
    for (builder, finder), ks in correct_per_run.items():
        for trial, k in enumerate(ks):
            runs.append(
                dict(builder=builder, finder=finder, find_trial=trial,
                     effort_panel="high" if builder.startswith("H") else "low",
                     builder_family=family[builder], finder_family=family[finder],
                     answers={f"q{i}": i < k for i in range(5)})
            )  # fmt: skip
    return expand(runs)


def test_affinity_matrix_is_one_matrix_over_both_efforts():
    # pair scores (mean of the two runs' Eq. 1 accuracy):
    #   H1h1 1.0  H1h2 0.8  H2h1 0.6  H2h2 0.6  |  L1l1 0.4  L1l2 0.4  L2l1 0.2  L2l2 0.6
    # grand mean over the 8 observed cells: 4.6 / 8 = 0.575
    # builder means H1 .9, H2 .6, L1 .4, L2 .4; finder means h1 .8, h2 .7, l1 .3, l2 .5
    # residual = s - builder - finder + grand:
    #   H1h1 1-.9-.8+.575 = -.125   H1h2 .8-.9-.7+.575 = -.225
    #   H2h1 .6-.6-.8+.575 = -.225  H2h2 .6-.6-.7+.575 = -.125
    #   L1l1 .4-.4-.3+.575 = .275   L1l2 .4-.4-.5+.575 = .075
    #   L2l1 .2-.4-.3+.575 = .075   L2l2 .6-.4-.5+.575 = .275
    expected = {
        ("H1", "h1"): -0.125, ("H1", "h2"): -0.225, ("H2", "h1"): -0.225, ("H2", "h2"): -0.125,
        ("L1", "l1"): 0.275, ("L1", "l2"): 0.075, ("L2", "l1"): 0.075, ("L2", "l2"): 0.275,
    }  # fmt: skip
    rows = matrix_table()
    out = affinity_matrix(rows)
    assert out.columns == [
        "builder", "finder", "residual", "score", "runs", "builder_family", "finder_family"
    ]  # fmt: skip
    got = {(r["builder"], r["finder"]): r["residual"] for r in out.iter_rows(named=True)}
    assert got == {k: pytest.approx(v, abs=1e-9) for k, v in expected.items()}
    assert out.filter(builder="H1", finder="h2").select("score", "runs").row(0) == (
        pytest.approx(0.8),
        2,
    )
    # per-panel centring (the alternative) uses each panel's own grand mean: high .75, low .4,
    # so its residuals are the matrix's shifted by .75 - .575 = .175 and .4 - .575 = -.175
    panel = affinity(rows)
    shift = {"high": 0.175, "low": -0.175}
    for r in panel.iter_rows(named=True):
        want = expected[(r["builder"], r["finder"])] + shift[r["effort_panel"]]
        assert r["residual"] == pytest.approx(want, abs=1e-9)
    # Table 15 layout: families A = {H1, L1 | h1, l1}, B = {H2, L2 | h2, l2}
    #   (A, A): H1h1, L1l1 -> (-.125 + .275) / 2 = .075;  (A, B): H1h2, L1l2 -> -.075
    #   (B, A): H2h1, L2l1 -> -.075;                      (B, B): H2h2, L2l2 -> .075
    fam = affinity_matrix_family(rows)
    assert fam.columns == ["builder_family", "finder_family", "residual", "cells"]
    assert [tuple(r) for r in fam.select("builder_family", "finder_family").iter_rows()] == [
        ("A", "A"), ("A", "B"), ("B", "A"), ("B", "B")
    ]  # fmt: skip
    assert fam.get_column("residual").to_list() == pytest.approx([0.075, -0.075, -0.075, 0.075])
    assert fam.get_column("cells").to_list() == [2, 2, 2, 2]
