"""Issue 37: the static audit claims only what it can show, and finds tests that do not test.

Every check class has a task with the defect and a look-alike without it (a fixture that
writes its own file, a guard backed by another test, a handler that records the failure).
Absence claims are `assumed` (Low once recorded) until a run shows them; a real bubblewrap
run of a task without an image (the host runtime is its runtime) makes one `executed`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from metaeval.protocols.audit.cells.static import static_cell
from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static_checks import STATIC_CHECKS, run_static_checks
from metaeval.protocols.audit.task_view import load_task
from metaeval.records.blobs import BlobStore
from test_audit_static_checks import BASE, make_task
from test_audit_truth import sandboxed, write_task  # noqa: F401 - the fixture is used by name

TEST_PY = "tests/test_outputs.py"


def findings_of(tmp_path: Path, files: dict[str, str | None], check: str) -> list[Finding]:
    task = make_task(tmp_path, files)
    [chosen] = [c for c in STATIC_CHECKS if c.name == check]
    return run_static_checks(task, [chosen])


# ------------------------------------------------------------------------------ claim kinds


def test_every_check_names_its_claims() -> None:
    for check in STATIC_CHECKS:
        assert check.claims and set(check.claims) <= {"intrinsic", "absence"}, check.name
    absence = {c.name for c in STATIC_CHECKS if "absence" in c.claims}
    assert {"absolute-paths", "python-imports", "mounted-files", "test-fixtures"} <= absence
    assert "reward-written" not in absence and "vacuous-tests" not in absence


MISSING_PATH_TEST = """\
import json

def test_matches_reference():
    reference = json.load(open("/data/reference/totals.json"))
    assert json.load(open("/app/totals.json")) == reference
"""


def test_a_missing_path_is_an_assumed_absence_claim(tmp_path: Path) -> None:
    [finding] = findings_of(tmp_path, {TEST_PY: MISSING_PATH_TEST}, "absolute-paths")
    assert finding.claim == "absence" and finding.evidence_tier == "assumed"
    assert finding.tier_reason.startswith("absence claim; not seen: what the task's image holds")


FIXTURE_WRITES_ITS_FILE = """\
import json
import os

import pytest

BASE = "/srv/fixtures"


@pytest.fixture
def reference():
    os.makedirs(BASE, exist_ok=True)
    path = os.path.join(BASE, "reference.json")
    with open(path, "w") as handle:
        json.dump({"north": 10.5}, handle)
    return path


def test_matches_reference(reference):
    assert json.load(open("/srv/fixtures/reference.json")) == {"north": 10.5}
"""


def test_a_fixture_that_writes_its_own_file_is_not_an_absence(tmp_path: Path) -> None:
    assert findings_of(tmp_path, {TEST_PY: FIXTURE_WRITES_ITS_FILE}, "absolute-paths") == []


def test_an_intrinsic_finding_says_so(tmp_path: Path) -> None:
    swallowed = "def test_total():\n    try:\n        assert 1 == 2\n    except AssertionError:\n        pass\n"
    [finding] = findings_of(tmp_path, {TEST_PY: swallowed}, "vacuous-tests")
    assert (finding.claim, finding.evidence_tier) == ("intrinsic", "self-contained")
    assert "intrinsic" in finding.tier_reason


@pytest.mark.bwrap
@pytest.mark.usefixtures("sandboxed")
def test_a_run_of_the_oracle_makes_the_absence_executed(tmp_path: Path) -> None:
    task_dir = write_task(
        tmp_path / "bench" / "sort-records",
        {
            "instruction.md": "Sort the numbers in /app/numbers.json and write them to "
            "/app/sorted.json.\n",
            "solution/solve.sh": "#!/bin/bash\nmkdir -p /app\n"
            "echo '[1, 2, 3]' > /app/sorted.json\n",
            "tests/check.py": "import json\n"
            "expected = json.load(open('/data/reference/sorted.json'))\n"
            "assert json.load(open('/app/sorted.json')) == expected\n",
        },
    )
    task = load_task(task_dir, bench_root=task_dir.parent)
    base = {"task_id": task.task_id, "source": "static", "attempt": "a1"}
    blobs = BlobStore(tmp_path / "blobs")
    common = {"hints": None, "sandbox": "auto", "blobs": blobs}
    _, unrun = static_cell(task, base, execution_checks=False, **common)  # type: ignore[arg-type]
    _, run = static_cell(task, base, execution_checks=True, **common)  # type: ignore[arg-type]
    [before] = [Finding.model_validate(f) for f in unrun if f["subcategory"] == "ENV-PATH"]
    assert (before.severity, before.evidence_tier) == ("Low", "assumed")
    [after] = [Finding.model_validate(f) for f in run if f["subcategory"] == "ENV-PATH"]
    assert after.evidence_tier == "executed" and after.severity in ("High", "Critical")
    assert any(e.file.startswith("logs/") for e in after.evidence)
    assert after.tier_reason == "absence claim, shown by a run in the task's environment"


# --------------------------------------------------------------------- tests that do not test

GUARDED = """\
import json
import os

