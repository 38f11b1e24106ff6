"""The static build-and-find report agrees with itself: on a run with a reference finder and
a scored finder whose formal run timed out, report.html's headline equals Table 1 and the
claim map (all finders), its scored-finder figures are summary.json's and say why they are
n/a, and Table 2 and the claim map name the run's own find trials (r_find: 1)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from test_view_headlines import cells, timed_out_run  # noqa: F401 - fixture

CLAIM_OF_ROW = {
    "Compile-pass primary": "accuracy.compile_pass",
    "Question-only": "accuracy.question_only",
}


def rows_of(html: str, pattern: str) -> list[list[str]]:
    found = re.search(pattern, html, re.S)
    assert found, pattern
    return [cells(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S)]


def keyed(rows: list[list[str]]) -> tuple[list[str], dict[str, list[str]]]:
    return rows[0], {row[0]: row for row in rows[1:]}


@pytest.mark.bwrap
def test_report_headline_equals_table_1_and_the_claim_map(timed_out_run: Path) -> None:  # noqa: F811
    run = timed_out_run / "bf-timeout"
    html = (run / "report.html").read_text()
    summary = json.loads((run / "summary.json").read_text())
    head, headline = keyed(rows_of(html, r'<table id="headline-table">(.*?)</table>'))
    t1_head, table1 = keyed(
        rows_of(html, r'<section id="table-paper_table1">.*?<table>(.*?)</table>')
    )
    # Table 1 names what it includes: the pooled pairs and the reference finder
    section = re.search(r'<section id="table-paper_table1">(.*?)</section>', html, re.S).group(1)
    assert "Pairs: pooled over every formal pair" in section
    assert "the reference finder(s) ref included" in section
    c_head, claim_map = keyed(rows_of(html, r'<table id="claims-table">(.*?)</table>'))
    every = head.index("all finders (as Table 1 and the claim map)")
    scored = head.index("scored finders (ref left out)")  # names what it leaves out
    row_of = head.index("Table 1 row")
    compared = 0
    for figure, row in headline.items():
        if row[row_of] not in table1:
            assert row[every].startswith("n/a: no find run on this slice"), figure
            continue
        # all finders: Table 1's accuracy and the claim map's value, one computation
        assert row[every] == table1[row[row_of]][t1_head.index("Accuracy")], figure
        claim = claim_map[CLAIM_OF_ROW[row[row_of]]][c_head.index("value")]
        assert row[every] == f"{100 * float(claim):.1f}%", figure
        compared += 1
    assert compared == 2
    # the scored figures are summary.json's (reference finder left out); n/a says why
    assert summary["formal_recovery"] is None
    assert headline["formal recovery"][scored] == (
        "n/a: no scored find run on this slice (1 timeout)"
    )
    assert headline["formal recovery"][every] == "100.0%"  # the reference finder's run
    assert headline["question-only accuracy"][scored] == (
        f"{100 * summary['question_only_accuracy']:.1f}%"
    )
    # Table 2 and the claim map name the run's one find trial and say why agreement is n/a
    t2_head, table2 = keyed(
        rows_of(html, r'<section id="table-paper_table2">.*?<table>(.*?)</table>')
    )
    assert "1-trial agreement" in t2_head and "3-trial agreement" not in html
    assert {r[t2_head.index("1-trial agreement")] for r in table2.values()} == {"n/a"}
    assert "one find trial per cell (r_find: 1)" in html
    repeat = claim_map["repeatability.formal"]
    assert repeat[c_head.index("value")] == "n/a" and "1-trial" in repeat[c_head.index("figure")]
    # the summary no longer quotes a headline figure without saying what it includes
    summary_list = re.search(r'<dl class="summary">(.*?)</dl>', html, re.S).group(1)
    assert "formal recovery" not in summary_list
    # a control's build trial (-1 in the rows) reads as a control on the page
    r_head, *runs = rows_of(html, r'<section id="table-run_accuracy">.*?<table>(.*?)</table>')
    controls = [r for r in runs if r[r_head.index("slice")] == "question_only"]
    assert controls and {r[r_head.index("build_trial")] for r in controls} == {"– (control)"}
    markdown = (run / "report.md").read_text()
    assert "| formal recovery | 100.0% | n/a: no scored find run on this slice (1 timeout) |" in (
        markdown
    )
    assert "3-trial agreement" not in markdown
