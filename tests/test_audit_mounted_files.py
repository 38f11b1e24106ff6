"""The mounted-files check: a tests/ or solution/ script reading a file of its own mount that
the task does not ship (found by auditing real Terminal-Bench 2 tasks, where a solve.sh copied
`"${SOLUTION_ROOT}/files/internal/duration/duration.go"` that the task kept elsewhere).

The tasks are written in the idioms real authors use; the clean variants (file present,
created first, probed first, failure ignored) must give no finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from metaeval.protocols.audit.static_checks import run_static_checks
from metaeval.protocols.audit.task_view import load_task

TEST_SH = """#!/bin/bash
set -u
cd /app
python3 -m pytest -q "$(dirname "$0")/test_outputs.py" && echo 1 > /logs/verifier/reward.txt \\
  || echo 0 > /logs/verifier/reward.txt
"""
TEST_PY = "def test_ok():\n    assert True\n"
SOLVE_SH = """#!/usr/bin/env bash
set -euo pipefail
SOLUTION_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cp -f "${SOLUTION_ROOT}/files/internal/eval/eval.go" /app/internal/eval/eval.go
cp -f "${SOLUTION_ROOT}/files/internal/duration/duration.go" /app/internal/duration/duration.go
"""


def write_task(root: Path, files: dict[str, str]) -> Path:
    base = {
        "instruction.md": "# Fix the evaluator\n\nMake `/app/cmd/celctl` pass its tests.\n",
        "task.toml": 'version = "1.0"\n',
        "environment/Dockerfile": "FROM golang:1.22\nWORKDIR /app\nCOPY . /app\n",
        "environment/go.mod": "module celctl\n",
        "tests/test.sh": TEST_SH,
        "tests/test_outputs.py": TEST_PY,
        "solution/solve.sh": SOLVE_SH,
        "solution/files/internal/eval/eval.go": "package eval\n",
    }
    base.update(files)
    for rel, text in base.items():
        if text is None:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def shipped_findings(task_dir: Path) -> list[tuple[str, str]]:
    task = load_task(task_dir, bench_root=task_dir.parent)
    return [(f.severity, f.title) for f in run_static_checks(task) if "does not ship" in f.title]


def test_a_solution_copying_a_file_it_does_not_ship_is_found(tmp_path: Path) -> None:
    task = write_task(tmp_path / "cel", {})
    [(severity, title)] = shipped_findings(task)
    assert severity == "High"
    assert title == (
        "solution/solve.sh reads `/solution/files/internal/duration/duration.go`, which the task "
        "does not ship"
    )
    finding = next(
        f
        for f in run_static_checks(load_task(task, bench_root=tmp_path))
        if "does not ship" in f.title
    )
    assert finding.subcategory == "ENV-PATH" and finding.evidence[0].line_start == 5
    assert "duration.go" in finding.evidence[0].snippet


def test_tests_running_a_missing_helper_are_found_despite_the_reward_fallback(
    tmp_path: Path,
) -> None:
    test_sh = (
        TEST_SH + 'bash "$(dirname "$0")/check_state.sh" || echo 0 > /logs/verifier/reward.txt\n'
    )
    task = write_task(
        tmp_path / "t",
        {
            "tests/test.sh": test_sh,
            "solution/files/internal/duration/duration.go": "package duration\n",
        },
    )
    assert shipped_findings(task) == [
        ("High", "tests/test.sh reads `/tests/check_state.sh`, which the task does not ship")
    ]


def test_uv_run_pytest_on_a_missing_test_file_is_found(tmp_path: Path) -> None:
    test_sh = (
        "#!/bin/bash\nuv run --with pytest==8.4.1 pytest /tests/test_state.py -rA\n"
        "if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    )
    task = write_task(
        tmp_path / "uv",
        {"tests/test.sh": test_sh, "solution/files/internal/duration/duration.go": "x\n"},
    )
    assert shipped_findings(task) == [
        ("High", "tests/test.sh reads `/tests/test_state.py`, which the task does not ship")
    ]


CLEAN_SOLVES = {
    "present": SOLVE_SH,  # the file is shipped in this variant (see below)
    "created first": SOLVE_SH.replace(
        'cp -f "${SOLUTION_ROOT}/files/internal/duration',
        "mkdir -p /solution/files/internal/duration\n"
        'echo "package duration" > /solution/files/internal/duration/duration.go\n'
        'cp -f "${SOLUTION_ROOT}/files/internal/duration',
    ),
    "probed first": SOLVE_SH.replace(
        'cp -f "${SOLUTION_ROOT}/files/internal/duration',
        "if [ -f /solution/files/internal/duration/duration.go ]; then\n"
        '  cp -f "${SOLUTION_ROOT}/files/internal/duration',
    )
    + "fi\n",
    "double-bracket probe": SOLVE_SH.replace(
        'cp -f "${SOLUTION_ROOT}/files/internal/duration',
        '[[ -f "${SOLUTION_ROOT}/files/internal/duration/duration.go" ]] && '
        'cp -f "${SOLUTION_ROOT}/files/internal/duration',
    ),
    "failure ignored": SOLVE_SH.replace(
        "/app/internal/duration/duration.go\n", "/app/internal/duration/duration.go || true\n"
    ),
    "unresolved directory": SOLVE_SH.replace(
        'SOLUTION_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"',
        'SOLUTION_ROOT="${1:-$SOME_DIR}"',
    ),
    "inline python": "#!/bin/bash\npython3 -c 'print(1)' /solution/nothing.txt\n",
}


@pytest.mark.parametrize("variant", sorted(CLEAN_SOLVES))
def test_clean_variants_give_no_finding(tmp_path: Path, variant: str) -> None:
    files = {"solution/solve.sh": CLEAN_SOLVES[variant]}
    if variant == "present":
        files["solution/files/internal/duration/duration.go"] = "package duration\n"
    assert shipped_findings(write_task(tmp_path / "clean", files)) == []


def test_a_binary_file_the_loader_skips_still_counts_as_shipped(tmp_path: Path) -> None:
    task = write_task(
        tmp_path / "bin",
        {"solution/solve.sh": "#!/bin/bash\nset -e\ncp /solution/model.bin /app/model.bin\n"},
    )
    (task / "solution" / "model.bin").write_bytes(bytes(range(256)) * 64)
    assert shipped_findings(task) == []
