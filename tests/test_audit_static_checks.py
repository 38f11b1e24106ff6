"""Static checks of a Harbor task: each check fires on its defect and keeps quiet on near misses."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from metaeval.protocols.audit.findings import Finding
from metaeval.protocols.audit.static_checks import (
    STATIC_CHECKS,
    StaticCheck,
    run_static_checks,
    run_static_checks_report,
    static_check_names,
)
from metaeval.protocols.audit.task_view import LoadedTask, TaskFile

# ---------------------------------------------------------------------------------------------
# A clean, realistic task; each test changes one thing.

INSTRUCTION = """\
# Regional sales totals

The file `/app/sales.csv` holds one row per sale with the columns `region` and `amount`.

Compute the total amount per region and write it as a JSON object mapping region to
total to `/app/totals.json`. Round totals to two decimals.
"""

TEST_SH = """\
#!/bin/bash
set -u
cd /app
python3 -m pytest -q /tests/test_outputs.py
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

TEST_PY = """\
import json
import math
from pathlib import Path

import pandas as pd
import pytest

OUT = Path("/app/totals.json")


def test_exists():
    assert OUT.exists()


def test_totals():
    got = json.loads(OUT.read_text())
    df = pd.read_csv("/app/sales.csv")
    want = df.groupby("region")["amount"].sum().round(2).to_dict()
    assert set(got) == set(want)
    for region, total in want.items():
        assert math.isclose(got[region], total, rel_tol=1e-6)
    assert got["north"] == pytest.approx(10.5)
    assert abs(got["south"] - 4.25) < 1e-9
    assert len(got) == 3
    assert got.get("west") != "0.1"
    assert float("inf") != got["north"]
"""

SOLVE_SH = """\
#!/bin/bash
set -e
python3 /solution/solve.py
"""

SOLVE_PY = """\
import json

import pandas as pd

df = pd.read_csv("/app/sales.csv")
totals = df.groupby("region")["amount"].sum().round(2).to_dict()
with open("/app/totals.json", "w") as fh:
    json.dump(totals, fh)
"""

DOCKERFILE = """\
FROM python:3.11-slim
WORKDIR /app
COPY sales.csv /app/sales.csv
COPY requirements.txt /tmp/requirements.txt
RUN pip install --no-cache-dir -r /tmp/requirements.txt
"""

REQUIREMENTS = "pandas==2.2.2\npytest==8.3.2\n"
SALES_CSV = "region,amount\nnorth,7\nsouth,3\n"

TASK_TOML = """\
version = "1.0"

[metadata]
category = "data"

[verifier]
timeout_sec = 120.0

[environment]
allow_internet = false
cpus = 1
memory_mb = 2048
"""

BASE = {
    "instruction.md": INSTRUCTION,
    "tests/test.sh": TEST_SH,
    "tests/test_outputs.py": TEST_PY,
    "solution/solve.sh": SOLVE_SH,
    "solution/solve.py": SOLVE_PY,
    "environment/Dockerfile": DOCKERFILE,
    "environment/requirements.txt": REQUIREMENTS,
    # the Dockerfile copies it: a task without it cannot build (issue 11, build check)
    "environment/sales.csv": SALES_CSV,
}


def _role(path: str) -> str:
    if path == "instruction.md":
        return "instruction"
    for role in ("tests", "solution", "environment"):
        if path.startswith(role + "/"):
            return role
    return "other"


def make_task(
    tmp_path: Path,
    changes: dict[str, str | None] | None = None,
    *,
    toml: str | None = TASK_TOML,
    base: dict[str, str] | None = None,
    config_error: str | None = None,
    unknown_keys: list[str] | None = None,
    missing: list[str] | None = None,
    truncated: tuple[str, ...] = (),
) -> LoadedTask:
    """Write the task under tmp_path (so task.root works) and build its LoadedTask.

    `changes` overrides files of `base` (BASE by default); a value of None removes the file.
    task.toml is written to disk only, as a loader that does not deliver it would.
    """
    files = dict(BASE if base is None else base)
    for path, text in (changes or {}).items():
        if text is None:
            files.pop(path, None)
        else:
            files[path] = text
    root = tmp_path / "task"
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    config: dict = {}
    if toml is not None:
        (root / "task.toml").write_text(toml)
        if config_error is None:
            config = tomllib.loads(toml)
    loaded = [
        TaskFile(
            path=path,
            role=_role(path),
            text=text,
            raw_bytes=len(text.encode()),
            delivered_bytes=len(text.encode()),
            truncated=path in truncated,
        )
        for path, text in files.items()
    ]
    return LoadedTask(
        task_id="sales-totals",
        root=root,
        config=config,
        config_error=config_error,
        unknown_keys=unknown_keys or [],
        files=loaded,
        missing_files=missing or [],
    )


def by_sub(findings: list[Finding], subcategory: str) -> list[Finding]:
    return [f for f in findings if f.subcategory == subcategory]


def cited(finding: Finding) -> list[tuple[str, int | None, str]]:
    return [(e.file, e.line_start, e.snippet) for e in finding.evidence]


