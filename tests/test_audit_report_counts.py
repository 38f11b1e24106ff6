"""Issue 11 item 6: one finding per defect, skip reasons, file counts, flagged tasks, Markdown
rendered in the HTML report."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

from metaeval.protocols.audit.dedupe import merge_check_findings
from metaeval.protocols.audit.findings import SUBCATEGORIES, Evidence, Finding
from metaeval.protocols.audit.report import (
    AuditReportData,
    TaskEntry,
    findings_summary,
    render_html,
)
from metaeval.protocols.audit.report_markdown import render_markdown
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings

BENCH = Path(__file__).parent / "fixtures" / "audit-real"


def make(task: str, sub: str, title: str, severity: str = "High", **kw) -> Finding:
    return Finding(
        task_id=task,
        category=SUBCATEGORIES[sub],
        subcategory=sub,
        severity=severity,
        finding_type=kw.pop("finding_type", "Bug"),
        title=title,
        description=kw.pop("description", "Uses `numpy` in **tests**. <script>x()</script>"),
        evidence=kw.pop("evidence", [Evidence(file="tests/test_outputs.py", line_start=3)]),
        recommendation=kw.pop("recommendation", "Add `numpy` to requirements."),
        confidence=kw.pop("confidence", 0.7),
        source="static",
        protocol="static",
    )


def test_static_and_execution_views_of_one_defect_become_one_finding() -> None:
    static = [
        make("t", "ENV-DEP", "Tests import `scipy`, which the environment does not install"),
        make("t", "ENV-DEP", "Tests import `yaml`, which the environment does not install"),
        make("t", "EVAL-TOLERANCE", "Exact float equality", severity="Medium"),
    ]
    run_log = Evidence(
        file="logs/oracle.log", snippet="ModuleNotFoundError: No module named 'scipy'"
    )
    execution = [
        make(
            "t",
            "ENV-DEP",
            "The reference run needs 'scipy', which the environment lacks",
            severity="Critical",
            confidence=0.9,
            evidence=[run_log],
        ),
        make("t", "EVAL-COVERAGE", "The tests pass when the agent does nothing"),
    ]
    merged = merge_check_findings(static, execution)
    assert [f.title.split(",")[0] for f in merged] == [
        "Tests import `scipy`",
        "Tests import `yaml`",
        "Exact float equality",
        "The tests pass when the agent does nothing",
    ]
    scipy = merged[0]
    assert scipy.severity == "Critical" and scipy.confidence == 0.9
    assert scipy.evidence[-1] == run_log and len(scipy.evidence) == 2
    assert "execution check confirmed" in scipy.description
    assert merged[1].evidence == static[1].evidence  # the other module is untouched
    assert static[0].severity == "High"  # inputs are not modified


def test_a_failed_oracle_that_reports_a_missing_shipped_file_folds_into_its_cause() -> None:
    """The oracle fails (GT-LOGIC, its effect) because solve.sh copies a file the task does not
    ship (ENV-PATH, its cause): one fix resolves both, so they are one finding."""
    cause = make(
        "t",
        "ENV-PATH",
        "solution/solve.sh reads `/solution/files/out.txt`, which the task does not ship",
    )
    other = make("t", "ENV-PATH", "Hard-coded path `/home/dev/data.csv`")
    oracle_log = Evidence(
        file="logs/oracle.log",
        snippet="$ bash /solution/solve.sh   [exit 1]\n"
        "cp: cannot stat '/solution/files/out.txt': No such file or directory\nreward: 0",
    )
    effect = make(
        "t", "GT-LOGIC", "The reference solution fails the task's own tests", evidence=[oracle_log]
    )
    merged = merge_check_findings([other, cause], [effect])
    assert [f.subcategory for f in merged] == ["ENV-PATH", "ENV-PATH"]
    assert merged[1].evidence[-1] == oracle_log and merged[0].evidence == other.evidence
    assert "execution check confirmed it: The reference solution fails" in merged[1].description
    # a log that merely mentions the path, without saying it is missing, is another defect
    unrelated = effect.model_copy(
        update={
            "evidence": [Evidence(file="logs/oracle.log", snippet="read /solution/files/out.txt")]
        }
    )
    assert len(merge_check_findings([cause], [unrelated])) == 2
    # and another task's log never folds
    elsewhere = effect.model_copy(update={"task_id": "u"})
    assert len(merge_check_findings([cause], [elsewhere])) == 2


def test_a_faithful_runs_log_shows_only_absence_claims_it_reports_missing() -> None:
    """A null agent's log saying a quoted path is missing makes that absence claim executed;
    a line that only mentions the path, or an intrinsic claim, stays as it was."""
    absence = make(
        "t",
        "INST-CONTRADICT",
        "The instruction's commands write `/app/a.csv`; the tests demand `/app/b.csv`",
    ).model_copy(update={"claim": "absence", "evidence_tier": "assumed"})
    intrinsic = absence.model_copy(update={"claim": "intrinsic"})
    missing = "FileNotFoundError: [Errno 2] No such file or directory: '/app/b.csv'"
    [shown] = merge_check_findings([absence], [], {"logs/null_agent.log": f"x\n{missing}\n"})
    assert shown.evidence_tier == "executed" and shown.evidence[-1].snippet == missing
    assert shown.evidence[-1].file == "logs/null_agent.log"
    [kept] = merge_check_findings([absence], [], {"logs/null_agent.log": "read /app/b.csv\n"})
    assert kept.evidence_tier == "assumed" and kept.evidence == absence.evidence
    [other] = merge_check_findings([intrinsic], [], {"logs/null_agent.log": missing})
    assert other.evidence_tier == "assumed" and other.evidence == absence.evidence


def _data(findings: list[Finding]) -> AuditReportData:
    return AuditReportData(
        benchmark="bench",
        run_id="r1",
        tasks=[
            TaskEntry(task_id="a", n_files=5, oracle="pass", null_agent="fail"),
            TaskEntry(
                task_id="b",
                n_files=7,
                oracle="skipped",
                null_agent="skipped",
                execution_notes="no container engine: podman not found",
            ),
            TaskEntry(task_id="c", n_files=3),
            TaskEntry(task_id="d", n_files=4),
        ],
        findings=findings,
    )


def test_summary_counts_findings_tasks_and_flagged_tasks() -> None:
    findings = [
        make("a", "ENV-DEP", "one"),
        make("a", "ENV-PATH", "two"),
        make("b", "ENV-DEP", "three"),
    ]
    data = _data(findings)
    assert findings_summary(data) == "3 findings on 4 tasks (2 flagged)"
    markdown = render_markdown(data)
    assert "- Findings reported: 3 findings on 4 tasks (2 flagged)" in markdown
    assert (
        "- Execution checks skipped: 1 of 2 tasks could run: 1 need a container engine and "
        "none works here (podman not found); `--no-execution` skips this step"
    ) in markdown
    assert "| b | audited | 7 |" in markdown
    assert "oracle skipped, null agent skipped (no container engine: podman not found)" in markdown
    page = render_html(data)
    assert "3 findings on 4 tasks (2 flagged)" in page
    assert page.count("no container engine: podman not found") >= 2  # summary and task row
    assert re.search(r'<td class="num">7</td>', page)


def test_html_renders_markdown_and_never_raw_html() -> None:
    page = render_html(_data([make("a", "ENV-DEP", "Tests import `scipy`")]))
    assert "<code>scipy</code>" in page  # title, inline
    assert "Uses <code>numpy</code> in <strong>tests</strong>." in page
    assert "<script>x()</script>" not in page
    assert html_lib.escape("<script>x()</script>", quote=False) in page
    assert "`numpy`" not in page  # no literal backticks left in the prose


def test_runner_records_file_counts_and_skip_reasons(tmp_path: Path) -> None:
    settings = AuditSettings(
        bench_dir=BENCH,
        run_dir=tmp_path / "run",
        static_only=True,
        execution_checks=False,
        task_filter=["clean/csv-dedupe", "defective/no-solution"],
        progress=False,
    )
    AuditRun(settings).run()
    report = (tmp_path / "run" / "report.md").read_text()
    # csv-dedupe ships 7 files besides task.toml (+ task.toml when the loader delivers it)
    rows = {
        line.split("|")[1].strip(): line
        for line in report.splitlines()
        if "| clean/" in line or "| defective/" in line
    }
    n_files = {task: int(row.split("|")[3]) for task, row in rows.items()}
    assert n_files["clean/csv-dedupe"] >= 7 and n_files["defective/no-solution"] >= 3
    assert "oracle skipped, null agent skipped (disabled)" in report
    assert "1 finding on 2 tasks (1 flagged)" in report
