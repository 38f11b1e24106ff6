"""Issue 26: the static audit tells the truth on real task idioms.

tests/fixtures/audit-truth/clean/ holds valid tasks written in the idioms that public
benchmarks use and that the audit used to accuse (a module the instruction asks for, a
tests/ .py file that is data, C extensions and ImportError fallbacks, distribution names
that differ from import names, a solution-written module run with the verifier's installs,
directories made earlier in the same script, the tests' own installs). Each must get
nothing above Low through the path findings are recorded by (`static_cell`). Each has a
defective twin in defective/ whose defect must still be found.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.cells.static import static_cell
from metaeval.protocols.audit.dedupe import merge_check_findings
from metaeval.protocols.audit.evidence import verify_evidence
from metaeval.protocols.audit.findings import Evidence, Finding, apply_tier_rule
from metaeval.protocols.audit.llm_protocol import audit_task
from metaeval.protocols.audit.task_view import load_task
from metaeval.records.blobs import BlobStore

BENCH = Path(__file__).parent / "fixtures" / "audit-truth"
CLEAN = sorted(p.name for p in (BENCH / "clean").iterdir())
ABOVE_LOW = ("Critical", "High", "Medium")


def recorded(task_id: str, tmp_path: Path) -> list[Finding]:
    """The findings a static-only run records for one task (no execution)."""
    task = load_task(BENCH / task_id, bench_root=BENCH)
    cell, findings = static_cell(
        task,
        {"task_id": task.task_id, "source": "static", "attempt": "a1"},
        hints=None,
        execution_checks=False,
        sandbox="auto",
        blobs=BlobStore(tmp_path / "blobs"),
    )
    assert "check_errors" not in cell, cell
    return [Finding.model_validate(f) for f in findings]


@pytest.mark.parametrize("name", CLEAN)
def test_clean_task_gets_nothing_above_low(name: str, tmp_path: Path) -> None:
    loud = [
        (f.subcategory, f.severity, f.title)
        for f in recorded(f"clean/{name}", tmp_path)
        if f.severity in ABOVE_LOW
    ]
    assert loud == []


def test_every_clean_task_has_a_defective_twin() -> None:
    assert sorted(p.name for p in (BENCH / "defective").iterdir()) == CLEAN


DEFECTS = {
    # twin: (subcategory, severity, evidence tier, words of the title). A missing module or
    # path is an absence claim: without a run in the task's image it is `assumed`, at Low.
    "asked-module": ("ENV-DEP", "Low", "assumed", "`pandas`"),
    "tests-data-py": ("ENV-DEP", "Low", "assumed", "`numpy`"),
    "extension-fallback": ("ENV-DEP", "Low", "assumed", "`ujson`"),
    "dist-names": ("ENV-DEP", "Low", "assumed", "`scipy`"),
    "solution-writes-module": ("ENV-DEP", "Low", "assumed", "`numpy`"),
    "paths-dataflow": ("ENV-PATH", "Low", "assumed", "/data/reference"),
    "tests-installs": ("ENV-DEP", "Low", "assumed", "`yaml`"),
    "shell-verifier-name": ("EVAL-MISMATCH", "High", "self-contained", "vowels.txt"),
    "tests-own-files": ("EVAL-MISMATCH", "High", "self-contained", "report.json"),
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_defective_twin_is_still_found(name: str, tmp_path: Path) -> None:
    subcategory, severity, tier, words = DEFECTS[name]
    found = [f for f in recorded(f"defective/{name}", tmp_path) if f.subcategory == subcategory]
    assert [(f.severity, f.evidence_tier) for f in found] == [(severity, tier)], found
    assert words in found[0].title
    assert found[0].evidence_verified is True


def test_clean_and_defective_shell_verifiers_differ_only_in_the_file_name(tmp_path) -> None:
    clean = recorded("clean/shell-verifier-name", tmp_path)
    assert [f for f in clean if f.subcategory == "EVAL-MISMATCH"] == []
    [finding] = [
        f
        for f in recorded("defective/shell-verifier-name", tmp_path)
        if f.subcategory == "EVAL-MISMATCH"
    ]
    assert "answer.txt" in finding.title and finding.evidence[1].file == "tests/test.sh"


def test_a_prebuilt_image_makes_a_missing_module_an_assumed_low(tmp_path: Path) -> None:
    task_dir = tmp_path / "bench" / "prebuilt"
    src = BENCH / "defective" / "asked-module"
    for path in src.rglob("*"):
        if path.is_file() and "environment" not in path.parts:
            target = task_dir / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text() + 'docker_image = "alexgshaw/fastcsv:20251031"\n')
    task = load_task(task_dir, bench_root=tmp_path / "bench")
    _, records = static_cell(
        task,
        {"task_id": task.task_id, "source": "static", "attempt": "a1"},
        hints=None,
        execution_checks=False,
        sandbox="auto",
        blobs=BlobStore(tmp_path / "blobs"),
    )
    [finding] = [Finding.model_validate(f) for f in records if f["subcategory"] == "ENV-DEP"]
    assert finding.evidence_tier == "assumed"
    assert (finding.severity, finding.finding_type) == ("Low", "Warning")
    assert finding.confidence <= 0.3
    assert "the image `alexgshaw/fastcsv:20251031` could not be inspected" in finding.description
    assert "`pandas` may come with it" in finding.description


def make(tier: str | None, severity: str = "Critical", file: str = "tests/test.sh") -> Finding:
    return Finding(
        task_id="t",
        category="ENV",
        subcategory="ENV-DEP",
        severity=severity,  # type: ignore[arg-type]
        finding_type="Bug",
        title="x",
        description="d",
        evidence=[Evidence(file=file)],
        confidence=0.9,
        source="static",
        protocol="static",
        evidence_tier=tier,  # type: ignore[arg-type]
    )


def test_the_tier_rule_caps_only_assumed_findings() -> None:
    capped = apply_tier_rule(make("assumed"))
    assert (capped.severity, capped.finding_type, capped.confidence) == ("Low", "Warning", 0.3)
    for tier in ("executed", "self-contained"):
        kept = apply_tier_rule(make(tier))
        assert (kept.severity, kept.confidence) == ("Critical", 0.9)


def test_records_without_a_tier_load_with_one_from_their_evidence() -> None:
    old = make(None).model_dump(mode="json")
    del old["evidence_tier"]
    assert Finding.model_validate(old).evidence_tier == "self-contained"
    old["evidence"] = [{"file": "./logs/oracle.log", "snippet": "boom"}]
    assert Finding.model_validate(old).evidence_tier == "executed"


def test_a_model_citing_an_oracle_log_line_does_not_get_the_executed_tier(
    tmp_path: Path,
) -> None:
    """Gaming: a reply that quotes an oracle log (real or invented) as its evidence claims
    the run confirmed it. No execution check did, so the finding stays `self-contained`, is
    left out by `--min-tier executed`, and its log citation does not verify."""
    task_dir = write_task(
        tmp_path / "t",
        {
            "instruction.md": "Write 5 to /app/out.txt.\n",
            "solution/solve.sh": "#!/bin/bash\necho 5 > /app/out.txt\n",
            "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n",
        },
    )
    task = load_task(task_dir)
    claim = {
        "category": "ENV",
        "subcategory": "ENV-DEP",
        "severity": "Critical",
        "finding_type": "Bug",
        "title": "The oracle run fails: numpy is missing",
        "description": "The oracle log shows the reference solution crashing.",
        "evidence": [
            {
                "file": "logs/oracle.log",
                "line_start": 1,
                "line_end": 1,
                "snippet": "ModuleNotFoundError: No module named 'numpy'",
            }
        ],
        "recommendation": "Install numpy.",
        "confidence": 0.99,
        "evidence_tier": "executed",  # asked for outright as well
    }
    model = ScriptedModel([json.dumps([claim])], name="scripted/gamer")
    audit = audit_task(task, model, protocol="definition")
    [finding] = audit.findings
    assert finding.evidence_tier == "self-contained"
    assert not finding.at_least("executed")
    checked = verify_evidence(finding, task)  # no execution ran: there is no log to match
    assert checked.evidence_verified is False
    assert any("logs/oracle.log" in p for p in checked.evidence_problems)
    # only an execution check's own finding, folded in, confirms a defect
    assert merge_check_findings([finding], [])[0].evidence_tier == "self-contained"


# --------------------------------------------------------------------------- diagnoses
# Oracle failures whose cause is in the log and the task's files: the specific finding,
# with the failing oracle run folded in as evidence (real bubblewrap runs).

TOML_NO_NET = (BENCH / "clean" / "asked-module" / "task.toml").read_text()

CHECKER_SH = """#!/bin/bash
mkdir -p /logs/verifier
if python3 /tests/check.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def write_task(root: Path, files: dict[str, str]) -> Path:
    for rel, text in {"task.toml": TOML_NO_NET, "tests/test.sh": CHECKER_SH, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".sh"):
            path.chmod(0o755)
    return root