def assert_static(finding: Finding) -> None:
    assert finding.source == "static"
    assert finding.protocol == "static"
    assert finding.task_id == "sales-totals"
    assert finding.title and finding.description and finding.recommendation


def assert_evidence_verifies(task: LoadedTask, findings: list[Finding]) -> None:
    """Every cited line exists and its snippet is the exact line text."""
    for finding in findings:
        for ev in finding.evidence:
            if ev.line_start is None:
                continue
            loaded = task.file(ev.file)
            text = loaded.text if loaded else (task.root / ev.file).read_text()
            lines = text.splitlines()
            assert 1 <= ev.line_start <= ev.line_end <= len(lines), (finding.title, ev)
            assert lines[ev.line_start - 1] == ev.snippet, (finding.title, ev)


# ---------------------------------------------------------------------------------------------
# Registry and the clean task


def test_registry_lists_the_checks() -> None:
    assert static_check_names() == [
        "file-names",
        "absolute-paths",
        "mounted-files",
        "test-fixtures",
        "python-imports",
        "reward-written",
        "test-network",
        "float-equality",
        "task-config",
        "task-links",
        "build",
        "vacuous-tests",
        "verifier-inputs",
        "instruction-commands",
    ]
    assert all(isinstance(c, StaticCheck) and c.subcategories for c in STATIC_CHECKS)


def test_clean_task_has_no_findings_and_every_check_ran(tmp_path: Path) -> None:
    report = run_static_checks_report(make_task(tmp_path))
    assert report.findings == []
    assert report.ran == static_check_names()
    assert report.errors == {}


def test_a_crashing_check_is_reported_and_the_others_still_run(tmp_path: Path) -> None:
    def boom(ctx):
        raise RuntimeError("bad")

    checks = (StaticCheck("boom", "raises", ("ENV-DEP",), boom), *STATIC_CHECKS)
    task = make_task(tmp_path, {"tests/test.sh": "#!/bin/bash\npytest /tests\n"})
    report = run_static_checks_report(task, checks)
    assert report.errors == {"boom": "RuntimeError: bad"}
    assert report.ran == static_check_names()
    assert by_sub(report.findings, "EVAL-MISMATCH")


# ---------------------------------------------------------------------------------------------
# 1. File names


def test_instruction_file_differs_from_the_one_the_solution_reads(tmp_path: Path) -> None:
    solve = SOLVE_PY.replace("/app/sales.csv", "/app/sales_2023.csv")
    tests = TEST_PY.replace('    df = pd.read_csv("/app/sales.csv")\n', "    df = load()\n")
    docker = DOCKERFILE.replace("COPY sales.csv /app/sales.csv", "COPY sales_2023.csv /app/")
    task = make_task(
        tmp_path,
        {
            "solution/solve.py": solve,
            "tests/test_outputs.py": tests,
            "environment/Dockerfile": docker,
            "environment/sales.csv": None,
            "environment/sales_2023.csv": SALES_CSV,
        },
    )
    findings = run_static_checks(task)
    [finding] = by_sub(findings, "INST-CONTRADICT")
    assert_static(finding)
    assert finding.category == "INST"
    assert (finding.severity, finding.finding_type) == ("High", "Bug")
    assert finding.confidence == 0.75  # the environment ships the solution's file
    assert "`sales.csv`" in finding.title and "`sales_2023.csv`" in finding.title
    assert cited(finding) == [
        (
            "instruction.md",
            3,
            "The file `/app/sales.csv` holds one row per sale with the columns `region` and `amount`.",
        ),
        ("solution/solve.py", 5, 'df = pd.read_csv("/app/sales_2023.csv")'),
    ]
    assert not by_sub(findings, "EVAL-MISMATCH")  # same root cause, reported once
    assert_evidence_verifies(task, findings)


def test_tests_read_an_output_file_the_instruction_never_names(tmp_path: Path) -> None:
    tests = TEST_PY.replace('OUT = Path("/app/totals.json")', 'OUT = Path("/app/output.json")')
    task = make_task(tmp_path, {"tests/test_outputs.py": tests})
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert_static(finding)
    assert finding.category == "EVAL"
    assert "`output.json`" in finding.title and "`totals.json`" in finding.title
    assert finding.confidence == 0.75  # the reference solution writes the instructed name
    assert cited(finding) == [
        ("instruction.md", 6, "total to `/app/totals.json`. Round totals to two decimals."),
        ("tests/test_outputs.py", 8, 'OUT = Path("/app/output.json")'),
    ]


def test_tests_read_none_of_the_instructed_outputs_but_another_file(tmp_path: Path) -> None:
    # grade-mean style: instruction result.json, checker output.txt, the solution writes both.
    tests = TEST_PY.replace('OUT = Path("/app/totals.json")', 'OUT = Path("/app/output.txt")')
    solve = SOLVE_PY + 'open("/app/output.txt", "w").write(str(sum(totals.values())))\n'
    task = make_task(tmp_path, {"tests/test_outputs.py": tests, "solution/solve.py": solve})
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert finding.title == "Tests read `output.txt` but the instruction asks for `totals.json`"
    assert finding.confidence == 0.6
    assert "writes both files" in finding.description
    assert cited(finding)[1] == ("tests/test_outputs.py", 8, 'OUT = Path("/app/output.txt")')


