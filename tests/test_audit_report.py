"""Audit report: Markdown and self-contained HTML."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from metaeval.protocols.audit.findings import SUBCATEGORIES, Finding
from metaeval.protocols.audit.gold import GoldIssue, parse_gold
from metaeval.protocols.audit.judge import Verdict
from metaeval.protocols.audit.report import (
    HTML_TEMPLATE,
    TEMPLATE_PACKAGE,
    AuditReportData,
    CostRow,
    TaskEntry,
    cost_totals,
    render_html,
)
from metaeval.protocols.audit.report_markdown import render_markdown
from metaeval.protocols.audit.score_report import ScoreReport
from metaeval.protocols.audit.scoring import score

XSS = "<script>alert('pwned')</script>"


def finding(task: str, title: str, severity: str, confidence: float, **kw: Any) -> Finding:
    sub = kw.pop("subcategory", "INST-INCOMPLETE")
    return Finding(
        **{
            "task_id": task,
            "category": SUBCATEGORIES[sub],
            "subcategory": sub,
            "severity": severity,
            "finding_type": "Bug",
            "title": title,
            "description": f"Description of {title}.",
            "recommendation": f"Fix {title}.",
            "confidence": confidence,
            "source": "local/smollm2",
            "protocol": "definition",
            **kw,
        }
    )


def sample_findings() -> list[Finding]:
    return [
        finding("t2", "Low one", "Low", 0.5),
        finding(
            "t1",
            "Critical one",
            "Critical",
            0.95,
            subcategory="EVAL-MISMATCH",
            evidence=[
                {"file": "tests/test.py", "line_start": 7, "line_end": 9, "snippet": XSS},
                {"file": "instruction.md", "line_start": 2, "snippet": "one ``` three"},
            ],
            evidence_verified=True,
            sources=["local/smollm2", "static"],
        ),
        finding("t1", "Medium one", "Medium", 0.6, evidence_verified=False),
        finding("t2", "High one", "High", 0.35, evidence_problems=["line 99 out of range"]),
        finding("t1", "Hidden low confidence", "High", 0.2),
        finding("t2", "Also hidden", "Critical", 0.1),
    ]


def sample_data(score_report: ScoreReport | None = None, **kw: Any) -> AuditReportData:
    base: dict[str, Any] = {
        "benchmark": "benchmarks/demo",
        "run_id": "run-2026-01-01",
        "models": ["local/smollm2"],
        "tier": "definition",
        "tasks": [
            TaskEntry(
                task_id="t1",
                n_files=4,
                cuts=["data/big.csv cut to 2000 bytes"],
                oracle="pass",
                null_agent="fail",
            ),
            TaskEntry(
                task_id="t2",
                n_files=3,
                audit_failures={"local/smollm2": "output not valid JSON"},
                oracle="skipped",
            ),
            TaskEntry(task_id="t3", status="skipped", skip_reason="no task.toml"),
        ],
        "findings": sample_findings(),
        "costs": [
            CostRow(
                task_id="t1",
                source="local/smollm2",
                input_tokens=1000,
                output_tokens=200,
                cost_usd=None,
            ),
            CostRow(
                task_id="t1", source="openai/x", input_tokens=10, output_tokens=5, cost_usd=0.25
            ),
            CostRow(
                task_id="t2", source="openai/x", input_tokens=20, output_tokens=5, cost_usd=0.5
            ),
        ],
        "score": score_report,
    }
    return AuditReportData(**{**base, **kw})


class _Judge:
    model_name = "fake/judge"

    def judge(self, gold_issue: GoldIssue, finding: Finding) -> Verdict:
        verdict = "ALIGNED" if finding.title == "Critical one" else "UNRELATED"
        return Verdict(verdict=verdict, reasoning="r")  # type: ignore[arg-type]


def sample_score() -> ScoreReport:
    gold = parse_gold(
        json.dumps(
            {
                "tasks": {
                    "t1": {
                        "issues": [
                            {
                                "id": "g1",
                                "description": "eval mismatch",
                                "category": "EVAL-MISMATCH",
                            }
                        ]
                    }
                }
            }
        )
    )
    return score({"local/smollm2": sample_findings()}, gold, _Judge(), {"local/smollm2": None})


@pytest.fixture
def html() -> str:
    return render_html(sample_data(sample_score()))


def findings_table(html: str) -> str:
    match = re.search(r'<table id="findings-table".*?</table>', html, re.DOTALL)
    assert match is not None
    return match.group(0)


def test_template_is_package_data() -> None:
    resource = resources.files(TEMPLATE_PACKAGE) / HTML_TEMPLATE
    assert resource.is_file()
    assert "{{" in resource.read_text(encoding="utf-8")


def test_html_findings_table_is_sortable_by_severity_and_confidence(html: str) -> None:
    table = findings_table(html)
    assert 'data-sort-key="severity"' in table and 'data-sort-key="confidence"' in table
    assert 'data-sort-type="number"' in table
    # Severity sorts by rank (Critical=0 ... Low=3), never alphabetically.
    ranks = re.findall(r'<td data-sort="(\d)"><span class="sev sev-(\w+)">', table)
    assert ranks == [("0", "Critical"), ("1", "High"), ("2", "Medium"), ("3", "Low")]
    assert re.findall(r'class="num" data-sort="([0-9.]+)"', table) == [
        "0.9500",
        "0.3500",
        "0.6000",
        "0.5000",
    ]
    assert "0.95 (Confirmed)" in table and "0.35 (Possible)" in table
    assert "local/smollm2, static" in table  # sources
    for header in ("Task", "Subcategory", "Severity", "Type", "Confidence", "Title"):
        assert f">{header}</th>" in table
    assert ">Evidence verified</th>" in table
    assert ">yes<" in table and ">no<" in table and ">unchecked<" in table
    assert "addEventListener" in html  # the inline sort script


def test_html_escapes_snippets(html: str) -> None:
    assert XSS not in html
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in html
    assert html.count("<script>") == 1  # only our own inline script


def test_html_task_sections_show_evidence_and_recommendation(html: str) -> None:
    assert "tests/test.py:7-9" in html and "instruction.md:2" in html
    assert "Description of Critical one." in html
    assert "Fix Critical one." in html
    assert "Evidence problem: line 99 out of range" in html
    assert "data/big.csv cut to 2000 bytes" in html
    assert "output not valid JSON" in html
    assert "oracle pass, null agent fail" in html
    assert "skipped (no task.toml)" in html


def test_html_suppressed_findings_left_out_but_counted(html: str) -> None:
    assert "Hidden low confidence" not in html and "Also hidden" not in html
    assert "2 low-confidence findings suppressed, kept in findings.jsonl" in html


def test_html_costs_unknown_and_incomplete_total(html: str) -> None:
    cost = re.search(r'<table id="cost-table".*?</table>', html, re.DOTALL)
    assert cost is not None
    assert '<td class="num">n/a</td>' in cost.group(0)
    # Known costs 0.25 + 0.50; the unknown one is not summed as 0 and the total says so.
    assert ">= 0.75 (incomplete: 1 unknown)" in html.replace("&gt;", ">")
    assert "Total is incomplete" in html


def test_html_score_tables(html: str) -> None:
    assert '<table id="score-table">' in html
    assert "<th>Recall_A+P</th>" in html and "<th>Precision_A+P</th>" in html
    assert '<td>local/smollm2</td><td class="num">100.0</td>' in html
    assert '<table id="score-categories">' in html and "EVAL-MISMATCH" in html


def test_html_is_self_contained(html: str) -> None:
    for attr in re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', html):
        assert attr.startswith("#"), attr
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html and "@import" not in html
    assert "<style>" in html


def test_html_without_score_or_findings() -> None:
    data = sample_data(None, findings=[], costs=[])
    html = render_html(data)
    assert "score-table" not in html
    assert "No findings at or above the report threshold." in html
    assert "0 low-confidence findings suppressed" in html
    assert "Total is incomplete" not in html


def test_suppressed_count_adds_findings_kept_elsewhere() -> None:
    data = sample_data(None, suppressed_count=3)
    assert data.n_suppressed == 5
    assert "5 low-confidence findings suppressed, kept in findings.jsonl" in render_markdown(data)


def test_markdown_report() -> None:
    md = render_markdown(sample_data(sample_score()))
    assert md.startswith("# Benchmark audit: benchmarks/demo")
    assert (
        "| Task | Subcategory | Severity | Type | Evidence | Confidence | Title | Sources | Evidence verified |"
        in md
    )
    rows = [line for line in md.splitlines() if line.startswith("| t") and "(Confirmed)" in line]
    assert rows and "Critical one" in rows[0]
    severities = re.findall(r"^\| t\d \| [A-Z-]+ \| (\w+) \|", md, re.MULTILINE)
    assert severities == ["Critical", "High", "Medium", "Low"]
    assert "2 low-confidence findings suppressed, kept in findings.jsonl" in md
    assert "Hidden low confidence" not in md
    assert "`tests/test.py:7-9`" in md
    assert "````\none ``` three\n````" in md  # fence longer than any run in the snippet
    assert "| t1 | local/smollm2 | 1000 | 200 | n/a |" in md
    assert ">= 0.75 (incomplete: 1 unknown)" in md
    assert "| Row | Recall_A | Recall_A+P | Precision_A | Precision_A+P | Find. | Cost ($) |" in md
    assert "| local/smollm2 | 100.0 | 100.0 | 50.0 | 50.0 | 2 | n/a |" in md
    assert "### Recall per gold category" in md


def test_cost_totals() -> None:
    known = cost_totals([CostRow(task_id="a", source="s", cost_usd=0.25)] * 2)
    assert known.complete and known.cost_text() == "0.50"
    unknown = cost_totals([CostRow(task_id="a", source="s", input_tokens=5)] * 2)
    assert not unknown.complete and unknown.input_tokens == 10
    assert unknown.cost_text() == "n/a (incomplete: 2 unknown)"