OUT = os.path.join("/app", "totals.json")


def test_totals():
    if os.path.exists(OUT):
        got = json.load(open(OUT))
        assert got["north"] == 10.5
"""

GUARD_BACKED = (
    GUARDED
    + """

def test_output_exists():
    assert os.path.exists("/app/totals.json")
"""
)

EARLY_RETURN = """\
import json
from pathlib import Path

import pytest


def test_totals():
    out = Path("/app") / "totals.json"
    if not out.exists():
        pytest.skip("no output")
    assert json.loads(out.read_text())["north"] == 10.5
"""


def test_assertions_under_an_existence_guard_are_found(tmp_path: Path) -> None:
    [finding] = findings_of(tmp_path, {TEST_PY: GUARDED}, "vacuous-tests")
    assert (finding.subcategory, finding.severity) == ("EVAL-COVERAGE", "Medium")
    assert "/app/totals.json" in finding.description  # followed through os.path.join
    assert finding.evidence[0].snippet == "    if os.path.exists(OUT):"


def test_a_guard_another_test_backs_is_not_a_finding(tmp_path: Path) -> None:
    assert findings_of(tmp_path, {TEST_PY: GUARD_BACKED}, "vacuous-tests") == []


def test_a_guard_on_an_input_the_environment_ships_is_not_a_finding(tmp_path: Path) -> None:
    on_input = GUARDED.replace('"totals.json"', '"sales.csv"')
    files = {TEST_PY: on_input, "environment/sales.csv": "region,amount\nnorth,1\n"}
    assert findings_of(tmp_path, files, "vacuous-tests") == []


def test_a_skip_when_the_output_is_missing_is_found(tmp_path: Path) -> None:
    [finding] = findings_of(tmp_path, {TEST_PY: EARLY_RETURN}, "vacuous-tests")
    assert "/app/totals.json" in finding.description


SWALLOWED = """\
def test_total():
    got = open("/app/total.txt").read().strip()
    try:
        assert got == "7"
    except Exception:
        print("mismatch")
"""

RECORDED = """\
failures = []


def check():
    got = open("/app/total.txt").read().strip()
    try:
        assert got == "7"
    except AssertionError as exc:
        failures.append(str(exc))
    if failures:
        raise SystemExit(1)
"""


def test_a_try_that_swallows_assertions_is_found(tmp_path: Path) -> None:
    [finding] = findings_of(tmp_path, {TEST_PY: SWALLOWED}, "vacuous-tests")
    assert "swallows" in finding.title and finding.severity == "Medium"


def test_a_handler_that_records_the_failure_is_not_a_finding(tmp_path: Path) -> None:
    assert findings_of(tmp_path, {TEST_PY: RECORDED}, "vacuous-tests") == []


def test_a_number_checked_by_containment_is_a_low_warning(tmp_path: Path) -> None:
    contains = (
        'def test_total():\n    out = open("/app/total.txt").read()\n    assert "42" in out\n'
    )
    [finding] = findings_of(tmp_path, {TEST_PY: contains}, "vacuous-tests")
    assert (finding.severity, finding.finding_type) == ("Low", "Warning")
    assert "`42`" in finding.description


def test_a_word_checked_by_containment_or_a_number_by_equality_is_not(tmp_path: Path) -> None:
    fine = (
        "def test_total():\n    out = open('/app/total.txt').read()\n"
        "    assert out.strip() == '42'\n    assert 'total' in out\n"
        "    assert '42' in ['41', '42']\n"
    )
    assert findings_of(tmp_path, {TEST_PY: fine}, "vacuous-tests") == []


# ------------------------------------------------------------------- verifier and oracle inputs

ORACLE_READS_TESTS = """\
#!/bin/bash
set -e
python3 - <<'PY'
import json
gold = json.load(open('/tests/expected.json'))
json.dump(gold, open('/app/totals.json', 'w'))
PY
"""

ORACLE_READS_SOLUTION = ORACLE_READS_TESTS.replace("/tests/expected.json", "/solution/x.json")


def test_an_oracle_reading_tests_is_found(tmp_path: Path) -> None:
    files = {"solution/solve.sh": ORACLE_READS_TESTS, "tests/expected.json": "{}\n"}
    [finding] = findings_of(tmp_path, files, "verifier-inputs")
    assert (finding.subcategory, finding.severity, finding.evidence_tier) == (
        "ENV-PATH",
        "High",
        "self-contained",
    )
    assert finding.evidence[0].file == "solution/solve.sh"


def test_an_oracle_reading_tests_in_an_inline_program_is_found(tmp_path: Path) -> None:
    inline = (
        '#!/bin/bash\n# reads /tests/expected.json, like the verifier\npython3 -c "\n'
        "import json\ngold = json.load(open('/tests/expected.json'))\n\"\n"
    )
    files = {"solution/solve.sh": inline, "tests/expected.json": "{}\n"}
    [finding] = findings_of(tmp_path, files, "verifier-inputs")
    assert [e.line_start for e in finding.evidence] == [5]  # the code line, not the comment


def test_an_oracle_reading_its_own_folder_is_not(tmp_path: Path) -> None:
    files = {"solution/solve.sh": ORACLE_READS_SOLUTION, "solution/x.json": "{}\n"}
    assert findings_of(tmp_path, files, "verifier-inputs") == []


WRITABLE_REFERENCE = """\
import json