def test_file_names_quiet_when_names_agree_or_differ_harmlessly(tmp_path: Path) -> None:
    # The solution also writes an intermediate file; the instruction links a URL with a file
    # name; the tests read their own fixture and write under /logs/verifier.
    instruction = INSTRUCTION + "\nBackground: https://example.com/data/sales_2019.csv\n"
    solve = SOLVE_PY + 'df.to_csv("/app/sales_clean.csv")\n'
    tests = TEST_PY + (
        '\n\ndef test_fixture():\n    ref = json.load(open("/tests/expected.json"))\n'
        '    Path("/logs/verifier/details.json").write_text(json.dumps(ref))\n'
    )
    task = make_task(
        tmp_path,
        {
            "instruction.md": instruction,
            "solution/solve.py": solve,
            "tests/test_outputs.py": tests,
            "tests/expected.json": "{}\n",
        },
    )
    findings = run_static_checks(task)
    assert not by_sub(findings, "INST-CONTRADICT")
    assert not by_sub(findings, "EVAL-MISMATCH")


def test_input_file_on_an_instruction_line_with_an_output_is_not_an_output(tmp_path: Path) -> None:
    instruction = "Read `/app/sales.csv` and write the totals to `/app/totals.json`.\n"
    tests = TEST_PY.replace('pd.read_csv("/app/sales.csv")', 'pd.read_csv("/app/reference.csv")')
    docker = DOCKERFILE + "COPY reference.csv /app/reference.csv\n"
    task = make_task(
        tmp_path,
        {
            "instruction.md": instruction,
            "tests/test_outputs.py": tests,
            "environment/Dockerfile": docker,
        },
    )
    assert not by_sub(run_static_checks(task), "EVAL-MISMATCH")


# ---------------------------------------------------------------------------------------------
# 2. Absolute paths


def test_solution_path_outside_the_environment(tmp_path: Path) -> None:
    solve = SOLVE_PY.replace('"/app/sales.csv"', '"/home/alice/data/input.csv"')
    task = make_task(tmp_path, {"solution/solve.py": solve})
    findings = run_static_checks(task)
    [finding] = by_sub(findings, "ENV-PATH")
    assert_static(finding)
    assert (finding.category, finding.severity, finding.finding_type) == ("ENV", "Medium", "Bug")
    assert finding.confidence == 0.7
    assert "/home/alice/data/input.csv" in finding.title
    assert cited(finding) == [
        ("solution/solve.py", 5, 'df = pd.read_csv("/home/alice/data/input.csv")')
    ]


def test_test_path_outside_the_environment_is_high(tmp_path: Path) -> None:
    test_sh = TEST_SH.replace("cd /app\n", "cd /app\ncp /workspace/fixtures/ref.json /app/\n")
    task = make_task(tmp_path, {"tests/test.sh": test_sh})
    [finding] = by_sub(run_static_checks(task), "ENV-PATH")
    assert finding.severity == "High"
    assert cited(finding) == [("tests/test.sh", 4, "cp /workspace/fixtures/ref.json /app/")]


def test_paths_the_environment_provides_do_not_fire(tmp_path: Path) -> None:
    solve = SOLVE_PY + (
        'open("/app/input.csv")\nopen("/data/raw/2023.csv")\nopen("/opt/tool/bin/run")\n'
        'open("/output/result.json")\nopen("/etc/hostname")\nopen("/tmp/scratch/x.txt")\n'
        'import os\nos.makedirs("/scratch/work", exist_ok=True)\nopen("/scratch/work/a.txt", "w")\n'
        "home = f\"{os.environ['HOME']}/cache/x.bin\"\n"
    )
    docker = (
        DOCKERFILE + "RUN mkdir -p /data/raw && git clone https://github.com/x/tool /opt/tool\n"
    )
    instruction = INSTRUCTION + "\nAlso write a summary to `/output/result.json`.\n"
    tests = TEST_PY + (
        '\n\ndef test_api():\n    import requests\n    r = requests.get("http://localhost:8000" + "/api/users")\n'
        '    assert client_get("/api/items/1")\n'
    )
    task = make_task(
        tmp_path,
        {
            "solution/solve.py": solve,
            "environment/Dockerfile": docker,
            "instruction.md": instruction,
            "tests/test_outputs.py": tests,
        },
    )
    assert not by_sub(run_static_checks(task), "ENV-PATH")


# ---------------------------------------------------------------------------------------------
# 3. Python imports


