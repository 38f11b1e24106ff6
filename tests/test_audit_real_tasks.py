"""Static checks on tasks written in the idioms of public Harbor and Terminal-Bench tasks.

tests/fixtures/audit-real/clean/ holds valid tasks that the old regex-based checks accused
(issue 11): `$(dirname "$0")` paths, `2>/dev/null` after a pip install, `${1:-default}`
arguments, a SWE-bench base image providing /opt/miniconda3, PEP 723 script dependencies
run with `uv run`, a sed expression in a Dockerfile, floats passed through unchanged. No
finding above Low is allowed on them. tests/fixtures/audit-real/defective/ holds one real
defect each, which must be found with the right subcategory and severity.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from metaeval.protocols.audit.static.dockerfile import parse_dockerfile
from metaeval.protocols.audit.static.installs import find_installs_in
from metaeval.protocols.audit.static.shell import parse_script
from metaeval.protocols.audit.static.task_context import TaskContext
from metaeval.protocols.audit.static_checks import run_static_checks_report
from metaeval.protocols.audit.task_view import load_task

BENCH = Path(__file__).parent / "fixtures" / "audit-real"
CLEAN = sorted(p.name for p in (BENCH / "clean").iterdir())
ABOVE_LOW = ("Critical", "High", "Medium")


def audit(task_id: str):
    task = load_task(BENCH / task_id, bench_root=BENCH)
    report = run_static_checks_report(task)
    assert report.errors == {}, report.errors
    return task, report.findings


@pytest.mark.parametrize("name", CLEAN)
def test_clean_task_has_no_finding_above_low(name: str) -> None:
    _, findings = audit(f"clean/{name}")
    loud = [(f.subcategory, f.severity, f.title) for f in findings if f.severity in ABOVE_LOW]
    assert loud == []


def test_unknown_base_image_paths_are_low_suspicions_only() -> None:
    _, findings = audit("clean/django-slugify")
    [finding] = findings
    assert finding.subcategory == "ENV-PATH" and "/opt/miniconda3" in finding.title
    assert finding.severity == "Low" and finding.confidence <= 0.3
    assert "swebench/sweb.eval" in finding.description  # names the image that may provide it


DEFECTS = [
    ("compose-conflict", "ENV-DEP", "Critical", "merge conflict"),
    ("compose-missing-file", "ENV-PATH", "Critical", "references files that do not exist"),
    ("copy-outside-context", "ENV-PATH", "Critical", "not in the build context"),
    ("local-image", "ENV-DEP", "High", "exists only on its author's machine"),
    ("tb-leftover-copy", "ENV-PATH", "Critical", "not in the build context"),
    ("home-path", "ENV-PATH", "High", "/home/jdoe"),
    ("no-solution", "GT-NO-ORACLE", "Low", "no reference solution"),
]


@pytest.mark.parametrize(("name", "subcategory", "severity", "title"), DEFECTS)
def test_defect_is_found(name: str, subcategory: str, severity: str, title: str) -> None:
    _, findings = audit(f"defective/{name}")
    hits = [f for f in findings if f.subcategory == subcategory and title in f.title]
    assert len(hits) == 1, [(f.subcategory, f.title) for f in findings]
    assert hits[0].severity == severity
    assert hits[0].evidence  # every finding cites where it was seen


def test_missing_solution_is_not_called_infeasible() -> None:
    _, findings = audit("defective/no-solution")
    assert {f.subcategory for f in findings} == {"GT-NO-ORACLE"}
    assert findings[0].category == "GT"


def test_conflict_markers_are_cited_line_by_line() -> None:
    _, findings = audit("defective/compose-conflict")
    [finding] = [f for f in findings if "merge conflict" in f.title]
    lines = [(e.line_start, e.snippet) for e in finding.evidence]
    assert [s[:7] for _, s in lines] == ["<<<<<<<", "=======", ">>>>>>>"]
    assert [n for n, _ in lines] == [6, 9, 11]
    # the YAML parse error that the markers cause is the same defect: not reported twice
    assert len(findings) == 1


def test_converted_terminal_bench_leftovers_are_named() -> None:
    _, findings = audit("defective/tb-leftover-copy")
    [finding] = findings
    assert "Terminal-Bench" in finding.description
    assert [e.line_start for e in finding.evidence] == [4, 5]  # fib.py (line 3) is shipped


# ------------------------------------------------------------------ the parsers themselves


def test_dirname_of_the_script_is_its_runtime_directory() -> None:
    script = parse_script("tests/test.sh", 'python3 "$(dirname "$0")/test_outputs.py"\n')
    assert script.commands[0].words == [["python3", "/tests/test_outputs.py"]]
    script = parse_script(
        "solution/solve.sh", 'D="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
    )
    assert script.variables["D"] == "/solution"


def test_redirections_are_not_arguments_and_requirements_follow_cd() -> None:
    text = 'pip install -r requirements.txt -q 2>/dev/null\ncd "$(dirname "$0")"\npip install -r requirements.txt -q 2>/dev/null\n'
    script = parse_script("tests/test.sh", text)
    first, second = (c.simple[0] for c in script.commands if c.words[0][0] == "pip")
    assert first.words == ["pip", "install", "-r", "requirements.txt", "-q"]
    assert first.redirects == [(">", "/dev/null")]
    assert (first.cwd, second.cwd) == ("/app", "/tests")
    [install] = find_installs_in([second.words])
    assert install.packages == [] and install.requirement_files == ["requirements.txt"]


def test_requirements_are_read_relative_to_the_script() -> None:
    task = load_task(BENCH / "clean/csv-dedupe", bench_root=BENCH)
    ctx = TaskContext(task)
    [(path, line, install)] = ctx.script_installs("tests")
    assert (path, line) == ("tests/test.sh", 4)
    assert install.requirement_files == ["/tests/requirements.txt"]
    assert "pytest" in ctx.role_imports("tests")


def test_parameter_defaults_are_values() -> None:
    script = parse_script("solution/solve.sh", 'OUT=${1:-cleaned_data.csv}\ncp a "${OUT}"\n')
    assert script.variables["OUT"] == "cleaned_data.csv"
    assert script.commands[-1].words == [["cp", "a", "cleaned_data.csv"]]
    unknown = parse_script("tests/test.sh", 'cat "$HOME/x" "$(date +%s)"\n')
    assert unknown.commands[0].words == [["cat", "$HOME/x", "$(date +%s)"]]


def test_dockerfile_goes_through_the_buildkit_parser() -> None:
    text = (
        "ARG BASE=python:3.11-slim\n"
        "FROM ${BASE} AS build\n"
        "RUN <<EOF\n"
        "pip install --no-cache-dir numpy==2.1.0 \\\n"
        "    pandas\n"
        "mkdir -p /srv/data\n"
        "EOF\n"
        "FROM build\n"
        "WORKDIR /work\n"
        'COPY ["data dir/", "./data/"]\n'
        "COPY --from=build /srv/data /srv/copy\n"
    )
    info = parse_dockerfile("environment/Dockerfile", text)
    assert info.error is None
    assert info.base_images == ["python:3.11-slim"]  # `FROM build` is a stage, not an image
    assert [i.packages for _, i in info.installs] == [["numpy", "pandas"]]
    assert {"/srv/data", "/work", "/work/data"} <= info.provided
    assert [(c.sources, c.from_stage) for c in info.copies] == [
        (["data dir/"], None),
        (["/srv/data"], "build"),
    ]
    assert info.copy_sources == ["data dir/"]


def test_dockerfile_that_docker_rejects_is_reported_not_raised() -> None:
    info = parse_dockerfile("environment/Dockerfile", "FROM python:3.11\nRUN <<EOF\necho hi\n")
    assert info.present and "unterminated heredoc" in info.error
    info = parse_dockerfile("environment/Dockerfile", "FROM python:3.11\nCOPY\nRUNN true\n")
    assert (info.error, info.error_line) == ("line 2: COPY requires at least 2 argument(s)", 2)


def test_sed_patterns_and_inline_programs_are_not_paths(tmp_path: Path) -> None:
    task_dir = tmp_path / "locale"
    shutil.copytree(BENCH / "clean/csv-dedupe", task_dir)
    solve = task_dir / "solution" / "solve.sh"
    solve.write_text(
        solve.read_text()
        + "sed -i 's/# en_US.UTF-8 UTF-8/en_US.UTF-8 UTF-8/' /etc/locale.gen\n"
        + "grep -E '/api/v[0-9]+/users' /app/customers.csv || true\n"
        + 'python3 -c \'open("/app/x.txt", "w").write("/srv/nowhere/y")\'\n'
    )
    task = load_task(task_dir, bench_root=tmp_path)
    assert [f for f in run_static_checks_report(task).findings if f.subcategory == "ENV-PATH"] == []
    # the same path as a plain argument is one
    solve.write_text(solve.read_text() + "cp /app/cleaned_data.csv /srv/nowhere/out.csv\n")
    task = load_task(task_dir, bench_root=tmp_path)
    [finding] = [f for f in run_static_checks_report(task).findings if f.subcategory == "ENV-PATH"]
    assert "/srv/nowhere/out.csv" in finding.title and finding.severity == "Medium"


def test_cli_rejects_an_unknown_sandbox(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from metaeval.cli import app

    result = CliRunner().invoke(
        app,
        ["audit", "run", str(BENCH), "--static-only", "--sandbox", "vm", "-o", str(tmp_path / "r")],
    )
    assert result.exit_code != 0
    assert "unknown sandbox 'vm'" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_requirements_in_the_working_directory_come_from_environment(tmp_path: Path) -> None:
    task_dir = tmp_path / "t"
    shutil.copytree(BENCH / "clean/csv-dedupe", task_dir)
    (task_dir / "tests" / "requirements.txt").unlink()
    (task_dir / "environment" / "requirements.txt").write_text("pytest==8.3.3\nnumpy==2.1.0\n")
    test_sh = task_dir / "tests" / "test.sh"
    test_sh.write_text(test_sh.read_text().replace('cd "$(dirname "$0")"\n', ""))
    test_py = task_dir / "tests" / "test_outputs.py"
    test_py.write_text("import numpy\n" + test_py.read_text())
    ctx = TaskContext(load_task(task_dir, bench_root=tmp_path))
    [(_, _, install)] = ctx.script_installs("tests")
    assert install.requirement_files == ["/app/requirements.txt"]
    assert "numpy" in ctx.role_imports("tests")
    assert not [
        f for f in run_static_checks_report(ctx.task).findings if f.subcategory == "ENV-DEP"
    ]
