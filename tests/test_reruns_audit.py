"""Reruns of `audit run` (issue 29, item 1): the same inputs resume, a setting that changes
what a cell means is refused by name with the ways out, and `--task` narrows without
invalidating the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "audit", "run", str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def cells(run_dir: Path) -> list[dict]:
    lines = (run_dir / "audits.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture(scope="module")
def static_run(tmp_path_factory) -> Path:
    """A static-only audit of the whole example benchmark with execution checks off."""
    run_dir = tmp_path_factory.mktemp("reruns") / "audit"
    first = cli("--static-only", "--no-execution", "-o", str(run_dir))
    assert first.returncode == 0, first.stderr
    assert len(cells(run_dir)) == 14
    return run_dir


def test_same_inputs_resume_and_redo_nothing(static_run):
    before = (static_run / "audits.jsonl").read_bytes()
    again = cli("--static-only", "--no-execution", "-o", str(static_run))
    assert again.returncode == 0, again.stderr
    assert "resumed: 14 completed cell(s) reused" in again.stdout
    assert (static_run / "audits.jsonl").read_bytes() == before


def test_task_narrows_an_existing_run_and_reuses_its_cells(static_run):
    before = (static_run / "audits.jsonl").read_bytes()
    narrowed = cli("--static-only", "--no-execution", "--task", "row-count", "-o", str(static_run))
    assert narrowed.returncode == 0, narrowed.stderr
    assert "changed" not in narrowed.stderr
    assert "resumed: 1 completed cell(s) reused" in narrowed.stdout
    assert (static_run / "audits.jsonl").read_bytes() == before


def test_switching_the_sandbox_is_refused_by_name(static_run):
    before = (static_run / "audits.jsonl").read_bytes()
    switched = cli("--static-only", "--no-execution", "--sandbox", "bwrap", "-o", str(static_run))
    assert switched.returncode == 2, switched.stderr
    assert "setting 'sandbox' changed: auto -> bwrap" in switched.stderr
    assert (static_run / "audits.jsonl").read_bytes() == before


@pytest.mark.bwrap
def test_turning_execution_on_is_refused_and_both_ways_out_work(static_run, tmp_path):
    before = (static_run / "audits.jsonl").read_bytes()
    refused = cli("--static-only", "--task", "row-count", "-o", str(static_run))
    assert refused.returncode == 2, refused.stderr
    message = " ".join(refused.stderr.split())  # the console wraps long lines
    assert "setting 'execution_checks' changed: off -> on" in message
    assert "-o NEW_DIR" in message and "--new-layer NAME" in message
    assert (static_run / "audits.jsonl").read_bytes() == before

    # way out 1: a new evidence layer in the same run, whose cells run the checks
    layered = cli(
        "--static-only", "--task", "row-count", "--new-layer", "exec", "-o", str(static_run)
    )
    assert layered.returncode in (0, 3), layered.stderr
    new = [c for c in cells(static_run) if c.get("layer") == "exec"]
    assert [c["task_id"] for c in new] == ["row-count"]
    assert new[0]["execution"] != {"skipped": "disabled"}
    old = [c for c in cells(static_run) if c["task_id"] == "row-count" and c is not new[0]]
    assert all(c["execution"] == {"skipped": "disabled"} for c in old if c.get("layer") != "exec")

    # the run's other commands open it at its latest layer
    report = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "audit", "report", str(static_run)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr

    # way out 2: a new run directory
    fresh = tmp_path / "fresh"
    other = cli("--static-only", "--task", "row-count", "-o", str(fresh))
    assert other.returncode in (0, 3), other.stderr
    assert cells(fresh)[0]["execution"] != {"skipped": "disabled"}