def test_tests_import_a_package_nothing_installs(tmp_path: Path) -> None:
    tests = TEST_PY.replace("import pytest\n", "import pytest\nimport scipy.stats\n")
    task = make_task(tmp_path, {"tests/test_outputs.py": tests})
    [finding] = by_sub(run_static_checks(task), "ENV-DEP")
    assert_static(finding)
    assert (finding.category, finding.severity, finding.finding_type) == ("ENV", "Critical", "Bug")
    assert finding.confidence == 0.7
    assert "`scipy`" in finding.title
    assert cited(finding) == [("tests/test_outputs.py", 7, "import scipy.stats")]


def test_solution_import_missing_and_tests_relying_on_solution_installs(tmp_path: Path) -> None:
    solve_sh = SOLVE_SH.replace("set -e\n", "set -e\npip install polars==1.0\n")
    solve = "import polars as pl\nimport requests\n" + SOLVE_PY
    tests = TEST_PY.replace("import pytest\n", "import pytest\nimport polars\n")
    task = make_task(
        tmp_path,
        {"solution/solve.sh": solve_sh, "solution/solve.py": solve, "tests/test_outputs.py": tests},
    )
    findings = by_sub(run_static_checks(task), "ENV-DEP")
    titles = {f.title: f for f in findings}
    assert set(titles) == {
        "Tests import `polars`, which the environment does not install",
        "Solution imports `requests`, which the environment does not install",
    }
    polars = titles["Tests import `polars`, which the environment does not install"]
    assert polars.confidence == 0.75 and polars.severity == "Critical"
    assert "Only the reference solution installs it" in polars.description
    assert cited(polars) == [("tests/test_outputs.py", 7, "import polars")]
    requests = titles["Solution imports `requests`, which the environment does not install"]
    assert requests.severity == "Medium"
    assert cited(requests) == [("solution/solve.py", 2, "import requests")]


def test_task_without_environment_runs_on_host_python(tmp_path: Path) -> None:
    task = make_task(
        tmp_path, {"environment/Dockerfile": None, "environment/requirements.txt": None}
    )
    findings = by_sub(run_static_checks(task), "ENV-DEP")
    # One finding per missing module (one fix), citing every file that imports it.
    assert [f.title for f in findings] == [
        "Tests import `pandas`, which the environment does not install",
        "Tests import `pytest`, which the environment does not install",
    ]
    assert all("plain host Python" in f.description for f in findings)
    assert cited(findings[0]) == [
        ("tests/test_outputs.py", 5, "import pandas as pd"),
        ("solution/solve.py", 3, "import pandas as pd"),
    ]


def test_python_heredoc_in_solve_sh_is_checked(tmp_path: Path) -> None:
    solve_sh = (
        "#!/bin/bash\ncat > /app/solve.py <<'EOF'\nimport json\nimport torch\nEOF\n"
        "python3 /app/solve.py\n"
    )
    task = make_task(tmp_path, {"solution/solve.sh": solve_sh, "solution/solve.py": None})
    [finding] = by_sub(run_static_checks(task), "ENV-DEP")
    assert cited(finding) == [("solution/solve.sh", 4, "import torch")]


def test_installed_mapped_local_and_optional_imports_do_not_fire(tmp_path: Path) -> None:
    requirements = "pandas\nnumpy>=1.26\nscikit-learn==1.5.0\nPyYAML\n# comment\n-r extra.txt\n"
    docker = DOCKERFILE + (
        "RUN pip install pillow beautifulsoup4 \\\n    opencv-python-headless==4.10.0.84\n"
        "RUN apt-get update && apt-get install -y python3-lxml\n"
    )
    test_sh = TEST_SH.replace(
        "python3 -m pytest", "uvx -w pytest==8.4.1 -w python-dateutil -w tqdm pytest"
    )
    tests = TEST_PY.replace(
        "import pytest\n",
        "import pytest\nimport numpy as np\nfrom sklearn.linear_model import LinearRegression\n"
        "import yaml\nfrom PIL import Image\nimport bs4\nimport cv2\nimport lxml.etree\n"
        "import dateutil.parser\nfrom tqdm import tqdm\nimport helpers\nfrom totals import compute\n"
        "from . import sibling\nimport pkg_resources\n"
        "try:\n    import orjson\nexcept ImportError:\n    orjson = None\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import mypy_extensions\n",
    )
    instruction = INSTRUCTION + "\nPut your code in `/app/totals.py`.\n"
    task = make_task(
        tmp_path,
        {
            "environment/requirements.txt": requirements,
            "environment/extra.txt": "networkx\n",
            "environment/Dockerfile": docker,
            "tests/test.sh": test_sh,
            "tests/test_outputs.py": tests,
            "tests/helpers.py": "import networkx\n",
            "instruction.md": instruction,
        },
    )
    assert by_sub(run_static_checks(task), "ENV-DEP") == []


def test_project_install_with_unseen_dependencies_lowers_confidence(tmp_path: Path) -> None:
    docker = DOCKERFILE + "RUN git clone https://github.com/x/proj /src && pip install -e /src\n"
    tests = TEST_PY.replace("import pytest\n", "import pytest\nimport proj_utils\n")
    task = make_task(tmp_path, {"environment/Dockerfile": docker, "tests/test_outputs.py": tests})
    [finding] = by_sub(run_static_checks(task), "ENV-DEP")
    assert finding.confidence == 0.45 and finding.finding_type == "Warning"