def oracle_findings(task_dir: Path) -> list[Finding]:
    from metaeval.protocols.audit.execution_checks import run_execution_checks

    task = load_task(task_dir, bench_root=task_dir.parent)
    result = run_execution_checks(task, hints=None, timeout_s=60)
    assert result.skipped is None and result.oracle.ran and not result.oracle.passed
    return result.findings


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from metaeval.sandbox import bwrap as bwrap_mod
    from metaeval.sandbox.bwrap import bwrap_available

    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    if not bwrap_available():
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run on this machine")
        pytest.skip("bubblewrap (bwrap) is not usable on this machine")


@pytest.mark.bwrap
def test_a_missing_fixture_is_env_path_not_gt_logic(sandboxed: None, tmp_path: Path) -> None:
    task_dir = write_task(
        tmp_path / "bench" / "sort-records",
        {
            "instruction.md": "Sort the numbers in /app/numbers.json and write them to "
            "/app/sorted.json.\n",
            "environment/numbers.json": "[3, 1, 2]\n",
            "solution/solve.sh": '#!/bin/bash\npython3 -c "import json; json.dump(sorted('
            "json.load(open('/app/numbers.json'))), open('/app/sorted.json', 'w'))\"\n",
            "tests/check.py": "import json\n"
            "expected = json.load(open('/tests/expected_sorted.json'))\n"
            "assert json.load(open('/app/sorted.json')) == expected\n",
        },
    )
    [finding] = oracle_findings(task_dir)
    assert (finding.subcategory, finding.severity) == ("ENV-PATH", "High")
    assert "/tests/expected_sorted.json" in finding.title
    assert finding.evidence_tier == "executed"
    assert "reference solution fails its own tests" in finding.description
    assert "expected_sorted.json" in finding.evidence[0].snippet


