"""Build-and-find cells that stay failed are counted; a finished run is a fixed point.

A real run over the example pack (scripted reference builder, scripted reference finder) in
which one finder fails on purpose: on the question-only control it loses its connection on
every attempt (transient: infrastructure, retried until the recovery budget is spent), on the
spec-only control it raises a parse error (deterministic: recorded once as an error, never
retried). The first run and its resumes happen in-process so the fault can be injected; the
last is the real command line, which must find nothing to do and change no output byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from metaeval.protocols.buildfind.cells import context as cell_context
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.finalize import run_and_finalize

PACK = Path(__file__).resolve().parents[1] / "examples" / "buildfind-pack"
BOOKKEEPING = {".lock", "sessions.jsonl"}  # the lock holder's pid and the log of invocations


class FlakyFinder:
    """Delegates to the reference finder except on the two control slices."""

    def __init__(self, inner):
        self.inner = inner
        self.name = "flaky"

    def run(self, task, workspace, limits):
        slice_name = task.metadata["slice"]
        if slice_name == "question_only":
            raise ConnectionResetError(104, "Connection reset by peer")
        if slice_name == "spec_only":
            raise ValueError("find_answers.json: expected an object at line 1")
        return self.inner.run(task, workspace, limits)


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in BOOKKEEPING
    }


def metaeval_argv() -> list[str]:
    script = Path(sys.executable).parent / "metaeval"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "metaeval.cli"]


@pytest.mark.timeout(600)
def test_failed_cells_counted_and_rerun_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    config_path = tmp_path / "run.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "pack": str(PACK),
                "tasks": ["http-router"],
                "builders": [{"name": "documented", "agent": "reference:documented"}],
                "finders": [
                    {"name": "ref", "agent": "reference-finder"},
                    {"name": "flaky", "agent": "reference-finder"},
                ],
                "r_build": 1,
                "r_find": 1,
                "max_recovery_attempts": 2,
                "controls": ["question_only", "spec_only"],
            }
        )
    )
    real_make_agent = cell_context.make_agent

    def make_agent(spec, role):
        agent = real_make_agent(spec, role)
        return FlakyFinder(agent) if spec.name == "flaky" else agent

    monkeypatch.setattr(cell_context, "make_agent", make_agent)
    run_dir = tmp_path / "run"
    # An infrastructure failure is retried on resume: the first run and two resumes use the
    # recovery budget (max_recovery_attempts=2); the deterministic failure is never rerun.
    ran = []
    for _ in range(3):
        counts, summary = run_and_finalize(load_config(config_path), run_dir)
        ran.append((counts["builds_ran"], counts["finds_ran"]))
    assert ran == [(1, 6), (0, 1), (0, 1)]
    finds = [json.loads(line) for line in (run_dir / "finds.jsonl").read_text().splitlines()]
    flaky = [r for r in finds if r["finder"] == "flaky"]
    by_slice = {s: [r for r in flaky if r["slice"] == s] for s in ("question_only", "spec_only")}
    assert [r["infra_error"] for r in by_slice["question_only"]] == [True, True, True]
    assert [r["recovery"] for r in by_slice["question_only"]] == [0, 1, 2]
    assert len(by_slice["spec_only"]) == 1
    assert by_slice["spec_only"][0]["infra_error"] is False
    assert by_slice["spec_only"][0]["status"] == "error"

    assert summary["failed_cells"] == {
        "builds": 0,
        "finds": 2,
        "by_kind": {"error": 1, "infra_error": 1},
    }
    reasons = {r["slice"]: r for r in summary["failed_cell_reasons"]}
    assert reasons["question_only"]["attempts"] == 3
    assert "ConnectionResetError" in reasons["question_only"]["reason"]
    assert reasons["spec_only"]["attempts"] == 1
    assert "ValueError: find_answers.json" in reasons["spec_only"]["reason"]
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk["failed_cells"] == summary["failed_cells"]
    report = (run_dir / "report.md").read_text()
    assert "### failed_cells" in report and "ConnectionResetError" in report
    assert "ValueError: find_answers.json" in (run_dir / "report.html").read_text()
    table = (run_dir / "tables" / "failed_cells.csv").read_text().splitlines()
    assert len(table) == 3  # header + 2 failed cells
    # the rows table keeps the healthy finder's controls and nothing from the failed cells
    rows = pl.read_parquet(run_dir / "question_rows.parquet")
    per_slice = {
        (finder, slice_name): n
        for finder, slice_name, n in rows.group_by("finder", "slice").len().iter_rows()
    }
    assert per_slice[("flaky", "formal")] == per_slice[("ref", "formal")] > 0
    assert per_slice[("ref", "question_only")] > 0 and per_slice[("ref", "spec_only")] > 0
    assert ("flaky", "question_only") not in per_slice and ("flaky", "spec_only") not in per_slice

    before = snapshot(run_dir)
    result = subprocess.run(
        [*metaeval_argv(), "buildfind", "run", str(config_path), "-o", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 3, result.stdout + result.stderr  # finished, cells failed
    assert "0 build(s) and 0 find(s) run" in result.stdout
    assert "failed cells: 0 build(s), 2 find(s) (error 1, infra_error 1)" in result.stdout
    # each reason on the console; the spent recovery budget makes the infra error final too
    assert "infra errors: 1 × find by flaky: ConnectionResetError" in result.stdout
    assert "failed cells: 1 × find by flaky: ValueError: find_answers.json" in result.stdout
    assert "the 2 final cell(s) are kept on a rerun" in result.stdout
    after = snapshot(run_dir)
    assert sorted(after) == sorted(before)
    changed = [name for name in before if before[name] != after[name]]
    assert not changed, f"a rerun of a finished run changed: {changed}"


def test_reference_run_twice_is_byte_identical(tmp_path: Path) -> None:
    """The example reference run (three builders, two finders, controls), run twice by the CLI."""
    example = Path(__file__).resolve().parents[1] / "examples" / "buildfind-reference.yaml"
    run_dir = tmp_path / "run"
    argv = [*metaeval_argv(), "buildfind", "run", str(example), "-o", str(run_dir)]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "failed cells: none" in first.stdout
    before = snapshot(run_dir)
    assert "summary.json" in before and "labels/evidence_audit.csv" in before
    assert "tables/evidence_audit_summary.csv" in before  # present from the first run on
    second = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    after = snapshot(run_dir)
    assert sorted(after) == sorted(before)
    assert [n for n in before if before[n] != after[n]] == []