def test_custom_base_image_lowers_confidence(tmp_path: Path) -> None:
    docker = DOCKERFILE.replace("FROM python:3.11-slim", "FROM registry.example.com/lab/sci:2024")
    tests = TEST_PY.replace("import pytest\n", "import pytest\nimport scipy\n")
    task = make_task(tmp_path, {"environment/Dockerfile": docker, "tests/test_outputs.py": tests})
    [finding] = by_sub(run_static_checks(task), "ENV-DEP")
    # issue 11: an unknown base image may ship it, so no more than Low until a container run
    assert finding.severity == "Low" and finding.confidence <= 0.3
    assert finding.finding_type == "Warning"


# ---------------------------------------------------------------------------------------------
# 4. Reward written


def test_test_sh_that_never_writes_the_reward(tmp_path: Path) -> None:
    test_sh = (
        "#!/bin/bash\nset -u\ncd /app\npython3 -m pytest -q /tests/test_outputs.py\necho done\n"
    )
    task = make_task(tmp_path, {"tests/test.sh": test_sh})
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert_static(finding)
    assert (finding.severity, finding.finding_type, finding.confidence) == ("High", "Bug", 0.9)
    assert cited(finding) == [("tests/test.sh", 4, "python3 -m pytest -q /tests/test_outputs.py")]


def test_reward_written_outside_logs_verifier(tmp_path: Path) -> None:
    test_sh = TEST_SH.replace("/logs/verifier/reward.txt", "/tmp/reward.txt")
    task = make_task(tmp_path, {"tests/test.sh": test_sh})
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert "/tmp/reward.txt" in finding.title
    assert cited(finding) == [("tests/test.sh", 6, "  echo 1 > /tmp/reward.txt")]


def test_truncated_test_sh_lowers_confidence(tmp_path: Path) -> None:
    test_sh = "#!/bin/bash\npytest /tests/test_outputs.py\n"
    task = make_task(tmp_path, {"tests/test.sh": test_sh}, truncated=("tests/test.sh",))
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert finding.confidence == 0.45 and finding.finding_type == "Warning"


@pytest.mark.parametrize(
    "changes",
    [
        {},  # echo 1 > /logs/verifier/reward.txt
        {
            "tests/test.sh": 'LOGS=/logs/verifier\npytest /tests/test_outputs.py && echo 1 > "$LOGS/reward.txt"\n'
        },
        {"tests/test.sh": "pytest /tests && echo 1 > ${VERIFIER_DIR:-/logs/verifier}/reward.txt\n"},
        {
            "tests/test.sh": "#!/bin/bash\npython3 /tests/grade.py\n",
            "tests/grade.py": 'import json\njson.dump({"reward": 1.0}, open("/logs/verifier/reward.json", "w"))\n',
        },
        {
            "tests/test.sh": "#!/bin/bash\npytest /tests/test_outputs.py\n",
            "tests/conftest.py": (
                "def pytest_sessionfinish(session, exitstatus):\n"
                '    open("/logs/verifier/reward.txt", "w").write(str(int(exitstatus == 0)))\n'
            ),
        },
        {"tests/test.sh": "#!/bin/bash\nbash /tests/run.sh\n", "tests/run.sh": TEST_SH},
        {"tests/test.sh": "#!/bin/bash\nuvx --with harbor-rewardkit@0.1 rewardkit /tests\n"},
    ],
    ids=[
        "literal",
        "variable",
        "default",
        "python-helper",
        "conftest",
        "shell-helper",
        "rewardkit",
    ],
)
def test_reward_written_somehow_does_not_fire(tmp_path: Path, changes: dict[str, str]) -> None:
    task = make_task(tmp_path, changes)
    assert [f.title for f in by_sub(run_static_checks(task), "EVAL-MISMATCH")] == []


def test_empty_test_sh_cites_the_file(tmp_path: Path) -> None:
    task = make_task(tmp_path, {"tests/test.sh": ""})
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert cited(finding) == [("tests/test.sh", None, "")]


def test_comment_mentioning_the_reward_does_not_count(tmp_path: Path) -> None:
    test_sh = "#!/bin/bash\n# writes /logs/verifier/reward.txt\npytest /tests/test_outputs.py\n"
    task = make_task(tmp_path, {"tests/test.sh": test_sh})
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert cited(finding) == [("tests/test.sh", 3, "pytest /tests/test_outputs.py")]


# ---------------------------------------------------------------------------------------------
# 5. Network at test time

NETWORK_TEST_SH = TEST_SH.replace(
    "cd /app\n",
    "cd /app\ncurl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\npip install pytest==8.4.1\n",
)


