"""The review loop on a real audit run: `audit review` writes the sheet, a person edits it,
`audit score` reports precision against the reviewed findings, `--to-gold` writes a gold file
that the next `audit score` counts in recall; bad sheets are named by file, row and column."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.gold import load_gold
from metaeval.protocols.audit.review import COLUMNS, ReviewRow, finding_id, read_sheet
from metaeval.protocols.audit.review_results import gold_issues, summarize

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "examples" / "audit-bench"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args], capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Static checks on two seeded tasks: one finding each (row-count: ENV-PATH, Critical;
    sales-revenue: INST-CONTRADICT, High)."""
    run = tmp_path_factory.mktemp("review") / "a"
    done = cli(
        "audit", "run", str(BENCH), "--static-only", "-o", str(run),
        "--task", "sales-revenue", "--task", "row-count",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return run


@pytest.fixture
def run(audited: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "a"
    shutil.copytree(audited, copy)
    return copy


def sheet(run: Path) -> list[dict[str, str]]:
    with open(run / "review.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def save(run: Path, rows: list[dict[str, str]], header: list[str] | None = None) -> None:
    with open(run / "review.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header or list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def verdict(rows: list[dict[str, str]], task: str, value: str, note: str = "") -> None:
    row = next(r for r in rows if r["task"] == task)
    row["verdict"], row["note"] = value, note


@pytest.mark.bwrap
def test_review_to_gold_and_score_round_trip(run: Path, tmp_path: Path) -> None:
    done = cli("audit", "review", str(run))
    assert done.returncode == 0, done.stderr
    rows = sheet(run)
    assert list(rows[0]) == list(COLUMNS)
    assert {
        (r["task"], r["subcategory"], r["severity"], r["source"], r["verdict"]) for r in rows
    } == {
        ("row-count", "ENV-PATH", "Critical", "static", ""),
        ("sales-revenue", "INST-CONTRADICT", "High", "static", ""),
    }
    # the person confirms one, rejects the other (a note with a comma and quotes survives)
    verdict(rows, "row-count", "Confirmed", 'real: "/home/alice" is not in the image, see log')
    verdict(rows, "sales-revenue", "rejected", "the instruction names both files")
    save(run, rows)
    # writing the sheet again keeps what the person wrote
    assert cli("audit", "review", str(run)).returncode == 0
    again = {r["task"]: r for r in sheet(run)}
    assert again["row-count"]["verdict"] == "confirmed"
    assert again["row-count"]["note"] == 'real: "/home/alice" is not in the image, see log'
    assert again["sales-revenue"]["verdict"] == "rejected"

    gold = tmp_path / "gold.json"
    done = cli("audit", "review", str(run), "--to-gold", str(gold))
    assert done.returncode == 0, done.stderr
    assert "1 confirmed finding(s) added, 1 issue(s) in the file" in done.stdout
    parsed = load_gold(gold)
    [issue] = parsed.all_issues()
    assert (issue.task_id, issue.category, issue.id) == (
        "row-count",
        "ENV-PATH",
        again["row-count"]["finding_id"],
    )
    assert "/home/alice/data/input.csv" in issue.description
    assert "reviewer: real:" in issue.evidence
    # a second --to-gold adds nothing (the id is there already)
    done = cli("audit", "review", str(run), "--to-gold", str(gold))
    assert "0 confirmed finding(s) added, 1 issue(s) in the file" in done.stdout

    done = cli("audit", "score", str(run), "--gold", str(gold), "--judge", "category")
    assert done.returncode == 0, done.stderr
    score = json.loads((run / "score.json").read_text())
    static = next(r for r in score["rows"] if r["name"] == "static")
    # recall: the one gold issue (the confirmed finding) is found by the same finding;
    # flagged-task precision: 1 finding on the one defective task, aligned
    assert (static["n_gold"], static["recalled_a"], static["recall_a"]) == (1, 1, 1.0)
    assert (static["n_findings_defective"], static["precise_a"]) == (1, 1)
    # precision against the reviewed findings: 1 confirmed of 2 judged
    [reviewed] = score["review"]["rows"]
    assert (reviewed["name"], reviewed["confirmed"], reviewed["rejected"]) == ("static", 1, 1)
    assert reviewed["precision"] == 0.5
    md = (run / "score.md").read_text()
    assert "## Precision against the reviewed findings" in md
    assert "| static | 2 | 1 | 1 | 0 | 0 | 50.0 |" in md
    html = (run / "report.html").read_text()
    assert 'id="score-review"' in html and '<td class="num">50.0</td>' in html


@pytest.mark.bwrap
def test_a_bad_verdict_names_file_row_and_column(run: Path, tmp_path: Path) -> None:
    assert cli("audit", "review", str(run)).returncode == 0
    rows = sheet(run)
    rows[1]["verdict"] = "yes"
    save(run, rows)
    before = (run / "review.csv").read_bytes()
    for args in (
        ("audit", "score", str(run), "--gold", str(BENCH / "gold.json"), "--judge", "category"),
        ("audit", "review", str(run), "--to-gold", str(tmp_path / "g.json")),
        ("audit", "review", str(run)),
    ):
        done = cli(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert f"{run / 'review.csv'}: field 'row 3, column verdict'" in done.stderr
        assert "unknown verdict 'yes'" in done.stderr
    assert (run / "review.csv").read_bytes() == before  # the person's sheet is left as it was
    assert not (tmp_path / "g.json").exists()
    # a sheet without the verdict column
    save(run, [{k: v for k, v in r.items() if k != "verdict"} for r in rows],
         [c for c in COLUMNS if c != "verdict"])  # fmt: skip
    done = cli("audit", "review", str(run))
    assert done.returncode == 2 and "field 'row 1'" in done.stderr
    assert "missing column(s) verdict" in done.stderr


def finding(source: str, line: int, title: str, task: str = "t1") -> Finding:
    return Finding(
        task_id=task,
        category="ENV",
        subcategory="ENV-PATH",
        severity="High",
        finding_type="Bug",
        title=title,
        description="reads /data/x.csv",
        evidence=[Evidence(file="solution/solve.sh", line_start=line, line_end=line)],
        confidence=0.9,
        source=source,
        protocol="definition",
    )


def test_reviewed_precision_and_gold_from_two_sources() -> None:
    # model a and b report the same defect (same file and line: the ensemble merges them);
    # a also reports one on t2 that the reviewer rejects; b one that is left unsure
    fa, fb = finding("m/a", 5, "path A"), finding("m/b", 5, "path B")
    fa2, fb2 = finding("m/a", 9, "other", "t2"), finding("m/b", 20, "third", "t2")
    rows = {
        finding_id(fa): "confirmed",
        finding_id(fb): "confirmed",
        finding_id(fa2): "rejected",
        finding_id(fb2): "unsure",
    }
    given = {
        k: ReviewRow(k, "", "", "", "", "", "", verdict=v, note=f"n-{v}") for k, v in rows.items()
    }
    summary = summarize([fa, fb, fa2, fb2], given, "review.csv")
    got = {r.name: (r.confirmed, r.rejected, r.unsure, r.precision) for r in summary.rows}
    assert got == {
        "m/a": (1, 1, 0, 0.5),
        "m/b": (1, 0, 1, 1.0),
        "all sources": (2, 1, 1, 2 / 3),
    }
    issues = gold_issues([fa, fb, fa2, fb2], given)
    assert list(issues) == ["t1"] and len(issues["t1"]) == 1  # one defect, one gold issue
    assert issues["t1"][0]["evidence"] == "solution/solve.sh:5 | reviewer: n-confirmed"


def test_read_sheet_rejects_duplicate_ids(tmp_path: Path) -> None:
    path = tmp_path / "review.csv"
    line = "F-1,t,ENV-PATH,High,executed,static,x,,\n"
    path.write_text(",".join(COLUMNS) + "\n" + line + line)
    with pytest.raises(ConfigError) as err:
        read_sheet(path)
    assert "row 3, column finding_id" in str(err.value) and "also row 2" in str(err.value)