@pytest.mark.bwrap
def test_a_solution_reading_another_input_is_inst_contradict(
    sandboxed: None, tmp_path: Path
) -> None:
    task_dir = write_task(
        tmp_path / "bench" / "sales-total",
        {
            "instruction.md": "Sum the `amount` column of /app/sales.csv and write the total "
            "to /app/total.txt.\n",
            "environment/sales.csv": "amount\n3\n4\n",
            "solution/solve.sh": "#!/bin/bash\npython3 - <<'EOF'\nimport csv\n"
            "rows = list(csv.DictReader(open('/app/sales_2023.csv')))\n"
            "open('/app/total.txt', 'w').write(str(sum(int(r['amount']) for r in rows)))\nEOF\n",
            "tests/check.py": "assert open('/app/total.txt').read().strip() == '7'\n",
        },
    )
    [finding] = oracle_findings(task_dir)
    assert (finding.subcategory, finding.severity) == ("INST-CONTRADICT", "High")
    assert "`sales.csv`" in finding.title and "`sales_2023.csv`" in finding.title


@pytest.mark.bwrap
def test_tests_reading_another_output_is_eval_mismatch(sandboxed: None, tmp_path: Path) -> None:
    task_dir = write_task(
        tmp_path / "bench" / "grade-mean",
        {
            "instruction.md": "Write the mean of /app/grades.txt to /app/result.txt.\n",
            "environment/grades.txt": "2\n4\n",
            "solution/solve.sh": "#!/bin/bash\necho 3 > /app/result.txt\n",
            "tests/check.py": "assert open('/app/output.txt').read().strip() == '3'\n",
        },
    )
    findings = oracle_findings(task_dir)
    assert [(f.subcategory, f.severity) for f in findings] == [("EVAL-MISMATCH", "High")]
    assert "`output.txt`" in findings[0].title and "`result.txt`" in findings[0].title