def test_network_use_in_tests_when_the_network_is_off(tmp_path: Path) -> None:
    task = make_task(tmp_path, {"tests/test.sh": NETWORK_TEST_SH})
    [finding] = by_sub(run_static_checks(task), "ENV-RESOURCE")
    assert_static(finding)
    assert (finding.category, finding.severity, finding.finding_type) == ("ENV", "High", "Bug")
    assert finding.confidence == 0.75
    assert cited(finding) == [
        ("tests/test.sh", 4, "curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh"),
        ("tests/test.sh", 5, "pip install pytest==8.4.1"),
        ("task.toml", 10, "allow_internet = false"),
    ]
    assert_evidence_verifies(task, [finding])


def test_python_http_call_when_the_verifier_has_no_network(tmp_path: Path) -> None:
    toml = TASK_TOML.replace("allow_internet = false", "allow_internet = true") + (
        '\n[verifier.environment]\nnetwork_mode = "no-network"\n'
    )
    toml = toml.replace("[verifier]\ntimeout_sec = 120.0\n", "")
    tests = TEST_PY + (
        '\n\nAPI = "https://api.example.com/v1"\n\n\ndef test_remote():\n'
        '    import requests\n    assert requests.get(f"{API}/rates").ok\n'
    )
    task = make_task(tmp_path, {"tests/test_outputs.py": tests}, toml=toml)
    [finding] = by_sub(run_static_checks(task), "ENV-RESOURCE")
    assert cited(finding)[0] == (
        "tests/test_outputs.py",
        34,
        '    assert requests.get(f"{API}/rates").ok',
    )
    assert cited(finding)[-1][0] == "task.toml"


def test_python_subprocess_download_when_the_network_is_off(tmp_path: Path) -> None:
    # a shell command run from a Python test goes through the same shell reading as test.sh
    tests = TEST_PY + (
        "\n\ndef test_fetch():\n    import subprocess\n\n"
        '    subprocess.run("curl -sf https://data.example.com/r.csv -o /tmp/r.csv", shell=True)\n'
    )
    task = make_task(tmp_path, {"tests/test_outputs.py": tests})
    report = run_static_checks_report(task)
    assert report.errors == {}
    [finding] = by_sub(report.findings, "ENV-RESOURCE")
    assert cited(finding) == [
        (
            "tests/test_outputs.py",
            32,
            '    subprocess.run("curl -sf https://data.example.com/r.csv -o /tmp/r.csv", shell=True)',
        ),
        ("task.toml", 10, "allow_internet = false"),
    ]
    assert_evidence_verifies(task, [finding])


def test_allowlist_only_reports_hosts_outside_it(tmp_path: Path) -> None:
    toml = TASK_TOML.replace(
        "allow_internet = false",
        'network_mode = "allowlist"\nallowed_hosts = ["pypi.org", "files.pythonhosted.org"]',
    )
    task = make_task(tmp_path, {"tests/test.sh": NETWORK_TEST_SH}, toml=toml)
    [finding] = by_sub(run_static_checks(task), "ENV-RESOURCE")
    assert [c[1] for c in cited(finding)] == [4, 10]  # curl to astral.sh; pip is allowed
    assert "allowlist" in finding.title


@pytest.mark.parametrize(
    "toml",
    [
        TASK_TOML.replace("allow_internet = false", "allow_internet = true"),
        TASK_TOML.replace("allow_internet = false\n", ""),
        TASK_TOML.replace("allow_internet = false", 'network_mode = "public"'),
        TASK_TOML.replace("[verifier]\n", '[verifier]\nnetwork_mode = "public"\n'),
    ],
    ids=["allowed", "unset", "public", "verifier-override"],
)
def test_network_use_when_allowed_does_not_fire(tmp_path: Path, toml: str) -> None:
    task = make_task(tmp_path, {"tests/test.sh": NETWORK_TEST_SH}, toml=toml)
    assert by_sub(run_static_checks(task), "ENV-RESOURCE") == []


def test_local_and_offline_network_use_does_not_fire(tmp_path: Path) -> None:
    test_sh = TEST_SH.replace(
        "cd /app\n",
        "cd /app\ncurl -sf http://localhost:8000/health\nwget -q http://web:8080/ -O /tmp/x\n"
        "pip install --no-index --find-links /tests/wheels pytest\n# curl https://example.com\n",
    )
    tests = TEST_PY + (
        '\n\ndef test_server():\n    import requests\n    assert requests.get("http://127.0.0.1:8000/").ok\n'
    )
    task = make_task(tmp_path, {"tests/test.sh": test_sh, "tests/test_outputs.py": tests})
    assert by_sub(run_static_checks(task), "ENV-RESOURCE") == []


# ---------------------------------------------------------------------------------------------
# 6. Float equality


