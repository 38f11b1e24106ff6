"""Issue 11 item 5: the Terminal-Bench converter rewrites Dockerfiles that copy tests/ or the
solution, and `audit convert` prints every task's notes (not its id)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from metaeval.cli import app
from metaeval.protocols.audit.static_checks import run_static_checks
from metaeval.protocols.audit.task_view import load_task
from metaeval.tasks.sources.tb1_environment import rewrite_leftover_copies
from metaeval.tasks.sources.terminal_bench import convert_tb1_task

TASK_YAML = """instruction: |-
  Fix /app/fib.py so that fib(n) returns the n-th Fibonacci number.
author_name: A. Author
difficulty: easy
category: software-engineering
parser_name: pytest
max_agent_timeout_sec: 120
max_test_timeout_sec: 30
"""
# The shapes Terminal-Bench 1 authors used: a copy of the tests folder, the runner and the
# solution next to the sources, one of them in exec (JSON) form and one spread over lines.
DOCKERFILE = """FROM python:3.11-slim
WORKDIR /app
COPY fib.py /app/fib.py
COPY tests/ /app/tests/
COPY run-tests.sh \\
     solution.sh \\
     requirements.txt /app/
ADD ["./tests/test_outputs.py", "/app/check.py"]
RUN pip install --no-index -r /app/requirements.txt || true
"""
FILES = {
    "task.yaml": TASK_YAML,
    "Dockerfile": DOCKERFILE,
    "fib.py": "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 1)\n",
    "requirements.txt": "",
    "run-tests.sh": '#!/bin/bash\npython3 -m pytest "$TEST_DIR/test_outputs.py"\n',
    "solution.sh": "#!/bin/bash\nsed -i 's/fib(n - 1) + fib(n - 1)/fib(n - 1) + fib(n - 2)/' fib.py\n",
    "tests/test_outputs.py": "from fib import fib\n\n\ndef test_fib():\n    assert fib(7) == 13\n",
}


def write_tb1(root: Path) -> Path:
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_rewrite_keeps_real_sources_and_drops_leftovers() -> None:
    text, notes = rewrite_leftover_copies(DOCKERFILE)
    assert text.splitlines() == [
        "FROM python:3.11-slim",
        "WORKDIR /app",
        "COPY fib.py /app/fib.py",
        "# metaeval convert: removed `COPY tests/ /app/tests/` (Harbor mounts tests/ and "
        "solution/ at run time; they are not in the build context)",
        "COPY requirements.txt /app/",
        "# metaeval convert: removed `ADD "
        '["./tests/test_outputs.py", "/app/check.py"]` (Harbor mounts tests/ and solution/ '
        "at run time; they are not in the build context)",
        "RUN pip install --no-index -r /app/requirements.txt || true",
    ]
    assert [n.split(":")[0] for n in notes] == [
        "Dockerfile line 4",
        "Dockerfile line 5",
        "Dockerfile line 8",
    ]
    assert "run-tests.sh, solution.sh" in notes[1]


def test_converted_task_has_no_build_defect(tmp_path: Path) -> None:
    src = write_tb1(tmp_path / "tb1" / "fib-fix")
    dst = tmp_path / "harbor" / "fib-fix"
    notes = convert_tb1_task(src, dst)
    assert any(n.startswith("Dockerfile line 4:") for n in notes)
    task = load_task(dst, bench_root=dst.parent)
    findings = run_static_checks(task)
    assert [f.title for f in findings if f.subcategory == "ENV-PATH"] == []
    assert not any("build context" in f.title for f in findings)
    # the unconverted Dockerfile in the same layout is what the audit must catch
    (dst / "environment" / "Dockerfile").write_text(DOCKERFILE)
    task = load_task(dst, bench_root=dst.parent)
    [copy] = [f for f in run_static_checks(task) if "build context" in f.title]
    assert copy.severity == "Critical" and "Terminal-Bench" in copy.description


def test_cli_prints_each_tasks_notes_for_a_folder(tmp_path: Path) -> None:
    write_tb1(tmp_path / "tb1" / "group" / "fib-fix")
    write_tb1(tmp_path / "tb1" / "group" / "fib-fix-2")
    result = CliRunner().invoke(
        app, ["audit", "convert", str(tmp_path / "tb1"), str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    ours = [line for line in lines if line.startswith("note: group/fib-fix: Dockerfile line 4:")]
    assert len(ours) == 1
    assert any(line.startswith("note: group/fib-fix-2: Dockerfile line 5:") for line in lines)
    assert not any(
        line.strip() in ("note: group/fib-fix", "note: group/fib-fix-2") for line in lines
    )
    assert "converted 2 task(s)" in result.output
