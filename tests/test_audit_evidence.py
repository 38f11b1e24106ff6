"""Evidence verification: citations checked against the loaded task files."""

from __future__ import annotations

from pathlib import Path

from metaeval.protocols.audit.evidence import normalize_path, resolve_file, verify_evidence
from metaeval.protocols.audit.findings import Evidence, Finding
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile

SOLVE = """#!/bin/bash
set -e
mkdir -p /app/output
python3 - <<'PY'
import collections, csv, re
words = re.findall(r"[a-z]+", open('/app/data/input.txt').read())
counts = collections.Counter(words)
with open('/app/output/counts.csv', 'w') as f:
    w = csv.writer(f)
    w.writerow(['word', 'count'])
    for word, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        w.writerow([word, n])
PY
"""
TEST_PY = """import csv

def test_counts():
    rows = list(csv.reader(open('/app/output/counts.csv')))
    assert rows[0] == ['word', 'count']
    assert rows[1] == ['the', '12']
"""


def tf(path: str, role: str, text: str) -> TaskFile:
    size = len(text.encode())
    return TaskFile(path=path, role=role, text=text, raw_bytes=size, delivered_bytes=size)


TASK = LoadedTask(
    task_id="count-words",
    root=Path("/tmp/count-words"),
    files=[
        tf("instruction.md", "instruction", "Count the words.\nWrite counts.csv.\n"),
        tf("solution/solve.sh", "solution", SOLVE),
        tf("tests/test.sh", "tests", "#!/bin/bash\npytest /tests/test_outputs.py\n"),
        tf("tests/test_outputs.py", "tests", TEST_PY),
        tf("environment/setup.sh", "environment", "pip install pandas\n"),
        tf("environment/extra/setup.sh", "environment", "echo more\n"),
    ],
)


def finding(*evidence: Evidence, source: str = "m") -> Finding:
    return Finding(
        task_id="count-words",
        category="GT",
        subcategory="GT-LOGIC",
        severity="High",
        finding_type="Bug",
        title="t",
        description="d",
        evidence=list(evidence),
        confidence=0.9,
        source=source,
        protocol="definition",
    )


def check(ev: Evidence, **kw) -> Finding:
    return verify_evidence(finding(ev), TASK, **kw)


def test_valid_citation_is_verified() -> None:
    f = check(Evidence(file="solution/solve.sh", line_start=6, line_end=6, snippet="re.findall"))
    assert f.evidence_verified is True and f.evidence_problems == []


def test_multiline_snippet_with_odd_whitespace_and_line_numbers() -> None:
    snippet = "10|     w.writerow(['word',   'count'])\n11|     for word, n in sorted("
    f = check(Evidence(file="solution/solve.sh", line_start=10, line_end=11, snippet=snippet))
    assert f.evidence_verified is True, f.evidence_problems


def test_snippet_within_two_lines_of_the_range_is_accepted() -> None:
    f = check(Evidence(file="solution/solve.sh", line_start=4, line_end=4, snippet="re.findall"))
    assert f.evidence_verified is True  # at line 6, cited 4: within +-2
    f = check(Evidence(file="solution/solve.sh", line_start=3, line_end=3, snippet="re.findall"))
    assert f.evidence_verified is False


def test_snippet_elsewhere_reports_the_location() -> None:
    f = check(Evidence(file="solution/solve.sh", line_start=1, line_end=2, snippet="w.writerow"))
    assert f.evidence_verified is False
    assert f.evidence_problems == [
        "evidence[0] solution/solve.sh: snippet found at lines 10-10, not at the cited lines"
    ]


def test_multiline_snippet_elsewhere_reports_the_span() -> None:
    snippet = "counts = collections.Counter(words)\nwith open("
    f = check(Evidence(file="solution/solve.sh", line_start=1, line_end=1, snippet=snippet))
    assert f.evidence_problems == [
        "evidence[0] solution/solve.sh: snippet found at lines 7-8, not at the cited lines"
    ]


def test_snippet_not_found_anywhere() -> None:
    f = check(
        Evidence(file="tests/test_outputs.py", line_start=5, line_end=5, snippet="np.isclose")
    )
    assert f.evidence_problems == [
        "evidence[0] tests/test_outputs.py: snippet not found in tests/test_outputs.py"
    ]


def test_line_out_of_range_and_start_after_end() -> None:
    f = check(Evidence(file="tests/test_outputs.py", line_start=40, line_end=42, snippet=""))
    assert f.evidence_verified is False
    assert f.evidence_problems == [
        "evidence[0] tests/test_outputs.py: lines 40-42 are beyond the end of the file (6 lines)"
    ]
    f = check(Evidence(file="tests/test_outputs.py", line_start=5, line_end=3))
    assert f.evidence_problems == [
        "evidence[0] tests/test_outputs.py: line_start 5 is after line_end 3"
    ]
    f = check(Evidence(file="tests/test_outputs.py", line_start=0, line_end=1))
    assert "invalid (lines start at 1)" in f.evidence_problems[0]


def test_out_of_range_with_snippet_elsewhere_reports_both() -> None:
    f = check(
        Evidence(file="tests/test_outputs.py", line_start=60, line_end=61, snippet="import csv")
    )
    assert len(f.evidence_problems) == 2
    assert "beyond the end of the file" in f.evidence_problems[0]
    assert "snippet found at lines 1-1" in f.evidence_problems[1]


