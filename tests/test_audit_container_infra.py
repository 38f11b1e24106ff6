"""An engine or image this machine cannot get is infrastructure, not a check result (issue 43):
`metaeval audit run` for real with Podman, a Dockerfile FROM an image the engine does not hold
(pull disabled), then the same run resumed once the image is there.

These tests skip when no engine or base image is there, unless METAEVAL_REQUIRE_CONTAINER=1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from metaeval.exit_codes import CELLS_FAILED
from metaeval.sandbox.container import Engine
from metaeval.tasks.images import image_exists
from test_audit_container import engine  # noqa: F401  (the Podman fixture)

TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ -f /app/solved ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def write_task(bench: Path, base: str) -> None:
    task = bench / "absent-base"
    for sub in ("tests", "solution", "environment"):
        (task / sub).mkdir(parents=True)
    (task / "instruction.md").write_text("Leave /app/solved behind.\n")
    (task / "task.toml").write_text('version = "1.0"\n\n[environment]\nallow_internet = false\n')
    (task / "environment" / "Dockerfile").write_text(f"FROM {base}\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\ntouch /app/solved\n")
    (task / "tests" / "test.sh").write_text(TEST)
    # a static finding the cell records whatever the execution checks do
    (task / "tests" / "notes.txt").write_text("<<<<<<< HEAD\nleft\n=======\nright\n>>>>>>> b\n")


def audit(bench: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "metaeval.cli", "audit", "run", str(bench), "--static-only"]
    argv += ["--sandbox", "podman", "--pull", "never", "-o", str(run_dir)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def static_cells(run_dir: Path) -> list[dict]:
    lines = (run_dir / "audits.jsonl").read_text().splitlines()
    return [c for c in map(json.loads, lines) if c.get("source") == "static"]


def test_an_absent_base_image_is_an_infra_error_retried_once_it_is_there(
    engine: Engine,  # noqa: F811
    tmp_path: Path,
) -> None:
    base = f"localhost/metaeval-absent-{uuid.uuid4().hex[:10]}:1"
    assert not image_exists(engine, base)
    bench, run_dir = tmp_path / "bench", tmp_path / "run"
    write_task(bench, base)

    first = audit(bench, run_dir)
    assert first.returncode == CELLS_FAILED, first.stdout + first.stderr
    [cell] = static_cells(run_dir)
    reason = f"podman: image {base} is not available here (not present locally, not pulled)"
    assert cell["infra_error"] is True and cell["error"] == reason
    assert cell["execution"]["skipped"] == reason and cell["execution"]["oracle"]["ran"] is False
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["infra_errors"] == 1
    assert summary["failed_cells"] == [
        {"task_id": "absent-base", "source": "static", "kind": "infra_error", "reason": reason}
    ]
    # no check counted as passed, no finding from the skip; the static finding still stands
    findings = [json.loads(line) for line in (run_dir / "findings.jsonl").open()]
    assert findings and summary["findings_reported"] == len(findings)
    cited = {e["file"] for f in findings for e in f["evidence"]}
    assert "tests/notes.txt" in cited and not any(c.startswith("logs/") for c in cited), cited
    report = (run_dir / "report.md").read_text()
    assert f"infrastructure error: {reason}" in report
    assert "infra errors: 1 ×" in first.stdout + first.stderr

    made = subprocess.run(
        engine.command("tag", "python:3.11-slim", base), capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    try:
        second = audit(bench, run_dir)
    finally:
        subprocess.run(engine.command("rmi", base), capture_output=True, check=False)
    assert second.returncode == 0, second.stdout + second.stderr
    cells = static_cells(run_dir)
    assert len(cells) == 2  # the infra cell was run again, not reused
    latest = cells[-1]
    assert latest["infra_error"] is False and latest.get("error") is None
    assert latest["execution"]["skipped"] is None, latest["execution"]
    assert latest["execution"]["oracle"]["reward"] == 1
    assert latest["execution"]["null_agent"]["reward"] == 0
    again = json.loads((run_dir / "summary.json").read_text())
    assert again["infra_errors"] == 0 and again["failed_cells"] == []
