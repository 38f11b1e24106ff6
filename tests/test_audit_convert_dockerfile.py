"""Issue 11 item 5 and issue 37: a converted Terminal-Bench 1 task builds from what the
original's context held (the task files its Dockerfile copies go into environment/ too), and
`audit convert` prints every task's notes (not its id)."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from metaeval.cli import app
from metaeval.protocols.audit.static_checks import run_static_checks
from metaeval.protocols.audit.task_view import load_task
from metaeval.tasks.sources.tb1_environment import copied_leftovers
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


# The shape of the 2025 "New Tasks" of a public Terminal-Bench 1 collection: the whole
# context copied, then a step that needs the runner, which tests/ relative to /app.
WHOLE_CONTEXT_DOCKERFILE = """FROM python:3.11-slim
WORKDIR /app
COPY . /app
RUN chmod +x run-tests.sh
"""
WHOLE_CONTEXT_RUN_TESTS = "#!/bin/bash\ncd /app && python3 -m pytest tests/test_outputs.py\n"


def write_whole_context_tb1(root: Path) -> Path:
    write_tb1(root)
    (root / "Dockerfile").write_text(WHOLE_CONTEXT_DOCKERFILE)
    (root / "run-tests.sh").write_text(WHOLE_CONTEXT_RUN_TESTS)
    (root / "requirements.txt").unlink()
    return root


def test_copied_leftovers_reads_each_copy_form() -> None:
    assert copied_leftovers(DOCKERFILE) == (["run-tests.sh", "solution.sh", "tests"], None)
    assert copied_leftovers(WHOLE_CONTEXT_DOCKERFILE)[0] == [
        "run-tests.sh",
        "solution.sh",
        "solution.yaml",
        "task.yaml",
        "tests",
    ]
    assert copied_leftovers("FROM x\nCOPY /tests/pipeline/ /app/\n")[0] == ["tests"]
    assert copied_leftovers("FROM x\nCOPY *.sh /app/\n")[0] == ["run-tests.sh", "solution.sh"]
    # another stage, a URL and ordinary sources read none of them
    other = (
        "FROM x AS b\nFROM y\nCOPY --from=b /tests /t\nADD https://e.org/tests /t\nCOPY a.py /\n"
    )
    assert copied_leftovers(other) == ([], None)
    names, error = copied_leftovers("FROM x\nCOPY <<EOF\n")
    assert names == [] and error


def test_the_dockerfile_sees_the_files_it_copies(tmp_path: Path) -> None:
    src = write_tb1(tmp_path / "tb1" / "fib-fix")
    dst = tmp_path / "harbor" / "fib-fix"
    notes = convert_tb1_task(src, dst)
    env = dst / "environment"
    assert (env / "Dockerfile").read_text() == DOCKERFILE  # unchanged
    assert (env / "run-tests.sh").read_text() == FILES["run-tests.sh"]
    assert (env / "solution.sh").read_text() == FILES["solution.sh"]
    assert (env / "tests" / "test_outputs.py").read_text() == FILES["tests/test_outputs.py"]
    assert not (env / "task.yaml").exists()  # the Dockerfile names only the three
    # the Harbor places keep them as well
    assert (dst / "tests" / "run-tests.sh").read_text() == FILES["run-tests.sh"]
    assert (dst / "solution" / "solve.sh").read_text() == FILES["solution.sh"]
    [note] = [n for n in notes if n.startswith("Dockerfile copies")]
    assert "run-tests.sh, solution.sh, tests" in note


def test_a_whole_context_copy_keeps_the_runner_in_the_context(tmp_path: Path) -> None:
    """The converter used to leave run-tests.sh out of environment/, so `RUN chmod +x
    run-tests.sh` after `COPY . /app` broke the build (9 Critical findings on a public
    benchmark, caused by the conversion)."""
    src = write_whole_context_tb1(tmp_path / "tb1" / "fib-fix")
    dst = tmp_path / "harbor" / "fib-fix"
    convert_tb1_task(src, dst)
    env = dst / "environment"
    assert sorted(p.name for p in env.iterdir()) == [
        "Dockerfile",
        "fib.py",
        "run-tests.sh",
        "solution.sh",
        "task.yaml",
        "tests",
    ]
    findings = run_static_checks(load_task(dst, bench_root=dst.parent))
    assert [f.title for f in findings if f.subcategory == "ENV-PATH"] == []
    # without the runner in the context, the audit names the broken step
    (env / "run-tests.sh").unlink()
    findings = run_static_checks(load_task(dst, bench_root=dst.parent))
    [broken] = [f for f in findings if f.subcategory == "ENV-PATH"]
    assert broken.severity == "Critical" and "run-tests.sh" in broken.title


def test_converted_task_has_no_build_defect(tmp_path: Path) -> None:
    src = write_tb1(tmp_path / "tb1" / "fib-fix")
    dst = tmp_path / "harbor" / "fib-fix"
    convert_tb1_task(src, dst)
    task = load_task(dst, bench_root=dst.parent)
    findings = run_static_checks(task)
    assert [f.title for f in findings if f.subcategory == "ENV-PATH"] == []
    assert not any("build context" in f.title for f in findings)
    # the same Dockerfile without the copied files beside it is what the audit must catch
    shutil.rmtree(dst / "environment" / "tests")
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
    ours = [line for line in lines if line.startswith("note: group/fib-fix: Dockerfile copies")]
    assert len(ours) == 1
    assert any(line.startswith("note: group/fib-fix-2: Dockerfile copies") for line in lines)
    assert not any(
        line.strip() in ("note: group/fib-fix", "note: group/fib-fix-2") for line in lines
    )
    assert "converted 2 task(s)" in result.output
