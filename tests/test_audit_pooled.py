"""The paper's ensemble rule (pooled, unmerged; ≥k models aligned) on a run directory with three
models, scored by `audit score` against a small gold file; expected values computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaeval.protocols.audit.findings import SUBCATEGORIES, Finding
from metaeval.protocols.audit.judge import CATEGORY_JUDGE
from metaeval.protocols.audit.records import ModelCell, finding_record
from metaeval.protocols.audit.render import score_run
from metaeval.records import RunDir

# Gold: T1 has g1 (INST-INCOMPLETE) and g2 (GT-LOGIC); T2 g3 (EVAL-MISMATCH); T3 g4 (ENV-DEP);
# T9 g5 (ENV-PATH) is a task the run never saw; T4 is known clean. 5 gold issues.
GOLD = {
    "tasks": {
        "T1": {
            "issues": [
                {"id": "g1", "description": "unit unstated", "category": "INST-INCOMPLETE"},
                {"id": "g2", "description": "wrong metric", "category": "GT-LOGIC"},
            ]
        },
        "T2": {"issues": [{"id": "g3", "description": "wrong file", "category": "EVAL-MISMATCH"}]},
        "T3": {"issues": [{"id": "g4", "description": "numpy missing", "category": "ENV-DEP"}]},
        "T4": {"issues": []},
        "T9": {"issues": [{"id": "g5", "description": "no fixture", "category": "ENV-PATH"}]},
    }
}

# The category judge: same subcategory = ALIGNED, same top category = PARTIAL.
# (task, subcategory, confidence) per model; a model without a cell for a task did not audit it.
FINDINGS = {
    "p/m1": [
        ("T1", "INST-INCOMPLETE", 0.9),  # g1 ALIGNED, g2 unrelated
        ("T2", "EVAL-COVERAGE", 0.9),  # g3 PARTIAL
        ("T3", "ENV-DEP", 0.9),  # g4 ALIGNED
        ("T4", "INST-CONTRADICT", 0.9),  # clean task: never judged
        ("T2", "EVAL-MISMATCH", 0.2),  # below the report threshold: suppressed, not counted
    ],
    "p/m2": [
        ("T1", "INST-INCOMPLETE", 0.9),  # g1 ALIGNED
        ("T1", "GT-LOGIC", 0.9),  # g2 ALIGNED
        ("T2", "EVAL-COVERAGE", 0.9),  # g3 PARTIAL
    ],
    "p/m3": [
        ("T1", "INST-CONTRADICT", 0.9),  # g1 PARTIAL, g2 unrelated
        ("T2", "EVAL-MISMATCH", 0.9),  # g3 ALIGNED
        ("T3", "ENV-RESOURCE", 0.9),  # g4 PARTIAL
    ],
}
COSTS = {"p/m1": 0.10, "p/m2": 0.25, "p/m3": 0.05}
NOT_AUDITED = {("p/m2", "T3")}  # m2's cell on T3 failed
PROTOCOL = {"p/m1": "definition", "p/m2": "definition", "p/m3": "execution"}


def _finding(source: str, task: str, sub: str, confidence: float, n: int) -> dict:
    finding = Finding(
        task_id=task,
        category=SUBCATEGORIES[sub],
        subcategory=sub,
        severity="High",
        finding_type="Bug",
        title=f"{source} {sub} {n}",
        description=f"{sub} on {task}",
        confidence=confidence,
        source=source,
        protocol=PROTOCOL[source],
    )
    return finding_record(finding.model_dump(mode="json"), "a1")


def _run(tmp_path: Path) -> Path:
    path = tmp_path / "run"
    run = RunDir.open(
        path, protocol="audit", config={"models": sorted(FINDINGS)}, hashes={}, seeds={}
    )
    for source, items in FINDINGS.items():
        for n, (task, sub, confidence) in enumerate(items):
            run.records("findings").append(_finding(source, task, sub, confidence, n))
        for task in ("T1", "T2", "T3", "T4"):
            failed = (source, task) in NOT_AUDITED
            cell = ModelCell(
                task_id=task,
                source=source,
                attempt="a1",
                status="error" if failed else "ok",
                audit_failure=failed,
                usage={"input_tokens": 10, "output_tokens": 5},
                cost_usd=COSTS[source] / 4,
                n_findings=sum(1 for t, _, _ in items if t == task),
            )
            run.records("audits").append(cell.as_record())
    run.close()
    return path


@pytest.fixture
def scored(tmp_path: Path):
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps(GOLD), encoding="utf-8")
    run = _run(tmp_path)
    return run, score_run(run, gold, CATEGORY_JUDGE)


def test_pooled_rules_match_the_hand_computation(scored) -> None:
    _, report = scored
    # Per gold issue, models with an ALIGNED finding / with ALIGNED or PARTIAL:
    #   g1: m1 A, m2 A, m3 P -> 2 / 3     g2: m2 A -> 1 / 1     g3: m3 A, m1 P, m2 P -> 1 / 3
    #   g4: m1 A, m3 P (m2 did not audit T3) -> 1 / 2           g5: nobody -> 0 / 0
    expected = {  # row: (recalled exact, recalled with partials) of 5 gold issues
        "pooled union": (4, 4),  # g1 g2 g3 g4
        "pooled >=2": (1, 3),  # exact: g1; partials: g1 g3 g4
        "pooled >=3": (0, 2),  # partials: g1 g3
    }
    for name, (exact, loose) in expected.items():
        row = report.row(name)
        assert row.kind == "pooled"
        assert (row.recalled_a, row.recalled_ap) == (exact, loose), name
        assert row.recall_a == pytest.approx(exact / 5) and row.recall_ap == pytest.approx(
            loose / 5
        )
        # pooled without merging: every model's findings, summed
        assert row.n_findings == 4 + 3 + 3 and row.n_suppressed == 1
        assert row.n_findings_defective == 3 + 3 + 3
        assert row.cost_usd == pytest.approx(0.40)  # the sum of the three models' costs
    union = report.row("pooled union")
    # aligned pooled findings on defective tasks: m1 2 (T1, T3), m2 2 (T1 x2), m3 1 (T2)
    assert union.precise_a == 5 and union.precision_a == pytest.approx(5 / 9)
    assert union.precise_ap == 9 and union.precision_ap == pytest.approx(1.0)
    assert report.row("pooled >=2").precision_a is None  # the rule selects issues, not findings
    marks = {d.issue_id: d.best["pooled >=2"] for d in report.issues}
    assert marks == {"g1": "ALIGNED", "g2": None, "g3": "PARTIAL", "g4": "PARTIAL", "g5": None}


def test_single_models_and_merged_view_sit_beside_the_pooled_rows(scored) -> None:
    run, report = scored
    names = [r.name for r in report.rows]
    assert names[:3] == ["p/m1", "p/m2", "p/m3"]
    assert {"merged any", "merged >=2", "merged >=3", "all sources (any)"} <= set(names)
    assert names[-4:] == ["pooled union", "pooled >=2", "pooled >=3", "all sources (any)"]
    m1 = report.row("p/m1")
    assert (m1.recalled_a, m1.recalled_ap, m1.n_suppressed) == (2, 3, 1)
    assert report.row("merged any").n_suppressed == 1  # the real count, not 0
    assert report.row("merged any").cost_usd == pytest.approx(0.40)
    score_md = (run / "score.md").read_text(encoding="utf-8")
    assert "| pooled &gt;=2 | 20.0 | 60.0 | n/a | n/a | 9 | 0.40 |" in score_md
    assert "paper's rule" in score_md and "merge findings" in score_md
    saved = json.loads((run / "score.json").read_text(encoding="utf-8"))
    assert [r["name"] for r in saved["rows"]][-2] == "pooled >=3"


def test_gold_tasks_outside_the_run_or_unaudited_are_warned_about(scored) -> None:
    run, report = scored
    warnings = report.warnings
    assert any("not in this run" in w and "T9" in w for w in warnings)
    assert any(w.startswith("p/m2 did not audit 1 gold task") and "T3" in w for w in warnings)
    assert not any(w.startswith(("p/m1", "p/m3")) for w in warnings)
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "p/m2 did not audit" in html and "pooled union" in html


def test_paper_tables_by_subcategory_protocol_and_cost_per_task(scored) -> None:
    run, _ = scored
    saved = json.loads((run / "score.json").read_text(encoding="utf-8"))["tables"]
    # Table 6 shape, reported findings only (m1's 0.2-confidence finding is not one):
    assert saved["by_subcategory"] == {
        "INST-INCOMPLETE": {"p/m1": 1, "p/m2": 1},
        "INST-CONTRADICT": {"p/m1": 1, "p/m3": 1},
        "GT-LOGIC": {"p/m2": 1},
        "EVAL-MISMATCH": {"p/m3": 1},
        "EVAL-COVERAGE": {"p/m1": 1, "p/m2": 1},
        "ENV-DEP": {"p/m1": 1},
        "ENV-RESOURCE": {"p/m3": 1},
    }
    # m3 audited at the execution level, m1 and m2 at the definition level
    assert saved["by_protocol"] == {
        "p/m1": {"definition": 4, "execution": 0},
        "p/m2": {"definition": 3, "execution": 0},
        "p/m3": {"definition": 0, "execution": 3},
    }
    # four final cells each (m2's failed one cost too); 15 tokens per cell
    assert [(c["source"], c["tasks"]) for c in saved["costs"]] == [
        ("p/m1", 4),
        ("p/m2", 4),
        ("p/m3", 4),
    ]
    score_md = (run / "score.md").read_text(encoding="utf-8")
    assert "| Total | 4 | 3 | 3 | 10 |" in score_md
    assert "| p/m2 | 4 | 0.25 | 0.06 | 15 |" in score_md  # 0.25 / 4 = 0.0625
    report_md = (run / "report.md").read_text(encoding="utf-8")
    head = report_md.split("## Findings", 1)[0]  # the headline, before any table
    assert "Scores: Recall_A 80.0%, Recall_A+P 80.0%, Precision_A 55.6%" in head
    assert "(row: pooled union)" in head
    assert "Definition-level vs execution-level" in report_md
    html = (run / "report.html").read_text(encoding="utf-8")
    assert html.index('id="score-headline"') < html.index('id="findings-table"')
    assert 'id="by-subcategory"' in html and 'id="cost-per-task"' in html
