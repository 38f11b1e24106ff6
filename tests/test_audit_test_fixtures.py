"""The test-fixtures check: tests read an input file under a directory the image copies from
the build context, which the context lacks and no other file of the task names (found by
auditing a real Terminal-Bench 2 task whose tests read `APP / "fixtures" / "env_empty.json"`
twelve times; the task never shipped it). Clean variants must give no finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from metaeval.protocols.audit.static_checks import run_static_checks
from metaeval.protocols.audit.task_view import load_task

DOCKERFILE = """FROM python:3.11-slim
WORKDIR /app
COPY cli.py /app/cli.py
COPY fixtures ./fixtures
RUN mkdir -p /app/output
"""
TESTS = '''"""Checks the CLI on its fixtures."""

import json
import subprocess
from pathlib import Path

APP = Path("/app")
FIXTURES = APP / "fixtures"


def run(fixture: Path) -> dict:
    subprocess.run(["python3", str(APP / "cli.py"), str(fixture)], check=True)
    return json.loads((APP / "output" / "result.json").read_text())


def test_literal() -> None:
    assert run(FIXTURES / "literal_true.json")["value"] is True


def test_empty_environment() -> None:
    assert run(APP / "fixtures" / "env_empty.json")["value"] is None
'''


def write_task(root: Path, files: dict[str, str | None] | None = None) -> Path:
    base: dict[str, str | None] = {
        "instruction.md": "# CLI\n\nFix `/app/cli.py` so it writes `/app/output/result.json`.\n",
        "task.toml": 'version = "1.0"\n',
        "environment/Dockerfile": DOCKERFILE,
        "environment/cli.py": "print('todo')\n",
        "environment/fixtures/literal_true.json": '{"expr": "true"}\n',
        "tests/test.sh": "#!/bin/bash\npytest /tests/test_outputs.py && echo 1 > /logs/verifier/reward.txt\n",
        "tests/test_outputs.py": TESTS,
        "solution/solve.sh": "#!/bin/bash\ncp /solution/cli.py /app/cli.py\n",
        "solution/cli.py": "print('done')\n",
        **(files or {}),
    }
    for rel, text in base.items():
        if text is None:
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def fixture_findings(task_dir: Path) -> list:
    task = load_task(task_dir, bench_root=task_dir.parent)
    return [f for f in run_static_checks(task) if "neither the image" in f.title]


def test_a_fixture_nobody_ships_is_found(tmp_path: Path) -> None:
    [finding] = fixture_findings(write_task(tmp_path / "t"))
    assert (finding.subcategory, finding.severity) == ("ENV-PATH", "Medium")
    assert "`/app/fixtures/env_empty.json`" in finding.title
    assert "environment/fixtures/env_empty.json" in finding.description
    assert finding.evidence[0].file == "tests/test_outputs.py"
    assert "env_empty.json" in finding.evidence[0].snippet


def test_os_path_join_is_resolved_too(tmp_path: Path) -> None:
    tests = TESTS.replace(
        'APP / "fixtures" / "env_empty.json"', 'os.path.join("/app", "fixtures", "env_empty.json")'
    ).replace("import json\n", "import json\nimport os\n")
    [finding] = fixture_findings(write_task(tmp_path / "t", {"tests/test_outputs.py": tests}))
    assert "`/app/fixtures/env_empty.json`" in finding.title


MISSING_INPUT_TEST = (
    TESTS
    + '''

def test_missing_input_exits_nonzero() -> None:
    """A missing input file must make the CLI fail."""
    proc = subprocess.run(["python3", str(APP / "cli.py"), str(FIXTURES / "gone.json")])
    assert proc.returncode == 1
'''
)

CLEAN: dict[str, dict[str, str | None]] = {
    "shipped": {"environment/fixtures/env_empty.json": "{}\n"},
    "named in the instruction": {
        "instruction.md": "# CLI\n\nCreate `/app/fixtures/env_empty.json`, then fix the CLI.\n"
    },
    "made by the solution": {
        "solution/solve.sh": "#!/bin/bash\necho '{}' > /app/fixtures/env_empty.json\n"
    },
    "written by the tests": {
        "tests/test_outputs.py": TESTS.replace(
            "def test_empty_environment",
            'def setup_module():\n    (APP / "fixtures" / "env_empty.json").write_text("{}")\n\n\n'
            "def test_empty_environment",
        )
    },
    "whole context copied": {
        "environment/Dockerfile": DOCKERFILE.replace("COPY fixtures ./fixtures", "COPY . /app")
    },
    "generated during the build": {
        "environment/Dockerfile": DOCKERFILE
        + "RUN python3 /app/cli.py --make-fixtures /app/fixtures\n"
    },
    "missing on purpose": {
        "tests/test_outputs.py": MISSING_INPUT_TEST,
        "environment/fixtures/env_empty.json": "{}\n",
    },
}


@pytest.mark.parametrize("variant", sorted(CLEAN))
def test_clean_variants_give_no_finding(tmp_path: Path, variant: str) -> None:
    assert fixture_findings(write_task(tmp_path / "t", CLEAN[variant])) == []
