"""Scoring against gold: Recall_A, Recall_A+P, flagged-task precision, per-category recall."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from metaeval.models.scripted import ScriptedModel
from metaeval.models.types import ModelRequest
from metaeval.protocols.audit.findings import SUBCATEGORIES, Finding
from metaeval.protocols.audit.gold import Gold, GoldIssue, parse_gold
from metaeval.protocols.audit.judge import Judge, Verdict
from metaeval.protocols.audit.score_report import ScoreReport, fmt_cost, fmt_pct
from metaeval.protocols.audit.scoring import score

# Gold: task A has issues a1 (INST-INCOMPLETE) and a2 (GT-LOGIC); task B has b1
# (INST-INCOMPLETE); task C is known clean. 3 gold issues on 2 defective tasks.
GOLD = parse_gold(
    json.dumps(
        {
            "tasks": {
                "A": {
                    "issues": [
                        {
                            "id": "a1",
                            "description": "A: unit unspecified",
                            "category": "INST-INCOMPLETE",
                        },
                        {"id": "a2", "description": "A: wrong metric", "category": "GT-LOGIC"},
                    ]
                },
                "B": {
                    "issues": [
                        {
                            "id": "b1",
                            "description": "B: filter unstated",
                            "category": "INST-INCOMPLETE",
                        }
                    ]
                },
                "C": {"issues": []},
            }
        }
    ),
    file="gold.json",
)


def f(task: str, title: str, confidence: float = 0.9, sub: str = "INST-INCOMPLETE") -> Finding:
    return Finding(
        task_id=task,
        category=SUBCATEGORIES[sub],
        subcategory=sub,
        severity="High",
        finding_type="Warning",
        title=title,
        description=f"description of {title}",
        confidence=confidence,
        source="m",
        protocol="definition",
    )


class FakeJudge:
    """Verdicts from a table keyed by (gold issue id, finding title); default UNRELATED."""

    model_name = "fake/judge"

    def __init__(
        self, table: dict[tuple[str, str], str], errors: set[tuple[str, str]] = frozenset()
    ):
        self.table = table
        self.errors = errors
        self.calls: list[tuple[str, str, str]] = []

    def judge(self, gold_issue: GoldIssue, finding: Finding) -> Verdict:
        assert gold_issue.task_id == finding.task_id
        self.calls.append((gold_issue.task_id, gold_issue.id, finding.title))
        key = (gold_issue.id, finding.title)
        if key in self.errors:
            return Verdict(
                verdict="UNRELATED", reasoning="judge output malformed", judge_error=True
            )
        return Verdict(verdict=self.table.get(key, "UNRELATED"), reasoning="r")  # type: ignore[arg-type]


TABLE = {
    ("a1", "fA1"): "ALIGNED",
    ("a2", "fA2"): "PARTIAL",
    ("a1", "fX"): "ALIGNED",
    ("a2", "fX"): "ALIGNED",
    ("a1", "low"): "ALIGNED",  # would count, but the finding is suppressed (< 0.3)
}


def groups() -> dict[str, list[Finding]]:
    return {
        # m1: fA1 aligned with a1; fA2 partial with a2; fB1 unrelated to b1; fC on the
        # clean task C (never judged, not in precision, counted in the total only).
        "m1": [f("A", "fA1"), f("A", "fA2"), f("B", "fB1"), f("C", "fC")],
        # m2: only a clean-task finding, plus a suppressed finding on A.
        "m2": [f("C", "fC2"), f("A", "low", confidence=0.2)],
        # m3: one finding aligned with both gold issues of task A.
        "m3": [f("A", "fX")],
    }


@pytest.fixture
def report() -> ScoreReport:
    return score(groups(), GOLD, FakeJudge(TABLE), {"m1": 0.5, "m2": None})


def test_hand_computed_row(report: ScoreReport) -> None:
    m1 = report.row("m1")
    assert m1.n_gold == 3
    # Recall_A: only a1 has an ALIGNED finding -> 1/3.
    assert m1.recalled_a == 1 and m1.recall_a == pytest.approx(1 / 3)
    # Recall_A+P: a1 (aligned) and a2 (partial via fA2) -> 2/3; b1 missed.
    assert m1.recalled_ap == 2 and m1.recall_ap == pytest.approx(2 / 3)
    # Findings on defective tasks (A, B): fA1, fA2, fB1 -> Find. = 3 (fC is on clean C).
    assert m1.n_findings_defective == 3
    # Precision_A: fA1 only -> 1/3; Precision_A+P: fA1 and fA2 -> 2/3.
    assert m1.precise_a == 1 and m1.precision_a == pytest.approx(1 / 3)
    assert m1.precise_ap == 2 and m1.precision_ap == pytest.approx(2 / 3)
    assert m1.n_findings == 4 and m1.n_suppressed == 0
    assert m1.cost_usd == 0.5 and m1.judge_errors == 0


def test_row_without_findings_on_defective_tasks_has_undefined_precision(
    report: ScoreReport,
) -> None:
    m2 = report.row("m2")
    assert m2.n_findings_defective == 0
    assert m2.precision_a is None and m2.precision_ap is None  # never 0 or 1
    assert m2.recall_a == 0.0 and m2.recall_ap == 0.0
    # The 0.2-confidence finding on A is ignored everywhere (it would have been ALIGNED).
    assert m2.n_findings == 1 and m2.n_suppressed == 1
    assert m2.cost_usd is None


def test_finding_aligned_with_two_issues_counts_once_in_precision(report: ScoreReport) -> None:
    m3 = report.row("m3")
    # fX is ALIGNED with a1 and a2: both are recalled -> 2/3 ...
    assert m3.recalled_a == 2 and m3.recall_a == pytest.approx(2 / 3)
    assert m3.recall_ap == pytest.approx(2 / 3)
    # ... but it is one finding: precision 1/1, Find. = 1.
    assert m3.n_findings_defective == 1 and m3.precise_a == 1
    assert m3.precision_a == 1.0 and m3.precision_ap == 1.0
    assert m3.cost_usd is None  # not in costs -> unknown
    (detail,) = [d for d in report.findings if d.row == "m3"]
    assert detail.best == "ALIGNED" and detail.aligned_with == ["a1", "a2"]


def test_judge_only_sees_same_task_pairs_of_reported_findings() -> None:
    judge = FakeJudge(TABLE)
    report = score(groups(), GOLD, judge)
    # m1: fA1, fA2 x {a1, a2} + fB1 x {b1} = 5 pairs; m3: fX x {a1, a2} = 2 pairs.
    assert len(judge.calls) == 7 == report.judge_pairs
    assert all(task in ("A", "B") for task, _, _ in judge.calls)
    assert not any(title in ("fC", "fC2", "low") for _, _, title in judge.calls)
    assert {(t, g) for t, g, title in judge.calls if title == "fB1"} == {("B", "b1")}


def test_identical_pairs_across_rows_are_judged_once() -> None:
    judge = FakeJudge(TABLE)
    rows = {"one": [f("A", "fA1")], "any": [f("A", "fA1"), f("B", "fB1")]}
    report = score(rows, GOLD, judge)
    assert len(judge.calls) == 3  # (a1,fA1), (a2,fA1), (b1,fB1)
    assert report.row("one").recall_a == report.row("any").recall_a == pytest.approx(1 / 3)
    assert report.row("any").precision_a == pytest.approx(1 / 2)


def test_per_category_recall(report: ScoreReport) -> None:
    cats = {c.category: c for c in report.categories}
    assert list(cats) == ["GT-LOGIC", "INST-INCOMPLETE"]  # taxonomy order, present only
    # GT-LOGIC = {a2}: m1 partial only -> A 0%, A+P 100%; m3 aligned -> 100%.
    assert cats["GT-LOGIC"].n_gold == 1
    assert cats["GT-LOGIC"].recall_a == {"m1": 0.0, "m2": 0.0, "m3": 1.0}
    assert cats["GT-LOGIC"].recall_ap == {"m1": 1.0, "m2": 0.0, "m3": 1.0}
    # INST-INCOMPLETE = {a1, b1}: m1 aligned a1 -> 1/2; m3 aligned a1 -> 1/2.
    assert cats["INST-INCOMPLETE"].n_gold == 2
    assert cats["INST-INCOMPLETE"].recall_a == {"m1": 0.5, "m2": 0.0, "m3": 0.5}
    assert cats["INST-INCOMPLETE"].recall_ap == {"m1": 0.5, "m2": 0.0, "m3": 0.5}


def test_per_issue_detail(report: ScoreReport) -> None:
    by_id = {(d.task_id, d.issue_id): d for d in report.issues}
    assert by_id[("A", "a1")].best == {"m1": "ALIGNED", "m2": None, "m3": "ALIGNED"}
    assert by_id[("A", "a2")].best == {"m1": "PARTIAL", "m2": None, "m3": "ALIGNED"}
    assert by_id[("B", "b1")].best == {"m1": "UNRELATED", "m2": None, "m3": None}
    pairs = [(p.row, p.finding_title, p.verdict) for p in by_id[("A", "a2")].pairs]
    assert pairs == [
        ("m1", "fA1", "UNRELATED"),
        ("m1", "fA2", "PARTIAL"),
        ("m3", "fX", "ALIGNED"),
    ]


def test_judge_errors_are_counted_and_shown() -> None:
    judge = FakeJudge(TABLE, errors={("b1", "fB1")})
    report = score({"m1": groups()["m1"], "dup": [f("B", "fB1")]}, GOLD, judge)
    assert report.judge_errors == 1  # one distinct pair, in two rows
    assert report.row("m1").judge_errors == 1 and report.row("dup").judge_errors == 1
    assert "1 judge errors" in report.to_markdown()
    assert "malformed" in report.to_markdown()


def test_markdown_tables(report: ScoreReport) -> None:
    md = report.to_markdown()
    assert "| Row | Recall_A | Recall_A+P | Precision_A | Precision_A+P | Find. | Cost ($) |" in md
    assert "| m1 | 33.3 | 66.7 | 33.3 | 66.7 | 3 | 0.50 |" in md
    assert "| m2 | 0.0 | 0.0 | n/a | n/a | 0 | n/a |" in md
    assert "| m3 | 66.7 | 66.7 | 100.0 | 100.0 | 1 | n/a |" in md
    assert "| Category | Gold | m1 Recall_A | m1 Recall_A+P |" in md
    assert "| GT-LOGIC | 1 | 0.0 | 100.0 | 0.0 | 0.0 | 100.0 | 100.0 |" in md
    assert "| INST-INCOMPLETE | 2 | 50.0 | 50.0 | 0.0 | 0.0 | 50.0 | 50.0 |" in md
    assert "| A | a2 | GT-LOGIC | A: wrong metric | ~ | ✗ | ✓ |" in md


def test_empty_gold_gives_undefined_recall() -> None:
    report = score({"m": [f("A", "x")]}, Gold(tasks={}), FakeJudge({}))
    row = report.row("m")
    assert row.recall_a is None and row.precision_a is None and row.n_findings == 1


def test_formatting_helpers() -> None:
    assert fmt_pct(None) == "n/a" and fmt_pct(1 / 3) == "33.3" and fmt_pct(1.0) == "100.0"
    assert fmt_cost(None) == "n/a" and fmt_cost(0.0) == "0.00" and fmt_cost(14.375) == "14.38"
    assert fmt_cost(0.0012) == "0.0012"


def test_scoring_with_real_judge_and_cache(tmp_path: Path) -> None:
    """A Judge over a ScriptedModel whose verdict depends on the prompt; re-scoring is cached."""
    descriptions = {i.description: i.id for i in GOLD.all_issues()}

    def respond(request: ModelRequest) -> str:
        prompt = request.messages[-1].content
        gold_id = next(i for d, i in descriptions.items() if f"Issue: {d}\n" in prompt)
        title = re.search(r"^Title: (.*)$", prompt, re.MULTILINE)
        assert title is not None
        return json.dumps(
            {"verdict": TABLE.get((gold_id, title.group(1)), "UNRELATED"), "reasoning": "r"}
        )

    model = ScriptedModel(respond)
    first = score(groups(), GOLD, Judge(model, tmp_path))
    assert len(model.requests) == 7
    m1 = first.row("m1")
    assert (m1.recall_a, m1.recall_ap) == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert first.judge_model == "scripted/default"

    # Re-scoring with a fresh judge on the same cache: no model call at all.
    empty = ScriptedModel([])
    again = score(groups(), GOLD, Judge(empty, tmp_path))
    assert empty.requests == [] and empty.remaining == 0
    assert again.rows == first.rows
    assert all(p.cached for d in again.issues for p in d.pairs)
