"""Every number in a page's headline comes from the same computation as the tables on that
page. Build-and-find: a run with a reference finder and a scored finder whose formal runs
time out; the cards equal Table 1 (all finders) and the scored figure says why it is n/a.
Improve: the cards and the report's summary count what the trials table lists. Audit: the
cards count the findings table's rows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from metaeval.protocols.buildfind.cells import context as context_module
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.finalize import run_and_finalize
from test_buildfind_timeout_not_retried import PACK, CutOff
from test_view import BENCH, Viewer, cli, runs, start_viewer, stop  # noqa: F401 - fixture


def cells(row: str) -> list[str]:
    return [
        re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)
    ]


def table(html: str, table_id: str) -> list[list[str]]:
    found = re.search(rf'<table[^>]*id="{table_id}"[^>]*>(.*?)</table>', html, re.S)
    assert found, table_id
    return [cells(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.S)]


@pytest.fixture(scope="module")
def timed_out_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("headlines")
    config_path = root / "run.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "pack": str(PACK),
                "tasks": ["http-router"],
                "builders": [{"name": "documented", "agent": "reference:documented"}],
                "finders": [
                    {"name": "ref", "agent": "reference-finder"},
                    {"name": "model", "agent": "claude-code"},
                ],
                "r_build": 1,
                "r_find": 1,
                "controls": ["question_only"],
            }
        )
    )
    real_make_agent = context_module.make_agent

    def make_agent(spec, role):
        if spec.name != "model":
            return real_make_agent(spec, role)
        # the scored finder answers as the reference finder does, but its formal runs
        # time out (the control is answered)
        return CutOff(real_make_agent(spec.model_copy(update={"agent": "reference-finder"}), role))

    patch = pytest.MonkeyPatch()
    patch.setattr(context_module, "make_agent", make_agent)
    try:
        run_and_finalize(load_config(config_path), root / "runs" / "bf-timeout")
    finally:
        patch.undo()
    yield root / "runs"


@pytest.mark.bwrap
def test_buildfind_cards_equal_table_1_and_say_why_a_figure_is_na(timed_out_run: Path) -> None:
    v = start_viewer(str(timed_out_run))
    try:
        html = v.page(f"/run/{v.run_id('bf-timeout')}")
    finally:
        stop(v)
    table1 = {row[0]: row for row in table(html, "table-paper_table1")[1:]}
    header = table(html, "table-paper_table1")[0]
    accuracy = header.index("Accuracy")
    cards = dict(re.findall(r'data-figure="([^"]+)"><div class="big" data-all>([^<]+)</div>', html))
    # all finders: the same figure as Table 1's Accuracy for the slice
    assert cards["formal recovery"] == table1["Compile-pass primary"][accuracy]
    assert cards["question-only accuracy"] == table1["Question-only"][accuracy]
    assert "'" not in "".join(table1["Question-only"])  # no CSV formula guard on the page
    # scored finders only (the reference finder left out): formal is n/a, and says why
    formal = re.search(r'data-figure="formal recovery">(.*?)<div class="card', html, re.S).group(1)
    assert "ref left out" in formal and "<b data-scored>n/a</b>" in formal
    assert "n/a: no scored find run on this slice (1 timeout)" in formal
    assert "1 timeout" in re.search(r'id="failed-cells">(.*?)</p>', html, re.S).group(1)
    grid = table(html, "grid")
    assert grid[1][grid[0].index("model")] == "no scored run: 1 timeout"  # not "no runs"
    # one find trial per cell: Table 2 names its own trial count and explains the n/a
    assert "1-trial agreement" in html and "3-trial agreement" not in html
    assert "r_find: 1" in html


@pytest.mark.bwrap
def test_improve_cards_and_report_summary_count_the_trials_table(runs) -> None:  # noqa: F811
    v = start_viewer(str(runs["root"]))
    try:
        html = v.page(f"/run/{v.run_id('improve-demo')}")
    finally:
        stop(v)
    rows = table(html, "trials")[1:]
    decisions = [row[2] for row in rows]
    promoted = re.search(r'<div class="big">([^<]+)</div>promotions of (\d+) trials', html)
    assert promoted and int(promoted.group(1)) == decisions.count("promoted")
    assert int(promoted.group(2)) == len(rows)
    # the bundle's own report.html: its summary pairs each label with its value
    report = (runs["improve"] / "report.html").read_text()
    summary = dict(re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", report))
    body = re.search(r'<h2 id="trials-table">Trials</h2>\s*<table>(.*?)</table>', report, re.S)
    listed = [cells(r) for r in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)][1:]
    trials = [r for r in listed if r[2] != "baseline"]
    assert summary["Trials"].startswith(f"{len(trials)} of ")
    assert summary["Promotions"] == str(sum(r[2] == "promoted" for r in trials))
    assert "display: grid" in report  # labels and values on one grid row each


@pytest.mark.bwrap
def test_audit_cards_count_the_findings_table(runs) -> None:  # noqa: F811
    v = start_viewer(str(runs["root"]))
    try:
        html = v.page(f"/run/{v.run_id('audit-a')}")
    finally:
        stop(v)
    rows = table(html, "findings-table")[1:]
    reported = re.search(r'<div class="big">(\d+)</div>findings reported(?: \((\d+) below)?', html)
    # the table lists the reported findings and those below the report threshold
    assert int(reported.group(1)) + int(reported.group(2) or 0) == len(rows) > 0
    for severity in ("Critical", "High", "Medium", "Low"):
        card = re.search(rf'card sev-{severity}"><div class="big">(\d+)</div>', html)
        assert int(card.group(1) if card else 0) == sum(r[0] == severity for r in rows)
    header = table(html, "findings-table")[0]
    tiers = {r[header.index("evidence tier")] for r in rows}
    assert tiers and tiers <= {"executed", "self-contained", "assumed"}