def test_missing_file() -> None:
    f = check(Evidence(file="tests/test_missing.py", line_start=1, line_end=1, snippet="x"))
    assert f.evidence_verified is False
    assert f.evidence_problems == [
        "evidence[0] tests/test_missing.py: file 'tests/test_missing.py' is not among the loaded task files"
    ]


def test_path_normalisation() -> None:
    for cited in (
        "solve.sh",
        "./solution/solve.sh",
        "/solution/solve.sh",
        "solution\\solve.sh",
        "count-words/solution/solve.sh",
    ):
        f = check(Evidence(file=cited, line_start=2, line_end=2, snippet="set -e"))
        assert f.evidence_verified is True, (cited, f.evidence_problems)
        assert f.evidence[0].file == "solution/solve.sh"  # canonical path in the copy
    # "/tests/test_outputs.py" as mounted in the container
    f = check(
        Evidence(file="/tests/test_outputs.py", line_start=1, line_end=1, snippet="import csv")
    )
    assert f.evidence_verified is True


def test_ambiguous_suffix_is_a_problem() -> None:
    f = check(Evidence(file="setup.sh", line_start=1, line_end=1, snippet="pip"))
    assert f.evidence_verified is False
    assert "ambiguous file 'setup.sh'" in f.evidence_problems[0]
    assert "environment/extra/setup.sh, environment/setup.sh" in f.evidence_problems[0]


def test_no_evidence() -> None:
    f = verify_evidence(finding(), TASK)
    assert f.evidence_verified is False
    assert f.evidence_problems == ["no evidence cited"]


def test_snippet_without_lines_may_be_anywhere() -> None:
    f = check(Evidence(file="tests/test_outputs.py", snippet="rows[1] == ['the', '12']"))
    assert f.evidence_verified is True
    f = check(Evidence(file="tests/test_outputs.py", snippet="rows[2]"))
    assert f.evidence_problems == [
        "evidence[0] tests/test_outputs.py: snippet not found in tests/test_outputs.py"
    ]


def test_ellipsis_in_snippet_is_a_gap() -> None:
    snippet = "for word, n in sorted(...)"
    f = check(Evidence(file="solution/solve.sh", line_start=11, line_end=11, snippet=snippet))
    assert f.evidence_verified is True, f.evidence_problems


def test_logs_need_extra_files() -> None:
    ev = Evidence(file="logs/oracle.log", line_start=2, line_end=2, snippet="FAILED test_counts")
    f = check(ev)
    assert f.evidence_verified is False
    assert "not a task file and no text was provided" in f.evidence_problems[0]
    log = "collected 1 item\nFAILED test_counts - AssertionError\n"
    f = check(ev, extra_files={"logs/oracle.log": log})
    assert f.evidence_verified is True, f.evidence_problems
    f = check(
        ev.model_copy(update={"line_start": 1, "line_end": 1}), extra_files={"logs/oracle.log": log}
    )
    assert f.evidence_verified is True  # within +-2 lines


def test_one_bad_item_makes_the_finding_unverified() -> None:
    good = Evidence(file="solution/solve.sh", line_start=2, line_end=2, snippet="set -e")
    bad = Evidence(file="nowhere.py", line_start=1, line_end=1)
    f = verify_evidence(finding(good, bad), TASK)
    assert f.evidence_verified is False
    assert len(f.evidence_problems) == 1 and f.evidence_problems[0].startswith(
        "evidence[1] nowhere.py"
    )
    # The input is not changed.
    assert finding(good, bad).evidence_verified is None


def test_normalize_and_resolve_helpers() -> None:
    assert normalize_path(" ./a//b/../c.py ") == "a/c.py"
    resolved, problem = resolve_file("/app/tests/test.sh", TASK)
    assert problem is None and resolved is not None and resolved.path == "tests/test.sh"


def test_citation_of_a_missing_file_verifies_only_without_lines(tmp_path):
    from metaeval.protocols.audit.evidence import verify_evidence
    from metaeval.protocols.audit.findings import Evidence, Finding
    from metaeval.protocols.audit.task_view import LoadedTask

    task = LoadedTask(task_id="t", root=tmp_path, missing_files=["tests/test.sh"])

    def finding(**ev):
        return Finding(
            task_id="t",
            category="EVAL",
            subcategory="EVAL-MISMATCH",
            severity="Critical",
            finding_type="Bug",
            title="no test.sh",
            description="d",
            confidence=0.9,
            source="static",
            protocol="static",
            evidence=[Evidence(file="tests/test.sh", **ev)],
        )

    assert verify_evidence(finding(), task).evidence_verified is True
    quoted = verify_evidence(finding(line_start=1, line_end=1, snippet="x"), task)
    assert quoted.evidence_verified is False
    assert "does not have" in quoted.evidence_problems[0]


def test_snippet_spanning_blank_lines_is_found(tmp_path):
    from metaeval.protocols.audit.evidence import verify_evidence
    from metaeval.protocols.audit.findings import Evidence, Finding
    from metaeval.protocols.audit.task_view import LoadedTask

    log = "first line\n\nTraceback (most recent call last):\n  File x\n"
    task = LoadedTask(task_id="t", root=tmp_path)
    finding = Finding(
        task_id="t",
        category="GT",
        subcategory="GT-LOGIC",
        severity="High",
        finding_type="Bug",
        title="oracle fails",
        description="d",
        confidence=0.9,
        source="static",
        protocol="static",
        evidence=[Evidence(file="logs/oracle.log", snippet="first line\n\nTraceback (most recent")],
    )
    checked = verify_evidence(finding, task, extra_files={"logs/oracle.log": log})
    assert checked.evidence_verified is True, checked.evidence_problems
