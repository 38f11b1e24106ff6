"""Build-and-find end to end on the example pack with the scripted reference agents."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from kill_run import kill_after_lines
from metaeval.protocols.buildfind.rows.table import read_rows

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "buildfind-reference.yaml"
# divergent builder: two behaviours implemented differently, two left out, per task
DIVERGENT_NON_GOLD = {
    ("kvstore-wal", "q08"),
    ("kvstore-wal", "q09"),
    ("http-router", "q04"),
    ("http-router", "q07"),
}
DIVERGENT_ABSENT = {
    ("kvstore-wal", "q12"),
    ("kvstore-wal", "q13"),
    ("http-router", "q09"),
    ("http-router", "q13"),
}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args], capture_output=True, text=True, timeout=600
    )


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_reference_run_end_to_end_twice_and_label(tmp_path):
    run_dir = tmp_path / "run"
    first = cli("buildfind", "run", str(CONFIG), "-o", str(run_dir))
    assert first.returncode == 0, first.stderr
    assert "6 build(s) and 60 find(s) run;" in first.stdout
    assert "reused" not in first.stdout  # nothing existed before the first run
    builds, finds = lines(run_dir / "builds.jsonl"), lines(run_dir / "finds.jsonl")
    assert len(builds) == 6 and all(b["status"] == "ok" and b["compile_pass"] for b in builds)
    # formal: 6 artifacts x 2 finders x 3 trials; controls: 2 slices x 2 tasks x 2 finders x 3
    assert len(finds) == 36 + 24
    for record in builds + finds:
        for field in (
            "agent_id",
            "adapter_family",
            "seed",
            "prompt_hash",
            "spec_hash",
            "metaeval_version",
            "environment_hash",
            "created_at",
        ):
            assert record.get(field) is not None, field
    assert all(not any(b["leakage"].values()) for b in builds)

    rows = read_rows(run_dir / "question_rows.parquet")
    assert rows.height == 60 * 15
    formal = rows.filter(pl.col("slice") == "formal")
    wrong = formal.filter(~pl.col("correct")).select("task", "builder", "question_id").unique()
    assert set(wrong.rows()) == {
        (t, "divergent", q) for t, q in DIVERGENT_NON_GOLD | DIVERGENT_ABSENT
    }
    labels = dict(
        formal.select("task", "builder", "question_id", "label")
        .unique()
        .group_by("label")
        .len()
        .rows()
    )
    # consensus prelabels: 3 builders x 2 tasks x 15 questions = 90 pairs; 4 non-gold; 4 absent -> review
    assert labels == {"implemented_gold": 82, "implemented_non_gold": 4, "unlabeled": 4}
    calibration = pl.read_csv(run_dir / "tables" / "calibration.csv")
    spec_only = calibration.filter((pl.col("slice") == "spec_only") & (pl.col("task") == "all"))
    assert spec_only.get_column("accuracy").to_list() == [1.0]
    html = (run_dir / "report.html").read_text()
    assert html.count("<svg") >= 3 and "http://" not in html and "https://" not in html

    before = [(run_dir / n).read_bytes() for n in ("builds.jsonl", "finds.jsonl")]
    second = cli("buildfind", "run", str(CONFIG), "-o", str(run_dir))
    assert second.returncode == 0, second.stderr
    assert "0 build(s) and 0 find(s) run (66 reused)" in second.stdout
    assert [(run_dir / n).read_bytes() for n in ("builds.jsonl", "finds.jsonl")] == before

    # Before anyone fills the review CSV, `label` says how much is still open.
    unfilled = cli("buildfind", "label", str(run_dir))
    assert unfilled.returncode == 0, unfilled.stderr
    assert "4 review row(s) still unlabeled" in unfilled.stdout

    # A person fills the review CSV: the left-out behaviours are absent.
    review = run_dir / "labels" / "review.csv"
    with review.open() as handle:
        queue = list(csv.DictReader(handle))
    assert {(r["task"], r["question_id"]) for r in queue} == DIVERGENT_ABSENT
    assert all(r["question"] for r in queue)
    for row in queue:
        row["label"], row["reviewer"] = "absent_ambiguous", "tester"
    with review.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(queue[0]))
        writer.writeheader()
        writer.writerows(queue)
    labelled = cli("buildfind", "label", str(run_dir))
    assert labelled.returncode == 0, labelled.stderr
    assert "every review row is labelled" in labelled.stdout
    relabelled = read_rows(run_dir / "question_rows.parquet").filter(pl.col("slice") == "formal")
    manual = relabelled.filter(pl.col("label_source") == "manual_review")
    assert set(manual.select("task", "question_id").unique().rows()) == DIVERGENT_ABSENT
    assert set(manual.get_column("label").unique()) == {"absent_ambiguous"}
    coverage = pl.read_csv(run_dir / "tables" / "coverage.csv").filter(
        pl.col("builder") == "divergent"
    )
    assert coverage.get_column("ambiguous").to_list() == [4]

    # Every published number recomputes from the released rows alone.
    again = cli(
        "buildfind",
        "analyze",
        "--rows",
        str(run_dir / "question_rows.csv"),
        "-o",
        str(tmp_path / "re"),
    )
    assert again.returncode == 0, again.stderr
    for table in ("calibration", "coverage", "rb_effort", "aels", "recovery_gate"):
        assert (tmp_path / "re" / "tables" / f"{table}.csv").read_text() == (
            run_dir / "tables" / f"{table}.csv"
        ).read_text(), table


def test_self_labelling_is_warned_and_summary_matches_tables(tmp_path):
    """The reference config's base finders are the scored finders: CLI, report and tables warn;
    the CLI's headline figures are the calibration table's, under the report's names."""
    run_dir = tmp_path / "run"
    result = cli("buildfind", "run", str(CONFIG), "-o", str(run_dir))
    assert result.returncode == 0, result.stderr
    assert "labels come from the finders being scored" in result.stderr
    assert "ref-finder-a, ref-finder-b" in result.stderr
    calibration = pl.read_csv(run_dir / "tables" / "calibration.csv").filter(task="all")
    accuracy = dict(calibration.select("slice", "accuracy").rows())
    expected = (
        f"formal recovery {accuracy['compile_pass']:.3f}, "
        f"question-only accuracy {accuracy['question_only']:.3f}, "
        f"spec-only accuracy {accuracy['spec_only']:.3f}"
    )
    assert expected in result.stdout
    report = (run_dir / "report.md").read_text()
    assert "**Warning:** labels come from the finders being scored" in report
    # no reference finder: the headline's one column is Table 1's figure for the slice
    assert f"| formal recovery | {100 * accuracy['compile_pass']:.1f}% |" in report
    assert "labels come from the finders being scored" in (run_dir / "report.html").read_text()
    readme = (run_dir / "tables" / "README.md").read_text()
    assert "> **Warning:** labels come from the finders being scored" in readme
    marked = pl.read_csv(run_dir / "tables" / "finder_calibration.csv")
    assert dict(marked.select("finder", "labels_from_self").rows()) == {
        "ref-finder-a": True,
        "ref-finder-b": True,
    }
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["formal_recovery"] == accuracy["compile_pass"]
    assert summary["self_labelled_finders"] == ["ref-finder-a", "ref-finder-b"]


