"""Issue 37: which tests pass under the null agent, per test, read from the verifier's output
(pytest's -rA/-v lines, a CTRF or JUnit report in /logs/verifier), not only from the reward.

The runs are real bubblewrap trials of small Harbor tasks. Rooms without an image have only
a stdlib Python, so each task's tests/test.sh runs its test functions with a small runner that
prints pytest's `-rA` summary lines (`PASSED tests/test_outputs.py::test_x`) or writes a CTRF
report, the formats pytest and pytest-json-ctrf write.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metaeval.protocols.audit.execution_checks import NO_CASES, run_execution_checks
from metaeval.protocols.audit.execution_results import ExecutionCheckResult
from metaeval.protocols.audit.task_hints import Hints
from metaeval.protocols.audit.task_view import load_task
from metaeval.tasks.verifier_cases import case_outcomes
from test_audit_container import engine  # noqa: F401 - the fixture is used by name
from test_audit_truth import TOML_NO_NET, sandboxed  # noqa: F401 - the fixture is used by name

RUNNER = """\
import json
import sys

sys.path.insert(0, "/tests")
import test_outputs

results = []
for name in sorted(n for n in dir(test_outputs) if n.startswith("test_")):
    try:
        getattr(test_outputs, name)()
        results.append((name, "passed"))
    except Exception as exc:
        results.append((name, "failed"))
        print(f"{name}: {exc!r}")
if "--ctrf" in sys.argv:
    tests = [{"name": f"tests/test_outputs.py::{n}", "status": s} for n, s in results]
    with open("/logs/verifier/ctrf.json", "w") as handle:
        json.dump({"results": {"tool": {"name": "pytest"}, "tests": tests}}, handle)
if "--rA" in sys.argv:
    print("=========================== short test summary info ============================")
    for name, status in results:
        print(f"{status.upper()} tests/test_outputs.py::{name}")
sys.exit(0 if all(s == "passed" for _, s in results) else 1)
"""


def script(flags: str = "--rA", extra: str = "") -> str:
    return (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        f"python3 /tests/run.py {flags}{extra}\n"
        "if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
    )


GUARDED = """\
import json
import os


def test_input_intact():
    assert json.load(open("/app/numbers.json")) == [3, 1, 2]


def test_sorted_values():
    if os.path.exists("/app/sorted.json"):
        assert json.load(open("/app/sorted.json")) == [1, 2, 3]


def test_sorted_file():
    assert json.load(open("/app/sorted.json")) == [1, 2, 3]
"""
# the look-alike: every test reads the output, so none passes without it
UNGUARDED = """\
import json


def test_sorted_values():
    assert json.load(open("/app/sorted.json")) == [1, 2, 3]


def test_sorted_length():
    assert len(json.load(open("/app/sorted.json"))) == 3
"""
ALL_GUARDED = """\
import json
import os


def test_sorted_values():
    if os.path.exists("/app/sorted.json"):
        assert json.load(open("/app/sorted.json")) == [1, 2, 3]
