"""Figures 2 (D_b), 3 (robustness pivots), 6 (low-prior R_b) and effort vs accuracy: written as SVG and PNG with
the same bytes twice, embedded in report.html, and the numbers printed in each SVG equal the
table values; the Figure 3 table is checked against recovery counted here by hand."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import polars as pl
import pytest

from metaeval.protocols.buildfind.finalize import analyze_rows, write_outputs
from metaeval.protocols.buildfind.rows.table import conform
from test_buildfind_bootstrap import (
    BUILDERS,
    FINDERS,
    QUESTIONS,
    TASKS,
    TRIALS,
    _bytes,
    _correct,
    synthetic_rows,
)

FAMILY = {"b1": "famA", "b2": "famB", "b3": "famC", "f1": "famA", "f2": "famB"}
NAMES = ("fig-db", "fig-robustness", "fig-rb-low-prior", "fig-effort-accuracy")
NOT_GOLD = {("b2", "t1", "q3"): "implemented_non_gold", ("b3", "t2", "q2"): "absent_ambiguous"}


def _label(builder: str, task: str, qid: str) -> str:
    return NOT_GOLD.get((builder, task, qid), "implemented_gold")


def _controls() -> pl.DataFrame:
    """Question-only rows, three trials per finder: q1 is wrong on one trial of three
    (agreement 2/3 < 0.9, low-prior); q2 and q3 are always right."""
    rows = []
    for finder in FINDERS:
        for task in TASKS:
            for trial in range(3):
                for qid in QUESTIONS:
                    ok = not (qid == "q1" and trial == 2)
                    rows.append(
                        {
                            "slice": "question_only",
                            "task": task,
                            "builder": "",
                            "builder_family": "",
                            "finder": finder,
                            "finder_family": FAMILY[finder],
                            "effort_panel": "high",
                            "finder_effort": "high",
                            "build_trial": -1,
                            "find_trial": trial,
                            "question_id": qid,
                            "gold": "A",
                            "answer": "A" if ok else "B",
                            "correct": ok,
                            "compile_pass": None,
                            "label": "unlabeled",
                            "label_source": "none",
                            "novel_retrieval_bytes": 0,
                            "novel_tool_call_bytes": 0,
                            "input_tokens": 1,
                            "output_tokens": 1,
                        }
                    )
    return conform(pl.DataFrame(rows))


@pytest.fixture(scope="module")
def tables() -> dict[str, pl.DataFrame]:
    formal = synthetic_rows().with_columns(
        builder_family=pl.col("builder").replace_strict(FAMILY),
        finder_family=pl.col("finder").replace_strict(FAMILY),
        label=pl.struct("builder", "task", "question_id").map_elements(
            lambda r: _label(r["builder"], r["task"], r["question_id"]), return_dtype=pl.Utf8
        ),
        label_source=pl.lit("manual_review"),
    )
    return analyze_rows(pl.concat([formal, _controls()]), seed0=7)


def _svg_texts(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [html.unescape(t).strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", text)]


def test_files_written_deterministic_and_embedded(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    meta = {"run_id": "synthetic"}
    write_outputs(tables, meta, tmp_path / "a")
    write_outputs(tables, meta, tmp_path / "b")
    page = (tmp_path / "a" / "report.html").read_text(encoding="utf-8")
    for name in NAMES:
        for ext in ("svg", "png"):
            a = (tmp_path / "a" / "figures" / f"{name}.{ext}").read_bytes()
            assert len(a) > 1000, name
            assert a == (tmp_path / "b" / "figures" / f"{name}.{ext}").read_bytes(), name
        assert f'<figure id="{name}">' in page
        figure = page.split(f'<figure id="{name}">', 1)[1].split("</figure>")[0]
        assert "<svg" in figure and "no data" not in figure, name


def test_db_figure_prints_the_coverage_table(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    write_outputs(tables, {}, tmp_path)
    texts = _svg_texts(tmp_path / "figures" / "fig-db.svg")
    coverage = tables["coverage"]
    assert coverage.height == len(BUILDERS)
    # by hand: b2 lost 1 of its 6 artifact-question pairs per trial on t1, b3 one on t2
    want = {"b1": 1.0, "b2": 5 / 6, "b3": 5 / 6}
    assert dict(zip(coverage["builder"], coverage["coverage"], strict=True)) == pytest.approx(want)
    for r in coverage.to_dicts():
        assert f"D_b={r['D_b']:.3f}  cov={r['coverage']:.3f}" in texts, r["builder"]


def _hand_recovery(view: str, keep) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Pooled correct / scored rows of the formal runs (scored: the implemented_gold rows)."""
    hits: dict[str, list[bool]] = {}
    for b, builder in enumerate(BUILDERS):
        for f, finder in enumerate(FINDERS):
            if not keep(builder, finder):
                continue
            for t, task in enumerate(TASKS):
                for r in TRIALS:
                    for q, qid in enumerate(QUESTIONS):
                        gold = _label(builder, task, qid) == "implemented_gold"
                        if gold and keep(builder, finder, qid):
                            agent = builder if view == "builder" else finder
                            hits.setdefault(agent, []).append(_correct(b, f, t, r, q))
    return {a: sum(v) / len(v) for a, v in hits.items()}