def test_matches():
    want = json.load(open("/app/data/expected_totals.json"))
    assert json.load(open("/app/totals.json")) == want
"""


def test_a_reference_the_agent_can_write_is_found(tmp_path: Path) -> None:
    [finding] = findings_of(tmp_path, {TEST_PY: WRITABLE_REFERENCE}, "verifier-inputs")
    assert (finding.subcategory, finding.severity) == ("EVAL-MISMATCH", "Medium")
    assert "/app/data/expected_totals.json" in finding.description


def test_a_reference_under_tests_or_written_by_the_tests_is_not(tmp_path: Path) -> None:
    under_tests = WRITABLE_REFERENCE.replace("/app/data/", "/tests/")
    assert findings_of(tmp_path, {TEST_PY: under_tests}, "verifier-inputs") == []
    writes_first = WRITABLE_REFERENCE.replace(
        "    want = ", '    json.dump({}, open("/app/data/expected_totals.json", "w"))\n    want = '
    )
    assert findings_of(tmp_path, {TEST_PY: writes_first}, "verifier-inputs") == []


# ---------------------------------------------------------------------- following the data


def test_values_that_are_not_file_paths_are_not_paths(tmp_path: Path) -> None:
    solve = (
        "#!/bin/bash\nset -e\n"
        'openssl req -x509 -nodes -subj "/C=US/ST=State/CN=localhost" -keyout k -out c\n'
        "python3 - <<'PY'\nimport os\n"
        'os.environ.setdefault("MPLCONFIGDIR", "/private/tmp/mpl")\n'
        'weights = dict(os.environ)\nprint(weights["/policy/conv1/w"])\nPY\n'
    )
    assert findings_of(tmp_path, {"solution/solve.sh": solve}, "absolute-paths") == []
    data = 'import json\nW = json.load(open("/data/weights/all.json"))\n'
    assert findings_of(tmp_path, {"solution/solve.py": data}, "absolute-paths") != []


def test_a_float_constant_the_test_sets_is_compared_exactly_by_design(tmp_path: Path) -> None:
    own = (
        "def test_scores():\n    scores = []\n    for ok in (True, False):\n"
        "        score = 0.5\n        scores.append(1.0 if ok else score)\n"
        "    assert sum(1 for s in scores if s == 0.5) == 1\n"
        "    accuracy = len(scores) / 2\n    assert accuracy == 1.0\n"
    )
    assert findings_of(tmp_path, {TEST_PY: own}, "float-equality") == []
    computed = "def test_mean():\n    assert sum([0.1, 0.2]) == 0.3\n"
    assert findings_of(tmp_path, {TEST_PY: computed}, "float-equality") != []


def test_a_value_the_environment_hands_over_in_e_notation_is_exact(tmp_path: Path) -> None:
    files = {
        "environment/logreg.py": "class Trainer:\n    criterion = 1e-15\n",
        TEST_PY: "from logreg import Trainer\n\n"
        "def test_criterion():\n    assert Trainer().criterion == 1e-15\n",
    }
    assert findings_of(tmp_path, files, "float-equality") == []


def test_a_short_bind_mount_is_created_by_compose_a_long_one_is_an_absence(
    tmp_path: Path,
) -> None:
    short = "services:\n  main:\n    build: .\n    volumes:\n      - ./runs:/app/runs\n"
    long = (
        "services:\n  main:\n    build: .\n    volumes:\n      - type: bind\n"
        "        source: ./runs\n        target: /app/runs\n"
    )
    assert findings_of(tmp_path, {"environment/docker-compose.yaml": short}, "build") == []
    [finding] = findings_of(tmp_path / "long", {"environment/docker-compose.yaml": long}, "build")
    assert (finding.claim, finding.evidence_tier) == ("absence", "assumed")


def test_an_unresolved_distribution_provides_its_last_word(tmp_path: Path) -> None:
    dockerfile = BASE["environment/Dockerfile"] + "RUN pip install openai-whisper==20240930\n"
    test = "import whisper\n\ndef test_model():\n    assert whisper\n"
    files = {"environment/Dockerfile": dockerfile, TEST_PY: test}
    assert findings_of(tmp_path, files, "python-imports") == []