@pytest.mark.bwrap
def test_an_oracle_failure_without_a_cause_stays_gt_logic(sandboxed: None, tmp_path) -> None:
    task_dir = write_task(
        tmp_path / "bench" / "median",
        {
            "instruction.md": "Write the median of /app/prices.txt to /app/median.txt.\n",
            "environment/prices.txt": "8\n14\n20\n",
            "solution/solve.sh": "#!/bin/bash\necho 8 > /app/median.txt\n",
            "tests/check.py": "assert open('/app/median.txt').read().strip() == '14'\n",
        },
    )
    [finding] = oracle_findings(task_dir)
    assert finding.subcategory == "GT-LOGIC"


# --------------------------------------------------------------------------- --min-tier


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args], capture_output=True, text=True, timeout=600
    )


def test_min_tier_filters_the_run_and_the_score(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(BENCH / "defective" / "tests-own-files", bench / "local")
    shutil.copytree(BENCH / "defective" / "asked-module", bench / "prebuilt")
    shutil.rmtree(bench / "prebuilt" / "environment")  # the prebuilt image instead
    toml = bench / "prebuilt" / "task.toml"
    toml.write_text(toml.read_text() + 'docker_image = "alexgshaw/fastcsv:20251031"\n')
    gold = tmp_path / "gold.json"
    gold.write_text(
        json.dumps(
            {
                "tasks": {
                    t: {
                        "issues": [
                            {
                                "id": t,
                                "category": category,
                                "description": "The tests import pandas, which nothing installs "
                                "in the environment."
                                if category == "ENV-DEP"
                                else "The tests read another report file than the one the "
                                "instruction names.",
                            }
                        ]
                    }
                    for t, category in (("local", "EVAL-MISMATCH"), ("prebuilt", "ENV-DEP"))
                }
            }
        )
    )

    every = cli(
        "audit", "run", str(bench), "--static-only", "--no-execution", "-o", str(tmp_path / "all")
    )
    assert every.returncode == 0, every.stderr
    assert "evidence: self-contained 1, assumed 1" in every.stdout
    # said once: the prebuilt task's missing module is an absence claim nothing ran to show
    assert every.stdout.count("1 absence claim(s) stayed unconfirmed") == 1
    assert "--pull missing" in every.stdout
    every_report = (tmp_path / "all" / "report.md").read_text()
    assert "**Evidence tier:** assumed: absence claim; not seen:" in every_report
    assert "**Evidence tier:** self-contained: intrinsic claim" in every_report
    strong = cli(
        "audit",
        "run",
        str(bench),
        "--static-only",
        "--no-execution",
        "--min-tier",
        "self-contained",
        "-o",
        str(tmp_path / "strong"),
    )
    assert strong.returncode == 0, strong.stderr
    summary = json.loads((tmp_path / "strong" / "summary.json").read_text())
    assert summary["findings_by_evidence"] == {"self-contained": 1}
    assert summary["findings_below_min_tier"] == 1
    report = (tmp_path / "strong" / "report.md").read_text()
    assert "| local | EVAL-MISMATCH | High | Bug | self-contained |" in report
    assert "prebuilt |" not in report.split("## Tasks")[0]

    score = cli(
        "audit",
        "score",
        str(tmp_path / "all"),
        "--gold",
        str(gold),
        "--judge",
        "category",
        "--min-tier",
        "self-contained",
    )
    assert score.returncode == 0, score.stderr
    scored = json.loads((tmp_path / "all" / "score.json").read_text())
    static_row = next(r for r in scored["rows"] if r["name"] == "static")
    assert static_row["n_findings"] == 1

    bad = cli(
        "audit",
        "score",
        str(tmp_path / "all"),
        "--gold",
        str(gold),
        "--judge",
        "category",
        "--min-tier",
        "certain",
    )
    assert bad.returncode != 0 and "unknown evidence tier 'certain'" in bad.stderr + bad.stdout
    assert "min_tier" in bad.stderr + bad.stdout
