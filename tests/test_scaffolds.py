"""`audit init` and `buildfind init`: what they write is what docs/formats/ shows, passes the
loaders and the shipped schemas, and runs end to end through the real command line
(bubblewrap sandboxes, real git, the reference agents); the console points at the next step."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from metaeval.protocols.audit.gold import load_gold
from metaeval.protocols.audit.scaffold import FILES as AUDIT_FILES
from metaeval.protocols.audit.task_view import load_benchmark
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.pack.load import load_pack
from metaeval.protocols.buildfind.pack.scaffold import FILES as BF_FILES

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "docs" / "schemas"
FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```\n", re.DOTALL)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


def doc_blocks(page: str) -> dict[str, str]:
    return dict(FILE_BLOCK.findall((ROOT / "docs" / "formats" / page).read_text()))


@pytest.mark.parametrize(
    ("page", "files", "least"),
    [("audit-benchmark.md", AUDIT_FILES, 6), ("buildfind.md", BF_FILES, 5)],
)
def test_docs_show_exactly_what_init_writes(page: str, files: dict, least: int) -> None:
    blocks = doc_blocks(page)
    assert len(blocks) >= least
    for name, text in blocks.items():
        assert text == files[name], name


def validate(schema_name: str, data: object) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((SHIPPED / f"{schema_name}.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)


def test_audit_scaffold_passes_the_loader_and_schema(tmp_path: Path) -> None:
    assert cli("audit", "init", "bench", cwd=tmp_path).returncode == 0
    bench = tmp_path / "bench"
    gold = load_gold(bench / "gold.json")
    assert [(i.task_id, i.category) for i in gold.all_issues()] == [("csv-total", "EVAL-MISMATCH")]
    assert gold.tasks["line-count"] == []  # a known-clean task
    validate("audit-gold", json.loads((bench / "gold.json").read_text()))
    tasks, skipped = load_benchmark(bench)
    assert skipped == []
    assert sorted(t.task_id for t in tasks) == ["csv-total", "line-count"]
    for task in tasks:
        assert task.config_error is None and not task.unknown_keys and not task.missing_files
    assert (bench / "line-count" / "tests" / "test.sh").stat().st_mode & 0o111


def test_init_refuses_a_directory_that_holds_files(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "mine.txt").write_text("keep me\n")
    for protocol in ("audit", "buildfind"):
        result = cli(protocol, "init", "bench", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "bench: exists and is not an empty directory" in result.stderr
    assert sorted(p.name for p in (tmp_path / "bench").iterdir()) == ["mine.txt"]


@pytest.mark.bwrap
def test_audit_scaffold_runs_end_to_end(tmp_path: Path) -> None:
    assert cli("audit", "init", "bench", cwd=tmp_path).returncode == 0
    run = cli("audit", "run", "bench", "--static-only", "-o", "runs/a", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    # gold.json sits beside the benchmark: the console names the scoring command
    assert (
        "known issues beside the benchmark: metaeval audit score runs/a --gold bench/gold.json "
        "--judge category (a rule judge, no model; or --judge provider/model)" in run.stdout
    )
    audits = [json.loads(line) for line in (tmp_path / "runs/a/audits.jsonl").open()]
    by_task = {a["task_id"]: a["execution"] for a in audits}
    # both solutions are right for their own checker; doing nothing fails both
    for task in ("line-count", "csv-total"):
        assert by_task[task]["oracle"]["reward"] == 1.0
        assert by_task[task]["null_agent"]["reward"] == 0.0
    findings = [json.loads(line) for line in (tmp_path / "runs/a/findings.jsonl").open()]
    assert {(f["task_id"], f["subcategory"]) for f in findings} == {("csv-total", "EVAL-MISMATCH")}
    score = cli(
        "audit", "score", "runs/a", "--gold", "bench/gold.json", "--judge", "category", cwd=tmp_path
    )
    assert score.returncode == 0, score.stderr
    assert "| EVAL-MISMATCH | 1 | 100.0 | 100.0 |" in score.stdout


def test_buildfind_scaffold_passes_the_loaders_and_schema(tmp_path: Path) -> None:
    assert cli("buildfind", "init", "bf", cwd=tmp_path).returncode == 0
    config = load_config(tmp_path / "bf" / "run.yaml")
    assert config.pack.resolve() == (tmp_path / "bf" / "pack").resolve()
    validate("buildfind-config", yaml.safe_load((tmp_path / "bf" / "run.yaml").read_text()))
    pack = load_pack(tmp_path / "bf" / "pack")
    task = pack.task("slugify")
    assert [q.gold for q in task.questions] == ["A", "C", "B"]
    assert len(task.spec.items) == 4


def doc_labels() -> dict[tuple[str, str], str]:
    """(builder, question id) -> label, from the CSV block of docs/formats/buildfind.md."""
    text = (ROOT / "docs" / "formats" / "buildfind.md").read_text()
    block = text.split("```csv\n", 1)[1].split("```", 1)[0]
    return {
        (r["builder"], r["question_id"]): r["label"] for r in csv.DictReader(block.splitlines())
    }


def test_documented_labels_are_the_hand_labels() -> None:
    # by reading the repositories: divergent returns "" for "!!!" (option A, not gold C) and
    # has no max_length; documented implements the whole spec
    assert doc_labels() == {
        ("divergent", "q01"): "implemented_gold",
        ("divergent", "q02"): "implemented_non_gold",
        ("divergent", "q03"): "absent_ambiguous",
        ("documented", "q01"): "implemented_gold",
        ("documented", "q02"): "implemented_gold",
        ("documented", "q03"): "implemented_gold",
    }


def fill_labels(review: Path, labels: dict[tuple[str, str], str]) -> None:
    with review.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["label"] = labels[(row["builder"], row["question_id"])]
        row["reviewer"] = "test"
    with review.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.bwrap
def test_buildfind_scaffold_runs_end_to_end_and_labels(tmp_path: Path) -> None:
    assert cli("buildfind", "init", "bf", cwd=tmp_path).returncode == 0
    valid = cli("buildfind", "validate", "bf/pack", cwd=tmp_path)
    assert valid.returncode == 0
    assert "bf/pack: ok (1 task(s), 4 spec item(s), 3 question(s))" in valid.stdout
    run = cli("buildfind", "run", "bf/run.yaml", "-o", "runs/bf", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    # 2 builders x 1 build trial x 3 questions, no base finders: all 6 pairs wait for a person
    assert (
        "labels: 6 row(s) of runs/bf/labels/review.csv wait for a person: fill their label "
        "column with implemented_gold, implemented_non_gold, absent_ambiguous "
        "(docs/formats/buildfind.md), then run: metaeval buildfind label runs/bf"
    ) in run.stdout
    assert "warning" not in run.stderr
    # the labels docs/formats/buildfind.md shows for this run
    fill_labels(tmp_path / "runs/bf/labels/review.csv", doc_labels())
    label = cli("buildfind", "label", "runs/bf", cwd=tmp_path)
    assert label.returncode == 0, label.stderr
    assert "every review row is labelled" in label.stdout
    # the reference finder answers gold on all 4 implemented_gold pairs: recovery 4/4
    assert "formal recovery 1.000" in label.stdout
    rerun = cli("buildfind", "run", "bf/run.yaml", "-o", "runs/bf", cwd=tmp_path)
    assert rerun.returncode == 0 and "wait for a person" not in rerun.stdout