def test_exact_float_equality_in_tests(tmp_path: Path) -> None:
    tests = TEST_PY + (
        "\n\ndef test_exact(got=None):\n"
        "    assert got['north'] == 10.5\n"
        "    assert float(got['south']) != 2.0\n"
        "    assert got['a'] / got['b'] == got['ratio']\n"
        "    assert round(got['c'], 2) == 0.12\n"
    )
    task = make_task(tmp_path, {"tests/test_outputs.py": tests})
    [finding] = by_sub(run_static_checks(task), "EVAL-TOLERANCE")
    assert_static(finding)
    assert (finding.category, finding.severity, finding.finding_type) == (
        "EVAL",
        "Medium",
        "Warning",
    )
    assert finding.confidence == 0.7
    assert cited(finding) == [
        ("tests/test_outputs.py", 30, "    assert got['north'] == 10.5"),
        ("tests/test_outputs.py", 31, "    assert float(got['south']) != 2.0"),
        ("tests/test_outputs.py", 32, "    assert got['a'] / got['b'] == got['ratio']"),
        ("tests/test_outputs.py", 33, "    assert round(got['c'], 2) == 0.12"),
    ]
    assert "round() result" in finding.description


def test_unittest_assert_equal_on_float(tmp_path: Path) -> None:
    tests = (
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_x(self):\n        self.assertEqual(compute(), 0.3)\n"
    )
    task = make_task(tmp_path, {"tests/test_outputs.py": tests})
    [finding] = by_sub(run_static_checks(task), "EVAL-TOLERANCE")
    assert cited(finding) == [
        ("tests/test_outputs.py", 6, "        self.assertEqual(compute(), 0.3)")
    ]


def test_tolerant_comparisons_do_not_fire(tmp_path: Path) -> None:
    # TEST_PY already uses math.isclose, pytest.approx, abs(a - b) < eps, an int compare, a
    # string compare and an infinity compare; the solution may compare floats freely.
    solve = SOLVE_PY + "assert totals.get('north', 0) == 0.5 or True\n"
    task = make_task(tmp_path, {"solution/solve.py": solve})
    assert by_sub(run_static_checks(task), "EVAL-TOLERANCE") == []


# ---------------------------------------------------------------------------------------------
# 7. task.toml and required files


def test_malformed_task_toml(tmp_path: Path) -> None:
    toml = 'version = "1.0"\n[environment]\ncpus = = 2\n'
    task = make_task(tmp_path, toml=toml, config_error="Invalid value (at line 3, column 8)")
    [finding] = by_sub(run_static_checks(task), "ENV-RESOURCE")
    assert_static(finding)
    assert (finding.severity, finding.finding_type, finding.confidence) == ("Critical", "Bug", 0.9)
    assert cited(finding) == [("task.toml", 3, "cpus = = 2")]


def test_unknown_and_misplaced_keys_are_one_finding_with_lines(tmp_path: Path) -> None:
    toml = TASK_TOML.replace("[verifier]\n", "[verifier]\ntimeout = 30\n") + (
        "\n[agent]\nallow_internet = true\n"
    )
    task = make_task(tmp_path, toml=toml, unknown_keys=["verifier.timeout", "agent.allow_internet"])
    [finding] = by_sub(run_static_checks(task), "ENV-RESOURCE")
    assert (finding.severity, finding.finding_type, finding.confidence) == (
        "Medium",
        "Warning",
        0.8,
    )
    assert "`verifier.timeout` (line 7)" in finding.description
    assert "`agent.allow_internet` (line 16)" in finding.description
    assert cited(finding) == [
        ("task.toml", 7, "timeout = 30"),
        ("task.toml", 16, "allow_internet = true"),
    ]
    assert_evidence_verifies(task, [finding])


def test_unknown_free_form_key_is_low(tmp_path: Path) -> None:
    toml = TASK_TOML + '\n[extras]\nnote = "x"\n'
    task = make_task(tmp_path, toml=toml, unknown_keys=["extras"])
    [finding] = by_sub(run_static_checks(task), "ENV-RESOURCE")
    assert (finding.severity, finding.confidence) == ("Low", 0.6)
    assert cited(finding) == [("task.toml", 14, "[extras]")]


@pytest.mark.parametrize(
    ("missing", "subcategory", "severity", "kind"),
    [
        ("instruction.md", "INST-INFEASIBLE", "Critical", "Bug"),
        ("tests/test.sh", "EVAL-MISMATCH", "Critical", "Bug"),
        ("solution/solve.sh", "GT-NO-ORACLE", "Low", "Warning"),
        ("environment/Dockerfile", "ENV-DEP", "High", "Bug"),
    ],
)
def test_missing_required_files(
    tmp_path: Path, missing: str, subcategory: str, severity: str, kind: str
) -> None:
    task = make_task(tmp_path, {missing: None}, missing=[missing])
    findings = [f for f in run_static_checks(task) if f.evidence and f.evidence[0].file == missing]
    [finding] = findings
    assert (finding.subcategory, finding.severity, finding.finding_type) == (
        subcategory,
        severity,
        kind,
    )
    assert cited(finding) == [(missing, None, "")]


def test_missing_task_toml_is_one_finding_and_agent_results_are_skipped(tmp_path: Path) -> None:
    task = make_task(
        tmp_path,
        toml=None,
        config_error="task.toml: file not found",
        missing=["task.toml", "agent_results/sales-totals/"],
    )
    findings = run_static_checks(task)
    assert [(f.subcategory, f.title) for f in findings] == [
        ("ENV-RESOURCE", "The task has no task.toml")
    ]