def test_every_column_of_every_written_table_is_documented(tmp_path):
    """A real run (plus a labelled evidence audit) writes every table the analysis makes;
    each column of each one is documented and nothing says otherwise."""
    from metaeval.protocols.buildfind.tables.docs import TABLE_DOCS, TABLE_TITLES, column_doc

    run_dir = tmp_path / "run"
    assert cli("buildfind", "run", str(CONFIG), "-o", str(run_dir)).returncode == 0
    sample_path = run_dir / "labels" / "evidence_audit.csv"
    with sample_path.open() as handle:
        sample = list(csv.DictReader(handle))
    sample[0]["evidence_label"] = "supported"
    with sample_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(sample[0]))
        writer.writeheader()
        writer.writerows(sample)
    assert cli("buildfind", "label", str(run_dir)).returncode == 0
    written = sorted(p.stem for p in (run_dir / "tables").glob("*.parquet"))
    assert "evidence_audit_summary" in written and "low_prior_affinity" in written
    assert len(written) >= 25
    for name in written:
        assert name in TABLE_DOCS and name in TABLE_TITLES, name
        for column in pl.read_parquet(run_dir / "tables" / f"{name}.parquet").columns:
            assert column_doc(name, column), (name, column)
    readme = (run_dir / "tables" / "README.md").read_text()
    assert "not documented" not in readme and "undocumented" not in readme
    for report in ("report.md", "report.html"):
        text = (run_dir / report).read_text()
        assert "no column documentation" not in text and "not documented" not in text


