"""Run directories, releases and bundles written by older code still open, resume and verify.

The fixtures under tests/fixtures/old_format were written by the code before the skeleton
redesign and are never regenerated (see their README)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OLD = Path(__file__).parent / "fixtures" / "old_format"


def _metaeval(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def old_audit(tmp_path: Path) -> Path:
    shutil.copytree(OLD / "audit", tmp_path / "audit")
    return tmp_path / "audit"


def test_old_audit_run_resumes_without_redoing_a_cell(old_audit: Path) -> None:
    before = {
        name: (old_audit / "run" / name).read_bytes() for name in ("audits.jsonl", "findings.jsonl")
    }
    done = _metaeval("audit", "run", "bench", "-m", "local/smollm2", "-o", "run", cwd=old_audit)
    assert done.returncode == 0, done.stderr
    for name, data in before.items():
        assert (old_audit / "run" / name).read_bytes() == data, f"{name} changed on resume"
    assert "2 findings on 2 tasks" in done.stdout + done.stderr


def test_old_audit_run_scores_as_it_did(old_audit: Path) -> None:
    old_score = json.loads((old_audit / "run" / "score.json").read_text())
    (old_audit / "run" / "score.json").unlink()
    # the judge the old run was scored with (it was the silent default then; now it is named)
    judge = old_score["judge_model"]
    done = _metaeval(
        "audit", "score", "run", "--gold", "gold.json", "--judge", judge, cwd=old_audit
    )
    assert done.returncode == 0, done.stderr
    new_score = json.loads((old_audit / "run" / "score.json").read_text())

    def gold_hits(score: dict) -> list:
        text = json.dumps(score, sort_keys=True)
        return sorted(k for k in ("AB-02", "AB-05") if k in text)

    assert gold_hits(new_score) == gold_hits(old_score) == ["AB-02", "AB-05"]
    report = _metaeval("audit", "report", "run", cwd=old_audit)
    assert report.returncode == 0, report.stderr
    html = (old_audit / "run" / "report.html").read_text()
    assert "grade-mean" in html and "row-count" in html


def test_old_buildfind_release_verifies(tmp_path: Path) -> None:
    release = tmp_path / "release"
    shutil.copytree(OLD / "buildfind" / "release", release)
    done = _metaeval("buildfind", "verify-release", str(release), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "hold" in done.stdout
    # and a tampered copy does not: the check is real
    rows = release / "data" / "question_rows.csv"
    text = rows.read_text()
    assert ",C,C,true," in text
    rows.write_text(text.replace(",C,C,true,", ",C,A,false,", 1))
    tampered = _metaeval("buildfind", "verify-release", str(release), cwd=tmp_path)
    assert tampered.returncode != 0


def _restore_improve(tmp_path: Path) -> Path:
    root = tmp_path / "improve"
    shutil.copytree(OLD / "improve", root)
    target = root / "runs" / "improve-target"
    target.mkdir()
    _git("init", "-q", "-b", "restoring", cwd=target)
    _git("fetch", "-q", str(root / "target.bundle"), "refs/*:refs/*", cwd=target)
    _git("checkout", "-q", "master", cwd=target)
    return root


def test_old_improve_bundle_resumes_and_rerenders(tmp_path: Path) -> None:
    root = _restore_improve(tmp_path)
    bundle = root / "runs" / "improve-demo"
    ledger = (bundle / "trial_ledger.jsonl").read_bytes()
    old_summary = json.loads((bundle / "lineage_summary.json").read_text())
    done = _metaeval(
        "improve", "run", "examples/improve/manifest-scripted.json", "--budget", "2", cwd=root
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (bundle / "trial_ledger.jsonl").read_bytes() == ledger, "a finished trial re-ran"
    (bundle / "lineage_summary.json").unlink()
    report = _metaeval("improve", "report", str(bundle), cwd=root)
    assert report.returncode == 0, report.stdout + report.stderr
    new_summary = json.loads((bundle / "lineage_summary.json").read_text())
    for key in ("final", "baseline"):
        if key in old_summary:
            assert new_summary[key] == old_summary[key]


def test_old_audit_run_keeps_its_budget_unless_one_is_given(old_audit: Path) -> None:
    """The default budget changed (2048 -> the paper's 4096); the old run resumes with its
    own, and an explicit other budget is a changed setting, refused by name."""
    done = _metaeval(
        "audit",
        "run",
        "bench",
        "-m",
        "local/smollm2",
        "-o",
        "run",
        "--max-tokens",
        "4096",
        cwd=old_audit,
    )
    assert done.returncode == 2
    assert "setting 'max_tokens' changed: 2048 -> 4096" in done.stderr