def test_robustness_table_and_figure(tables: dict[str, pl.DataFrame], tmp_path: Path) -> None:
    pivots = tables["robustness_pivots"]
    got = {(r["view"], r["slice"], r["agent"]): r["recovery"] for r in pivots.to_dicts()}
    every = _hand_recovery("builder", lambda *a: True)
    assert {a: got["builder", "all", a] for a in BUILDERS} == pytest.approx(every)
    cross = _hand_recovery("finder", lambda b, f, q=None: FAMILY[b] != FAMILY[f])
    assert {a: got["finder", "cross_family", a] for a in FINDERS} == pytest.approx(cross)
    low = _hand_recovery("finder", lambda b, f, q="q1": q == "q1")
    assert {a: got["finder", "low_prior", a] for a in FINDERS} == pytest.approx(low)
    # two finders and three builders: "top 4" keeps everyone, so calibrated equals all
    for key, value in got.items():
        if key[1] == "calibrated_instruments":
            assert value == got[key[0], "all", key[2]]
    write_outputs(tables, {}, tmp_path)
    texts = _svg_texts(tmp_path / "figures" / "fig-robustness.svg")
    cells = [t for t in texts if re.fullmatch(r"\d+\.\d|n/a", t)]
    assert sorted(cells) == sorted(f"{100 * v:.1f}" for v in pivots["recovery"].to_list())


def _hand_low_prior_rb() -> dict[str, float]:
    """Eqs. 2-4 with the all-correct gate on q1 (the one low-prior question, gold everywhere):
    cost = mean whole-run bytes of the cell's runs that answered q1 right."""
    cost = {}
    for b in range(len(BUILDERS)):
        for f in range(len(FINDERS)):
            for t in range(len(TASKS)):
                runs = [_bytes(b, f, t, r) for r in TRIALS if _correct(b, f, t, r, 0)]
                if runs:
                    cost[b, f, t] = sum(runs) / len(runs)
    out = {}
    for b, name in enumerate(BUILDERS):
        logs = [
            math.log(c / min(c2 for (_, f2, t2), c2 in cost.items() if (f2, t2) == (f, t)))
            for (b1, f, t), c in cost.items()
            if b1 == b
        ]
        out[name] = math.exp(sum(logs) / len(logs))
    return out


def test_low_prior_rb_figure_prints_its_table(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    rb = tables["low_prior_rb_effort"]
    assert rb.height == len(BUILDERS) and rb["cells"].sum() > 0
    want = _hand_low_prior_rb()
    assert dict(zip(rb["builder"], rb["R_b"], strict=True)) == pytest.approx(want, rel=1e-12)
    write_outputs(tables, {}, tmp_path)
    texts = _svg_texts(tmp_path / "figures" / "fig-rb-low-prior.svg")
    for r in rb.to_dicts():
        shown = "n/a" if r["R_b"] is None else f"{r['R_b']:.3f}"
        assert f"{shown}  |C_b|={r['cells']}/{r['total_cells']}" in texts, r["builder"]


def _hand_effort_accuracy() -> dict[str, list[tuple[str, float, float]]]:
    """Per finder: mean whole-run bytes of its formal runs (every run scores a question) and
    pooled accuracy in percent over its implemented-gold rows (all) or its q1 rows (the one
    low-prior question, gold everywhere)."""
    points: dict[str, list[tuple[str, float, float]]] = {"all": [], "low_prior": []}
    for f, finder in enumerate(FINDERS):
        runs = [(b, t, r) for b in range(len(BUILDERS)) for t in range(len(TASKS)) for r in TRIALS]
        effort = sum(_bytes(b, f, t, r) for b, t, r in runs) / len(runs)
        gold = [
            _correct(b, f, t, r, q)
            for b, t, r in runs
            for q, qid in enumerate(QUESTIONS)
            if _label(BUILDERS[b], TASKS[t], qid) == "implemented_gold"
        ]
        low = [_correct(b, f, t, r, 0) for b, t, r in runs]
        points["all"].append((finder, effort, 100 * sum(gold) / len(gold)))
        points["low_prior"].append((finder, effort, 100 * sum(low) / len(low)))
    return points


def test_effort_accuracy_points_equal_a_hand_computation(
    tables: dict[str, pl.DataFrame], tmp_path: Path
) -> None:
    from metaeval.protocols.buildfind.report.figures_effort import effort_accuracy_points

    want = _hand_effort_accuracy()
    got = effort_accuracy_points(tables["effort_accuracy"])
    assert set(got) == set(want)
    for subset, points in want.items():
        assert [p[0] for p in got[subset]] == [p[0] for p in points]
        for (_, gx, gy), (_, wx, wy) in zip(got[subset], points, strict=True):
            assert (gx, gy) == pytest.approx((wx, wy), rel=1e-12)
    # the low-prior points differ from the all-question points: two series are drawn
    assert [p[2] for p in got["all"]] != [p[2] for p in got["low_prior"]]
    write_outputs(tables, {}, tmp_path)
    texts = _svg_texts(tmp_path / "figures" / "fig-effort-accuracy.svg")
    assert set(FINDERS) <= set(texts)
    assert {"all questions", "low-prior questions"} <= set(texts)