def test_killed_run_resumes_without_losing_or_duplicating(tmp_path):
    run_dir = tmp_path / "run"
    finds = run_dir / "finds.jsonl"
    kept = kill_after_lines(["buildfind", "run", str(CONFIG), "-o", str(run_dir)], finds, 5, 120)
    assert 5 <= kept.count(b"\n") < 60, "the kill should land mid find phase"

    rerun = cli("buildfind", "run", str(CONFIG), "-o", str(run_dir))
    assert rerun.returncode == 0, rerun.stderr
    assert finds.read_bytes().startswith(kept)
    keys = [
        (r["slice"], r["task"], r["builder"], r["build_trial"], r["finder"], r["find_trial"])
        for r in lines(finds)
    ]
    assert len(keys) == 60 and len(set(keys)) == 60
    assert len(lines(run_dir / "builds.jsonl")) == 6


def test_bad_config_and_pack_exit_with_file_and_field(tmp_path):
    text = CONFIG.read_text().replace(
        "pack: buildfind-pack", f"pack: {ROOT / 'examples' / 'buildfind-pack'}"
    )
    config = tmp_path / "bad.yaml"
    config.write_text(text.replace("r_find: 3", "r_find: zero"))
    result = cli("buildfind", "run", str(config), "-o", str(tmp_path / "never"))
    assert result.returncode == 2 and str(config) in result.stderr and "r_find" in result.stderr
    assert not (tmp_path / "never").exists()

    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(text.replace("agent: reference-finder", "agent: nosuch-agent", 1))
    result = cli("buildfind", "run", str(unknown), "-o", str(tmp_path / "never"))
    assert result.returncode == 2 and "nosuch-agent" in result.stderr
    assert not (tmp_path / "never").exists()

    pack = tmp_path / "pack" / "t1"
    pack.mkdir(parents=True)
    (pack / "task.yaml").write_text(
        "language: python\ncompile_probe: 'true'\nbuild_time_s: 10\nfind_time_s: 10\n"
    )
    (pack / "spec.yaml").write_text("items: [{id: s1, kind: behavior, text: x}]\n")
    (pack / "questions.yaml").write_text(
        "questions: [{id: q1, question: x, options: {A: a, B: b, C: c, D: d}, gold: E, traces: [s9]}]\n"
    )
    validate = cli("buildfind", "validate", str(tmp_path / "pack"))
    assert validate.returncode == 1
    assert "questions.0.gold" in validate.stdout and "questions.0.traces.0" in validate.stdout


def test_evidence_audit_sample_is_labelled_and_summarized(tmp_path):
    run_dir = tmp_path / "run"
    assert cli("buildfind", "run", str(CONFIG), "-o", str(run_dir)).returncode == 0
    sample_path = run_dir / "labels" / "evidence_audit.csv"
    with sample_path.open() as handle:
        sample = list(csv.DictReader(handle))
    assert sample and {"evidence_files", "rationale", "evidence_label", "stratum"} <= set(sample[0])
    assert all(row["correct"] == "true" and row["builder"] for row in sample)
    for index, row in enumerate(sample):  # label all but the last row
        row["evidence_label"] = "supported" if index % 2 == 0 else "unsupported"
    sample[-1]["evidence_label"] = ""
    with sample_path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(sample[0]))
        writer.writeheader()
        writer.writerows(sample)
    assert cli("buildfind", "label", str(run_dir)).returncode == 0
    summary = pl.read_csv(run_dir / "tables" / "evidence_audit_summary.csv")
    overall = summary.filter(pl.col("slice_kind") == "all").row(0, named=True)
    labelled = len(sample) - 1
    assert (overall["n"], overall["pending"], overall["labelled"]) == (len(sample), 1, labelled)
    assert overall["supported"] == (labelled + 1) // 2 and overall["unsupported"] == labelled // 2
    with sample_path.open() as handle:  # the person's labels were not overwritten
        assert sum(1 for row in csv.DictReader(handle) if row["evidence_label"]) == labelled


def test_relative_run_directory(tmp_path):
    """Users pass `-o runs/x`: artifact paths must resolve against a relative run dir too."""
    result = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "buildfind", "run", str(CONFIG), "-o", "runs/rel"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert result.returncode == 0, result.stderr
    builds = lines(tmp_path / "runs" / "rel" / "builds.jsonl")
    assert len(builds) == 6 and all(b["status"] == "ok" and not b["infra_error"] for b in builds)
    assert len(lines(tmp_path / "runs" / "rel" / "finds.jsonl")) == 60
