"""Exit codes that tell the truth (`metaeval.exit_codes`), through the real command line.

A dead model endpoint (a closed port on 127.0.0.1) ends `audit run` with exit 3, the reason
on the console and a rerun that retries only that cell; a finder that really runs out of its
time budget ends `buildfind run` with exit 3 and the reason listed; clean runs exit 0.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from metaeval.exit_codes import CELLS_FAILED, OK, CellFailure, failure_lines

ROOT = Path(__file__).resolve().parents[1]
AUDIT_BENCH = ROOT / "examples" / "audit-bench"
PACK = ROOT / "examples" / "buildfind-pack"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def closed_port() -> int:
    """A port on 127.0.0.1 nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_failure_lines_group_by_reason_with_a_count() -> None:
    dead = CellFailure("infra errors", "model endpoint down", retried=True)
    slow = CellFailure("timeouts", "find by ref: timed out", retried=False)
    lines = failure_lines([dead, slow, dead, dead])
    assert lines[0] == "infra errors: 3 × model endpoint down"
    assert lines[1] == "timeouts: 1 × find by ref: timed out (final)"
    assert "retries the 3 cell(s)" in lines[2] and "the 1 final cell(s)" in lines[2]
    assert failure_lines([]) == []


@pytest.mark.timeout(600)
def test_dead_model_endpoint_exits_3_names_it_and_rerun_retries(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}/v1"
    run_dir = tmp_path / "run"
    argv = [
        "audit",
        "run",
        str(AUDIT_BENCH),
        "--task",
        "grade-mean",
        "-m",
        "openai/x",
        "-M",
        f"base_url={endpoint}",
        "--no-execution",
        "-o",
        str(run_dir),
    ]
    first = cli(*argv)
    assert first.returncode == CELLS_FAILED, first.stdout + first.stderr
    assert "Traceback" not in first.stdout + first.stderr
    reason = f"infra errors: 1 × openai/x: model call to {endpoint} failed after"
    assert reason in first.stdout and "Connection refused" in first.stdout
    assert "run the same command again to resume" in first.stdout
    cells = jsonl(run_dir / "audits.jsonl")
    assert sorted((c["source"], c["infra_error"]) for c in cells) == [
        ("openai/x", True),
        ("static", False),
    ]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [(f["source"], f["kind"]) for f in summary["failed_cells"]] == [
        ("openai/x", "infra_error")
    ]

    # the rerun resumes: the static cell is reused, only the failed model cell runs again
    again = cli(*argv)
    assert again.returncode == CELLS_FAILED, again.stdout + again.stderr
    assert "resumed: 1 completed cell(s) reused" in again.stdout
    assert reason in again.stdout
    new = jsonl(run_dir / "audits.jsonl")[len(cells) :]
    assert [(c["source"], c["infra_error"]) for c in new] == [("openai/x", True)]


def test_clean_static_audit_exits_0(tmp_path: Path) -> None:
    result = cli(
        "audit",
        "run",
        str(AUDIT_BENCH),
        "--static-only",
        "--no-execution",
        "--task",
        "word-count",
        "-o",
        str(tmp_path / "run"),
    )
    assert result.returncode == OK, result.stdout + result.stderr
    assert "infra errors:" not in result.stdout and "hint:" not in result.stdout


def buildfind_config(tmp_path: Path, budgets: dict) -> Path:
    path = tmp_path / "run.yaml"
    config = {
        "pack": str(PACK),
        "tasks": ["http-router"],
        "builders": [{"name": "documented", "agent": "reference:documented"}],
        "finders": [{"name": "ref", "agent": "reference-finder"}],
        "r_build": 1,
        "r_find": 1,
        "controls": ["spec_only"],
        "budgets": budgets,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.timeout(600)
def test_finder_timeouts_exit_3_with_the_reason(tmp_path: Path) -> None:
    # a budget no finder can meet: the reference finder stops at its time limit, for real
    config = buildfind_config(tmp_path, {"find_time_s": 1e-9})
    run_dir = tmp_path / "run"
    result = cli("buildfind", "run", str(config), "-o", str(run_dir))
    assert result.returncode == CELLS_FAILED, result.stdout + result.stderr
    assert "failed cells: none" not in result.stdout
    assert "failed cells: 0 build(s), 2 find(s) (timeout 2)" in result.stdout
    assert "timeouts: 2 × find by ref: timed out (time_limit) (final)" in result.stdout
    assert "--new-layer" in result.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["failed_cells"]["by_kind"] == {"timeout": 2}
    # a rerun keeps the final cells: nothing runs, the answer is the same
    again = cli("buildfind", "run", str(config), "-o", str(run_dir))
    assert again.returncode == CELLS_FAILED
    assert "0 build(s) and 0 find(s) run" in again.stdout


@pytest.mark.timeout(600)
def test_clean_buildfind_run_exits_0(tmp_path: Path) -> None:
    config = buildfind_config(tmp_path, {})
    result = cli("buildfind", "run", str(config), "-o", str(tmp_path / "run"))
    assert result.returncode == OK, result.stdout + result.stderr
    assert "failed cells: none" in result.stdout and "hint:" not in result.stdout


@pytest.mark.bwrap
@pytest.mark.timeout(900)
def test_improve_trial_the_harness_could_not_evaluate_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the baseline, one optimize task's verifier disappears: the candidate's
    evaluation is an evaluation-framework failure, and `improve run` says so and exits 3."""
    from typer.testing import CliRunner

    from metaeval.cli import app
    from metaeval.protocols.improve import run as improve_run
    from metaeval.protocols.improve.init_target import init_target
    from metaeval.protocols.improve.meta_agents import ScriptedMetaAgent

    configs = tmp_path / "examples" / "improve"
    shutil.copytree(ROOT / "examples" / "improve", configs)
    suite = tmp_path / "examples" / "improve-suites"
    shutil.copytree(ROOT / "examples" / "improve-suites", suite)
    init_target("toolloop", tmp_path / "runs" / "improve-target")

    def comment_and_break_a_verifier(worktree: Path, _input: dict) -> str:
        (suite / "terminal" / "rename-photos" / "tests" / "test.sh").unlink()
        prompts = worktree / "target_agent" / "prompts.py"
        prompts.write_text(prompts.read_text() + "# nothing\n")
        return "a comment"

    monkeypatch.setattr(
        improve_run,
        "make_meta_agent",
        lambda _spec, **_options: ScriptedMetaAgent([comment_and_break_a_verifier]),
    )
    manifest = configs / "manifest-scripted.json"
    result = CliRunner().invoke(app, ["improve", "run", str(manifest), "--budget", "1"])
    assert result.exit_code == CELLS_FAILED, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("evaluation framework"))
    assert line.startswith("evaluation framework failures: 1 × the harness could not run 1 task")
    assert "rename-photos" in line and line.endswith("(final)")