def test_missing_test_sh_is_not_also_a_reward_finding(tmp_path: Path) -> None:
    task = make_task(tmp_path, {"tests/test.sh": None}, missing=["tests/test.sh"])
    [finding] = by_sub(run_static_checks(task), "EVAL-MISMATCH")
    assert finding.title == "The task has no tests/test.sh"


def test_clean_config_has_no_config_findings(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    checks = [c for c in STATIC_CHECKS if c.name == "task-config"]
    assert run_static_checks(task, checks) == []


# ---------------------------------------------------------------------------------------------
# All together


def test_defective_task_is_deterministic_and_its_evidence_verifies(tmp_path: Path) -> None:
    solve = SOLVE_PY.replace("/app/sales.csv", "/home/alice/sales_2023.csv") + "import requests\n"
    tests = TEST_PY.replace('OUT = Path("/app/totals.json")', 'OUT = Path("/app/output.json")')
    tests = tests.replace('pd.read_csv("/app/sales.csv")', "load()")
    tests += "\n\ndef test_exact():\n    assert 1 / 3 == 0.333\n"
    task = make_task(
        tmp_path,
        {
            "solution/solve.py": solve,
            "tests/test_outputs.py": tests,
            "tests/test.sh": NETWORK_TEST_SH.replace("/logs/verifier/reward.txt", "/tmp/r"),
            "environment/Dockerfile": DOCKERFILE.replace(
                "sales.csv /app/sales.csv", "sales_2023.csv /app/"
            ),
            "environment/sales.csv": None,
        },
        unknown_keys=["environment.cpus"],
    )
    first = run_static_checks(task)
    second = run_static_checks(task)
    assert [f.model_dump() for f in first] == [f.model_dump() for f in second]
    assert {f.subcategory for f in first} == {
        "INST-CONTRADICT",
        "EVAL-MISMATCH",
        "ENV-PATH",
        "ENV-DEP",
        "ENV-RESOURCE",
        "EVAL-TOLERANCE",
    }
    for finding in first:
        assert_static(finding)
        assert finding.evidence
    assert_evidence_verifies(task, first)


def test_with_the_real_loader_evidence_verifies(tmp_path: Path) -> None:
    """Through `load_task` and `verify_evidence` when those modules are in the tree."""
    harbor = pytest.importorskip("metaeval.protocols.audit.task_view")
    evidence = pytest.importorskip("metaeval.protocols.audit.evidence")
    if not hasattr(harbor, "load_task") or not hasattr(evidence, "verify_evidence"):
        pytest.skip("loader or evidence verification not available")
    solve = SOLVE_PY.replace("/app/sales.csv", "/home/alice/sales.csv")
    tests = TEST_PY + "\n\ndef test_exact():\n    assert 1 / 3 == 0.333\n"
    made = make_task(
        tmp_path,
        {
            "solution/solve.py": solve,
            "tests/test_outputs.py": tests,
            "tests/test.sh": NETWORK_TEST_SH,
        },
        toml=TASK_TOML + "\n[agent]\nallow_internet = false\n",
    )
    task = harbor.load_task(made.root)
    findings = run_static_checks(task)
    assert {f.subcategory for f in findings} == {"ENV-PATH", "ENV-RESOURCE", "EVAL-TOLERANCE"}
    assert any("agent.allow_internet" in f.description for f in findings)
    for finding in findings:
        checked = evidence.verify_evidence(finding, task)
        assert checked.evidence_verified, (finding.title, checked.evidence_problems)


EXAMPLE_BENCH = Path(__file__).resolve().parent.parent / "examples" / "audit-bench"
# Seeded defects of the example benchmark that a static check can see.
STATIC_GOLD = {
    "sales-revenue": "INST-CONTRADICT",
    "grade-mean": "EVAL-MISMATCH",
    "inventory-by-category": "ENV-DEP",
    "row-count": "ENV-PATH",
    "latency-mean": "EVAL-TOLERANCE",
    "uppercase-names": "EVAL-MISMATCH",
    "exchange-rates": "ENV-RESOURCE",
}


def test_example_benchmark_static_defects_found_and_clean_tasks_quiet() -> None:
    harbor = pytest.importorskip("metaeval.protocols.audit.task_view")
    if not hasattr(harbor, "load_benchmark") or not (EXAMPLE_BENCH / "gold.json").is_file():
        pytest.skip("example benchmark or loader not available")
    import json

    gold = json.loads((EXAMPLE_BENCH / "gold.json").read_text())["tasks"]
    tasks, _ = harbor.load_benchmark(EXAMPLE_BENCH)
    for task in tasks:
        findings = run_static_checks(task)
        issues = gold.get(task.task_id, {}).get("issues", [])
        if task.task_id in STATIC_GOLD:
            assert STATIC_GOLD[task.task_id] in {f.subcategory for f in findings}, task.task_id
        elif not issues:
            assert findings == [], (task.task_id, [f.title for f in findings])