"""


def write(root: Path, tests: str, sh: str) -> Path:
    files = {
        "task.toml": TOML_NO_NET,
        "instruction.md": "Sort the numbers of /app/numbers.json into /app/sorted.json.\n",
        "environment/numbers.json": "[3, 1, 2]\n",
        "solution/solve.sh": "#!/bin/bash\necho '[1, 2, 3]' > /app/sorted.json\n",
        "tests/run.py": RUNNER,
        "tests/test_outputs.py": tests,
        "tests/test.sh": sh,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def run(tmp_path: Path, tests: str, sh: str | None = None) -> ExecutionCheckResult:
    task_dir = write(tmp_path / "bench" / "sort-numbers", tests, sh or script())
    task = load_task(task_dir, bench_root=task_dir.parent)
    result = run_execution_checks(task, hints=None, timeout_s=60)
    assert result.skipped is None and result.oracle.passed, result.oracle.log
    return result


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_a_test_that_passes_without_any_work_is_named(tmp_path: Path) -> None:
    result = run(tmp_path, GUARDED)
    assert result.null_agent.reward == 0  # the reward alone says nothing is wrong
    [finding] = result.findings
    assert (finding.subcategory, finding.evidence_tier) == ("EVAL-COVERAGE", "executed")
    assert (finding.severity, finding.finding_type) == ("Low", "Warning")
    assert finding.title == (
        "2 of 3 tests pass when the agent does nothing: `test_input_intact`, `test_sorted_values`"
    )
    cited = [e.snippet for e in finding.evidence]
    assert "PASSED tests/test_outputs.py::test_sorted_values" in cited
    assert all(
        e.file == "logs/null_agent.log" and e.snippet in result.null_agent.log
        for e in finding.evidence
    )
    assert finding.tier_reason == "shown by a run of the tests without any agent work"
    cases = result.null_agent.cases
    assert cases is not None and cases.source == "pytest output"
    assert cases.named("failed") == ["tests/test_outputs.py::test_sorted_file"]


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_tests_that_all_need_the_output_are_not_a_finding(tmp_path: Path) -> None:
    result = run(tmp_path, UNGUARDED)
    assert result.findings == []
    assert result.null_agent.cases is not None
    assert result.null_agent.cases.named("passed") == []


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_every_test_passing_with_a_reward_of_zero_is_medium(tmp_path: Path) -> None:
    """test.sh gives 0 for another reason (it also wants a file no test reads): the tests
    themselves still accept no work."""
    sh = script(extra=" && test -s /app/sorted.json")
    result = run(tmp_path, ALL_GUARDED, sh)
    assert result.null_agent.reward == 0
    [finding] = result.findings
    assert (finding.severity, finding.evidence_tier) == ("Medium", "executed")
    assert finding.title == "Every test passes when the agent does nothing: `test_sorted_values`"


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_a_ctrf_report_names_the_tests(tmp_path: Path) -> None:
    result = run(tmp_path, GUARDED, script("--ctrf"))
    [finding] = result.findings
    assert finding.severity == "Low" and "`test_sorted_values`" in finding.title
    cases = result.null_agent.cases
    assert cases is not None and cases.source == "ctrf.json"
    assert "PASSED" not in result.null_agent.log  # the names came from the report


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_a_log_without_per_test_lines_stays_quiet(tmp_path: Path) -> None:
    result = run(tmp_path, GUARDED, script(""))
    assert result.findings == []
    assert result.null_agent.cases is None and result.null_agent.cases_note == NO_CASES


def test_outcomes_read_from_each_format() -> None:
    verbose = (
        "tests/test_a.py::test_one PASSED                 [ 50%]\n"
        "tests/test_a.py::test_two FAILED                 [100%]\n"
        "=== short test summary info ===\n"
        "PASSED tests/test_a.py::test_one\n"
        "FAILED tests/test_a.py::test_two - assert 1 == 2\n"
        "ERROR tests/test_a.py::test_one - teardown failed\n"
    )
    cases = case_outcomes(verbose, {})
    assert cases is not None
    assert cases.named("passed") == [] and cases.named("failed") == [
        "tests/test_a.py::test_one",
        "tests/test_a.py::test_two",
    ]
    junit = (
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="test_one"/>'
        '<testcase classname="tests.test_a" name="test_two"><failure message="x"/></testcase>'
        '<testcase classname="tests.test_a" name="test_three"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    cases = case_outcomes("", {"junit.xml": junit})
    assert cases is not None and cases.source == "junit.xml"
    assert [(c.name, c.status) for c in cases.tests] == [
        ("tests.test_a::test_one", "passed"),
        ("tests.test_a::test_two", "failed"),
        ("tests.test_a::test_three", "skipped"),
    ]
    ctrf = json.dumps({"results": {"tests": [{"name": "t1", "status": "passed"}]}})
    assert case_outcomes(verbose, {"ctrf.json": ctrf}).source == "ctrf.json"  # type: ignore[union-attr]
    # a broken report falls back to the output; nothing at all is None
    assert case_outcomes(verbose, {"ctrf.json": "{not json"}).source == "pytest output"  # type: ignore[union-attr]
    assert case_outcomes("1 passed in 0.1s\n", {"junit.xml": "<oops"}) is None


@pytest.mark.usefixtures("engine")
def test_in_a_container_the_ctrf_report_comes_out_with_the_reward(tmp_path: Path) -> None:
    """Podman (the local stand-in base image): the report the tests write in the container's
    /logs/verifier is taken out beside the reward and names the tests."""
    root = write(tmp_path / "bench" / "sort-numbers", GUARDED, script("--ctrf"))
    dockerfile = "FROM python:3.11-slim\nWORKDIR /app\nCOPY numbers.json /app/\n"
    (root / "environment" / "Dockerfile").write_text(dockerfile)
    task = load_task(root, bench_root=root.parent, hints=Hints())
    result = run_execution_checks(task, hints=Hints(), timeout_s=180, sandbox="podman")
    assert result.skipped is None and result.backend.startswith("podman"), result.build_log
    cases = result.null_agent.cases
    assert cases is not None and cases.source == "ctrf.json"
    assert cases.named("failed") == ["tests/test_outputs.py::test_sorted_file"]
    [finding] = result.findings
    assert "`test_sorted_values`" in finding.title
    expected = ("Low", "assumed") if result.approximate else ("Low", "executed")
    assert (finding.severity, finding.evidence_tier) == expected
