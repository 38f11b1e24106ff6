"""Integrity of examples/audit-bench: every task loads, gold.json is consistent, and the
execution checks see exactly the defects they are meant to see."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from metaeval.protocols.audit import execution_checks
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.findings import SUBCATEGORIES
from metaeval.protocols.audit.task_hints import load_hints
from metaeval.protocols.audit.task_view import load_benchmark
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.tasks.task_dirs import discover_tasks

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
GOLD = json.loads((BENCH / "gold.json").read_text(encoding="utf-8"))

# What the execution checks must report for each task (empty: nothing).
EXPECTED_EXECUTION = {
    "word-count": [],
    "order-total": [],
    "invert-mapping": [],
    "error-summary": [],
    "sales-revenue": [],
    "grade-mean": [],
    "rainfall-average": [],
    "latency-mean": [],
    "inventory-by-category": ["ENV-DEP"],
    "row-count": ["ENV-PATH"],
    "uppercase-names": ["EVAL-MISMATCH"],
    "median-price": ["GT-LOGIC"],
    "not-found-count": ["EVAL-COVERAGE"],
    "exchange-rates": ["ENV-RESOURCE"],
}


def task_ids() -> list[str]:
    return [p.relative_to(BENCH).as_posix() for p in discover_tasks(BENCH)[0]]


def clean_task_ids() -> list[str]:
    return [t for t in task_ids() if t not in GOLD["tasks"]]


def test_every_task_loads_cleanly() -> None:
    tasks, skipped = load_benchmark(BENCH)
    assert skipped == []
    assert len(tasks) >= 10
    assert sorted(t.task_id for t in tasks) == sorted(EXPECTED_EXECUTION)
    for task in tasks:
        assert task.config_error is None, task.task_id
        assert task.unknown_keys == [], task.task_id
        assert task.missing_files == [], task.task_id
        assert task.skipped_files == [] and task.cuts == [], task.task_id
        assert task.file("instruction.md").text.strip()
        assert [f.path for f in task.by_role("tests")][0] == "tests/test.sh"
        assert any(f.path.endswith(".py") for f in task.by_role("tests")), task.task_id
        assert task.by_role("environment"), task.task_id
        assert "/app" in task.hints  # the benchmark-level hint reaches every task
        assert os.access(task.root / "tests" / "test.sh", os.X_OK)
        assert os.access(task.root / "solution" / "solve.sh", os.X_OK)


def test_gold_json_is_consistent() -> None:
    assert set(GOLD) == {"tasks"}
    ids = task_ids()
    seen: set[str] = set()
    for task_id, entry in GOLD["tasks"].items():
        assert task_id in ids, f"gold.json names unknown task {task_id}"
        assert len(entry["issues"]) == 1, task_id  # one seeded defect per defective task
        for issue in entry["issues"]:
            assert set(issue) == {"id", "description", "category"}
            assert issue["id"] not in seen, f"duplicate gold id {issue['id']}"
            seen.add(issue["id"])
            assert issue["category"] in SUBCATEGORIES, issue
            assert len(issue["description"]) > 40
    assert len(clean_task_ids()) >= 3
    covered = {i["category"] for e in GOLD["tasks"].values() for i in e["issues"]}
    assert covered >= {
        "INST-CONTRADICT",
        "EVAL-MISMATCH",
        "INST-INCOMPLETE",
        "ENV-DEP",
        "ENV-PATH",
        "EVAL-TOLERANCE",
        "GT-LOGIC",
        "EVAL-COVERAGE",
        "ENV-RESOURCE",
    }


def test_hints_and_readme_match_the_tasks() -> None:
    hints = load_hints(BENCH)
    assert hints.unknown_task_ids(set(task_ids())) == []
    assert hints.local == ["inventory-by-category"]
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    for task_id in task_ids():
        assert f"`{task_id}`" in readme, task_id
    for entry in GOLD["tasks"].values():
        for issue in entry["issues"]:
            assert issue["id"] in readme and issue["category"] in readme


def test_only_local_tasks_have_a_dockerfile() -> None:
    hints = load_hints(BENCH)
    for task_id in task_ids():
        if (BENCH / task_id / "environment" / "Dockerfile").exists():
            assert hints.is_local(task_id), task_id


@pytest.fixture(scope="module")
def execution_results() -> dict:
    saved = os.environ.pop(bwrap_mod.FORCE_FALLBACK_ENV, None)
    try:
        if not bwrap_available():
            if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
                pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run on this machine")
            pytest.skip("bubblewrap (bwrap) is not usable on this machine")
        hints = load_hints(BENCH)
        tasks, _ = load_benchmark(BENCH, hints=hints)
        with pytest.MonkeyPatch.context() as patch:
            # the tasks' images taken as the real ones: on this machine python:3.11-slim is
            # an offline stand-in, whose capped evidence test_audit_container.py covers
            patch.setattr(execution_checks, "stand_in_images", lambda engine, refs: [])
            return {t.task_id: run_execution_checks(t, hints=hints, timeout_s=60) for t in tasks}
    finally:
        if saved is not None:
            os.environ[bwrap_mod.FORCE_FALLBACK_ENV] = saved


@pytest.mark.bwrap
@pytest.mark.parametrize("task_id", sorted(k for k in EXPECTED_EXECUTION if k not in GOLD["tasks"]))
def test_clean_task_oracle_passes_in_the_sandbox(execution_results: dict, task_id: str) -> None:
    result = execution_results[task_id]
    assert result.skipped is None
    assert result.oracle.passed, result.oracle.log
    assert result.null_agent.ran and not result.null_agent.passed, result.null_agent.log
    assert result.findings == []


@pytest.mark.bwrap
@pytest.mark.parametrize("task_id", sorted(EXPECTED_EXECUTION))
def test_execution_checks_see_exactly_the_execution_visible_defects(
    execution_results: dict, task_id: str
) -> None:
    result = execution_results[task_id]
    assert result.skipped is None
    assert [f.subcategory for f in result.findings] == EXPECTED_EXECUTION[task_id], (
        result.oracle.log + result.null_agent.log
    )
    for finding in result.findings:
        gold = [i["category"] for i in GOLD["tasks"][task_id]["issues"]]
        assert finding.subcategory in gold
