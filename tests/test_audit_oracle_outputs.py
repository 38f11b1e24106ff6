"""Issue 37: tests that cannot tell a solution from none. After the oracle passes, the files
it created under the working directory are removed and the tests run again in the same room
(real bubblewrap trials of small Harbor tasks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from metaeval.protocols.audit.cells.static import static_cell
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.execution_results import ExecutionCheckResult
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.task_hints import Hints
from metaeval.protocols.audit.task_view import load_task
from metaeval.records.blobs import BlobStore
from test_audit_container import engine  # noqa: F401 - the fixture is used by name
from test_audit_truth import sandboxed, write_task  # noqa: F401 - the fixture is used by name

INSTRUCTION = (
    "Enable the cache in /app/settings.ini (set `cache = on`) and write the number of "
    "entries of /app/entries.txt to /app/answer.txt.\n"
)
SOLVE = (
    "#!/bin/bash\ncd /app\nsed -i 's/cache = off/cache = on/' settings.ini\n"
    "wc -l < entries.txt > answer.txt\n"
)
# checks the setting the oracle changed, never the answer it wrote
ONLY_SETTINGS = """\
text = open("/app/settings.ini").read()
assert "cache = on" in text, text
"""
BOTH = ONLY_SETTINGS + 'assert open("/app/answer.txt").read().strip() == "3"\n'
ENVIRONMENT = {
    "environment/settings.ini": "[app]\ncache = off\n",
    "environment/entries.txt": "a\nb\nc\n",
}


def task_dir(tmp_path: Path, check: str, **changes: str) -> Path:
    files = {
        "instruction.md": INSTRUCTION,
        "solution/solve.sh": SOLVE,
        "tests/check.py": check,
        **ENVIRONMENT,
        **changes,
    }
    return write_task(tmp_path / "bench" / "cache-count", files)


def run(root: Path) -> ExecutionCheckResult:
    task = load_task(root, bench_root=root.parent)
    result = run_execution_checks(task, hints=None, timeout_s=60)
    assert result.skipped is None and result.oracle.passed, result.oracle.log
    assert not result.null_agent.passed
    return result


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_tests_that_pass_without_the_asked_output_are_found(tmp_path: Path) -> None:
    result = run(task_dir(tmp_path, ONLY_SETTINGS))
    assert result.removed_files == ["/app/answer.txt"]
    assert result.oracle_other_changes == ["changed /app/settings.ini"]
    removed = result.outputs_removed
    assert removed is not None and removed.ran and removed.passed
    [finding] = result.findings
    assert (finding.subcategory, finding.severity, finding.evidence_tier) == (
        "EVAL-COVERAGE",
        "Medium",
        "executed",
    )
    assert (
        finding.title == "The tests pass without `/app/answer.txt`, which the instruction asks for"
    )
    [evidence] = finding.evidence
    assert evidence.file == "logs/oracle_outputs_removed.log" and evidence.snippet in removed.log
    assert "removed from /app: /app/answer.txt" in removed.log
    assert finding.tier_reason == "shown by rerunning the tests after removing the oracle's outputs"


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_tests_that_read_the_output_tell_it_from_none(tmp_path: Path) -> None:
    result = run(task_dir(tmp_path, BOTH))
    removed = result.outputs_removed
    assert removed is not None and removed.ran and not removed.passed
    assert result.findings == []
    assert removed.note == "the tests fail without the oracle's files: they tell them apart"
    assert "No such file or directory: '/app/answer.txt'" in removed.log


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_an_unnamed_file_beside_other_changes_is_not_a_finding(tmp_path: Path) -> None:
    """The oracle's created file is a scratch file the instruction never asks for; the tests
    may well check the setting it changed: recorded, no finding."""
    solve = SOLVE.replace("answer.txt", "notes.tmp")
    result = run(task_dir(tmp_path, ONLY_SETTINGS, **{"solution/solve.sh": solve}))
    removed = result.outputs_removed
    assert removed is not None and removed.passed and result.findings == []
    assert removed.note.startswith("the tests still pass without the oracle's files, but the")
    assert "changed /app/settings.ini" in removed.note


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_an_oracle_that_only_changes_the_images_files_has_nothing_to_remove(
    tmp_path: Path,
) -> None:
    solve = "#!/bin/bash\ncd /app\nsed -i 's/cache = off/cache = on/' settings.ini\n"
    result = run(task_dir(tmp_path, ONLY_SETTINGS, **{"solution/solve.sh": solve}))
    removed = result.outputs_removed
    assert removed is not None and not removed.ran and result.findings == []
    assert removed.note == (
        "not run: the oracle created no file under /app (it changed 1 of the image's files)"
    )
    # the image's own file was left as the oracle made it
    assert "changed /app/settings.ini" in result.oracle_other_changes


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_the_rerun_is_recorded_and_its_log_cited(tmp_path: Path) -> None:
    root = task_dir(tmp_path, ONLY_SETTINGS)
    task = load_task(root, bench_root=root.parent)
    base = {"task_id": task.task_id, "source": "static", "attempt": "a1"}
    common = {"hints": None, "sandbox": "auto", "blobs": BlobStore(tmp_path / "blobs")}
    cell, records = static_cell(task, base, execution_checks=True, **common)  # type: ignore[arg-type]
    execution = cell["execution"]
    assert execution["removed_files"] == ["/app/answer.txt"]
    assert execution["outputs_removed"]["passed"] is True
    [finding] = [Finding.model_validate(f) for f in records if f["subcategory"] == "EVAL-COVERAGE"]
    assert finding.evidence_verified is True  # the cited log is one the run stored


# ------------------------------------------------------------------------------ podman

DOCKERFILE = """\
FROM python:3.11-slim
WORKDIR /app
COPY settings.ini entries.txt /app/
"""


@pytest.mark.usefixtures("engine")
def test_in_a_container_the_rerun_sees_writes_outside_the_workdir(tmp_path: Path) -> None:
    """Podman with the local stand-in base image: the oracle also writes /etc/cache.conf,
    which removing /app's files does not undo; the finding is capped (a stand-in)."""
    solve = SOLVE + "echo on > /etc/cache.conf\n"
    root = task_dir(
        tmp_path,
        ONLY_SETTINGS,
        **{"environment/Dockerfile": DOCKERFILE, "solution/solve.sh": solve},
    )
    task = load_task(root, bench_root=root.parent, hints=Hints())
    result = run_execution_checks(task, hints=Hints(), timeout_s=180, sandbox="podman")
    assert result.skipped is None and result.oracle.passed, result.oracle.log + result.build_log
    assert result.backend.startswith("podman")
    assert result.removed_files == ["/app/answer.txt"]
    assert "wrote /etc/cache.conf" in result.oracle_other_changes
    assert "changed /app/settings.ini" in result.oracle_other_changes
    removed = result.outputs_removed
    assert removed is not None and removed.ran and removed.passed
    [finding] = result.findings
    assert (
        finding.title == "The tests pass without `/app/answer.txt`, which the instruction asks for"
    )
    if result.approximate:  # the stand-in base image: unconfirmed, capped
        assert (finding.severity, finding.evidence_tier) == ("Low", "assumed")
    else:
        assert (finding.severity, finding.evidence_tier) == ("Medium", "executed")
