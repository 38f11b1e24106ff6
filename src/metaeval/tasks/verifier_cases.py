"""Which individual tests of a verifier run passed, from what the tests left behind.

Three sources, the first that names any test wins:

- a CTRF report, `/logs/verifier/ctrf.json` (what `pytest --ctrf` writes; terminal-bench
  tasks ask for it): `results.tests[].name` and `.status`;
- a JUnit XML report, `/logs/verifier/junit.xml` (`pytest --junitxml`): each `<testcase>`,
  failed when it holds `<failure>` or `<error>`, skipped when it holds `<skipped>`;
- pytest's own lines in the verifier's output: the `-rA` summary (`PASSED path::test`) and
  verbose lines (`path::test PASSED [ 50%]`).

A run whose output has none of them has no per-test outcomes (`None`); that says nothing
about the tests, only that they cannot be told apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal
from xml.etree import ElementTree

from pydantic import BaseModel

from metaeval.tasks.safe_files import UnsafeFileError, read_regular

CTRF = "ctrf.json"
JUNIT = "junit.xml"
REPORT_FILES = (CTRF, JUNIT)
MAX_REPORT_BYTES = 4 * 1024 * 1024

Status = Literal["passed", "failed", "skipped"]
_PYTEST_STATUS: dict[str, Status] = {
    "PASSED": "passed",
    "XPASS": "passed",
    "FAILED": "failed",
    "ERROR": "failed",
    "SKIPPED": "skipped",
    "XFAIL": "skipped",
}
_WORDS = "|".join(_PYTEST_STATUS)
_SUMMARY = re.compile(rf"^({_WORDS}) (\S+::\S+)")  # -rA: "PASSED tests/t.py::test_a"
_VERBOSE = re.compile(rf"^(\S+::\S+) ({_WORDS})\b")  # -v: "tests/t.py::test_a PASSED [50%]"


class CaseOutcome(BaseModel):
    """One test of a verifier run and how it ended."""

    name: str
    status: Status


class CaseOutcomes(BaseModel):
    """The per-test outcomes of one verifier run and where they were read."""

    source: str  # "ctrf.json", "junit.xml" or "pytest output"
    tests: list[CaseOutcome]

    def named(self, status: Status) -> list[str]:
        return [t.name for t in self.tests if t.status == status]


def read_reports(logs: Path) -> dict[str, str]:
    """The report files (`REPORT_FILES`) the tests left in the verifier logs directory
    `logs`, as text; a file that is missing, not regular or too large is left out."""
    found = {}
    for name in REPORT_FILES:
        try:
            data = read_regular(logs / name, logs, max_bytes=MAX_REPORT_BYTES)
        except (OSError, UnsafeFileError):
            continue
        found[name] = data.decode("utf-8", errors="replace")
    return found


def case_outcomes(output: str, reports: dict[str, str]) -> CaseOutcomes | None:
    """The per-test outcomes of a verifier run from its report files (by name) and its
    output, or None when neither names a test."""
    for source, parse in ((CTRF, _ctrf), (JUNIT, _junit)):
        text = reports.get(source)
        tests = parse(text) if text else []
        if tests:
            return CaseOutcomes(source=source, tests=tests)
    tests = _pytest_lines(output)
    return CaseOutcomes(source="pytest output", tests=tests) if tests else None


def _ctrf(text: str) -> list[CaseOutcome]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return []
    results = data.get("results") if isinstance(data, dict) else None
    tests = results.get("tests") if isinstance(results, dict) else None
    found = []
    for test in tests if isinstance(tests, list) else []:
        if not isinstance(test, dict) or not isinstance(test.get("name"), str):
            continue
        status = str(test.get("status", "")).lower()
        if status in ("passed", "failed"):
            found.append(CaseOutcome(name=test["name"], status=status))  # type: ignore[arg-type]
        else:  # skipped, pending, other
            found.append(CaseOutcome(name=test["name"], status="skipped"))
    return _unique(found)


def _junit(text: str) -> list[CaseOutcome]:
    try:
        root = ElementTree.fromstring(text)  # noqa: S314 - the tests' own report, no entities
    except ElementTree.ParseError:
        return []
    found = []
    for case in root.iter("testcase"):
        name = case.get("name")
        if not name:
            continue
        classname = case.get("classname")
        tags = {child.tag for child in case}
        status: Status = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        found.append(CaseOutcome(name=f"{classname}::{name}" if classname else name, status=status))
    return _unique(found)


def _pytest_lines(output: str) -> list[CaseOutcome]:
    found = []
    for line in output.splitlines():
        line = line.strip()
        match = _SUMMARY.match(line)
        if match:
            found.append(CaseOutcome(name=match[2], status=_PYTEST_STATUS[match[1]]))
            continue
        match = _VERBOSE.match(line)
        if match:
            found.append(CaseOutcome(name=match[1], status=_PYTEST_STATUS[match[2]]))
    return _unique(found)


def _unique(tests: list[CaseOutcome]) -> list[CaseOutcome]:
    """One outcome per test name (a failure wins: `-v` and `-rA` both list a test, and an
    error in teardown follows its pass)."""
    by_name: dict[str, CaseOutcome] = {}
    for test in tests:
        kept = by_name.get(test.name)
        if kept is None or test.status == "failed":
            by_name[test.name] = test
    return list(by_name.values())
