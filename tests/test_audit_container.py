"""The container backend, for real: Podman (runc) and the offline base image that
scripts/container-base-image.sh builds and tags python:3.11-slim, debian:bookworm-slim, ...

These tests skip when no engine or base image is there, unless METAEVAL_REQUIRE_CONTAINER=1
(as `make test` sets it, after building the base image), in which case they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from metaeval.protocols.audit import execution_checks
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.execution_results import execution_lines, unavailable_image
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings
from metaeval.protocols.audit.task_hints import Hints
from metaeval.protocols.audit.task_view import load_task
from metaeval.sandbox.container import find_engine
from metaeval.tasks.images import ensure_image, environment_digest, image_exists
from metaeval.tasks.sources.terminal_bench import convert_tb1_task

BENCH = Path(__file__).parent / "fixtures" / "audit-real"
SWE_BASE = "swebench/sweb.eval.x86_64.django_1776_django-12983:latest"
OFFLINE = "\n[environment]\nallow_internet = false\n"


@pytest.fixture(scope="module")
def engine():
    found, why = find_engine("podman")
    problem = why
    if found is not None and not image_exists(found, "python:3.11-slim"):
        problem = "base image python:3.11-slim missing (run scripts/container-base-image.sh)"
    if problem:
        if os.environ.get("METAEVAL_REQUIRE_CONTAINER") == "1":
            pytest.fail(f"METAEVAL_REQUIRE_CONTAINER=1 but {problem}")
        pytest.skip(problem)
    return found


def copy_task(name: str, dst: Path, offline: bool = True) -> Path:
    target = dst / name.rsplit("/", 1)[-1]
    shutil.copytree(BENCH / name, target)
    if offline:  # the tests never reach the internet; the base image ships pytest
        toml = target / "task.toml"
        toml.write_text(toml.read_text().replace("\n[environment]\n", OFFLINE, 1))
        test_sh = target / "tests" / "test.sh"
        lines = test_sh.read_text().splitlines(keepends=True)
        test_sh.write_text("".join(line for line in lines if "pip install" not in line))
    return target


def run(task_dir: Path, sandbox: str = "podman"):
    task = load_task(task_dir, bench_root=task_dir.parent, hints=Hints())
    return run_execution_checks(task, hints=Hints(), timeout_s=180, sandbox=sandbox)


def test_clean_task_passes_its_oracle_in_its_own_image(engine, tmp_path: Path) -> None:
    task = copy_task("clean/csv-dedupe", tmp_path)
    result = run(task)
    assert result.skipped is None
    # the offline image only plays python:3.11-slim: the run says so and is approximate
    assert result.stand_in == ["python:3.11-slim"] and result.approximate
    assert result.backend.startswith("podman")
    assert result.oracle.passed, result.oracle.log
    assert result.null_agent.ran and not result.null_agent.passed
    assert result.findings == []
    # the image is cached by the digest of environment/: a second build is a lookup
    again = ensure_image(engine, task, None)
    assert again.status == "ok" and again.cached
    assert again.image.endswith(environment_digest(task / "environment")[:20])


def test_build_failure_is_a_finding_with_the_build_log(engine, tmp_path: Path) -> None:
    result = run(copy_task("defective/tb-leftover-copy", tmp_path))
    assert result.skipped == "podman: the environment does not build"
    [finding] = result.findings
    assert (finding.subcategory, finding.severity) == ("ENV-PATH", "Critical")
    assert finding.evidence[0].file == "logs/build.log"
    assert "tests" in finding.evidence[0].snippet and "no such file" in finding.evidence[0].snippet
    assert not result.oracle.ran


def test_unavailable_images_are_infrastructure_skips(
    engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image (or base image) the engine does not hold is a skip naming it, said before
    any build or container start: nothing of the engine runs for that task."""

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the engine was asked to build or describe for a missing image")

    monkeypatch.setattr(execution_checks, "ensure_image", never)
    monkeypatch.setattr(execution_checks, "describe_engine", never)
    local = run(copy_task("defective/local-image", tmp_path))
    assert local.findings == [] and local.infra_error  # retried on resume, never a finding
    assert local.skipped == (
        "podman: image tbench-eval-env:latest is not available here (not present locally, "
        "not pulled)"
    )
    swe = run(copy_task("clean/django-slugify", tmp_path))
    assert swe.findings == [] and unavailable_image(swe.skipped) == SWE_BASE and swe.infra_error
    lines = execution_lines([(False, local.skipped or ""), (False, swe.skipped or ""), (True, "")])
    assert lines == [
        "1 of 3 tasks could run: 2 need an image that is not available here "
        f"(tbench-eval-env:latest, {SWE_BASE}); `--no-execution` skips this step"
    ]


LIMITS_TEST = """#!/bin/bash
mkdir -p /logs/verifier
limit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)
echo "memory=$limit"
if [ -e /solution ]; then echo "solution-visible"; fi
if python3 -c "import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)" 2>/dev/null; then
  echo "network-on"
else
  echo "network-off"
fi
cat /app/made-by-solve.txt 2>/dev/null || echo "no-solve-output"
echo 0 > /logs/verifier/reward.txt
"""
LIMITS_SOLVE = """#!/bin/bash
if [ -e /tests ]; then echo "tests-visible-to-solve"; fi
pwd > /app/made-by-solve.txt
"""


def test_phases_get_task_limits_and_see_only_their_directories(engine, tmp_path: Path) -> None:
    task = copy_task("clean/csv-dedupe", tmp_path)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 1024", "memory_mb = 512"))
    (task / "tests" / "test.sh").write_text(LIMITS_TEST)
    (task / "solution" / "solve.sh").write_text(LIMITS_SOLVE)
    result = run(task)
    oracle, null = result.oracle.log, result.null_agent.log
    assert f"memory={512 * 1024 * 1024}" in oracle
    assert "network-off" in oracle and "network-on" not in oracle
    assert "tests-visible-to-solve" not in oracle  # solve.sh runs before /tests is copied in
    assert "/app" in oracle  # solve.sh ran in the image's WORKDIR, tests read its output
    assert "no-solve-output" in null  # a fresh container per phase


def test_converted_terminal_bench_task_builds_and_passes(engine, tmp_path: Path) -> None:
    from test_audit_convert_dockerfile import write_tb1

    src = write_tb1(tmp_path / "tb1" / "fib-fix")
    dst = tmp_path / "harbor" / "fib-fix"
    convert_tb1_task(src, dst)
    toml = dst / "task.toml"
    toml.write_text(toml.read_text() + OFFLINE)
    result = run(dst)
    assert result.skipped is None, result.build_log
    assert result.oracle.passed, result.oracle.log
    assert not result.null_agent.passed and result.findings == []


def test_a_converted_whole_context_task_builds_and_its_runner_finds_its_tests(
    engine, tmp_path: Path
) -> None:
    """`COPY . /app` then `RUN chmod +x run-tests.sh`, and a runner reading tests/ under /app:
    the converted image holds what the Terminal-Bench 1 original's context held."""
    from test_audit_convert_dockerfile import write_whole_context_tb1

    src = write_whole_context_tb1(tmp_path / "tb1" / "fib-fix")
    dst = tmp_path / "harbor" / "fib-fix"
    convert_tb1_task(src, dst)
    toml = dst / "task.toml"
    toml.write_text(toml.read_text() + OFFLINE)
    result = run(dst)
    assert result.skipped is None, result.build_log
    assert result.oracle.passed, result.oracle.log
    assert not result.null_agent.passed and result.findings == []


def test_converted_task_with_the_compose_template_runs_in_a_container(
    engine, tmp_path: Path
) -> None:
    """Terminal-Bench 1 shipped a docker-compose.yaml with every task; the converter leaves
    the standard client service to Harbor and carries its variables and `network_mode: none`
    into task.toml, so the task runs as a single container and its tests see the variables."""
    from test_audit_convert import OFFLINE_COMPOSE
    from test_audit_convert_dockerfile import write_tb1

    src = write_tb1(tmp_path / "tb1" / "fib-fix")
    (src / "docker-compose.yaml").write_text(OFFLINE_COMPOSE)
    (src / "run-tests.sh").write_text(
        '#!/bin/bash\n[ "$PYTHONHASHSEED" = 0 ] && [ "$TZ" = UTC ] || exit 1\n'
        'python3 -m pytest "$TEST_DIR/test_outputs.py"\n'
    )
    dst = tmp_path / "harbor" / "fib-fix"
    convert_tb1_task(src, dst)
    result = run(dst)
    assert result.skipped is None, result.build_log
    assert result.oracle.passed, result.oracle.log
    assert not result.null_agent.passed and result.findings == []


def test_audit_run_reports_backend_and_one_finding_per_defect(engine, tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    copy_task("defective/tb-leftover-copy", bench)
    copy_task("clean/csv-dedupe", bench)
    AuditRun(
        AuditSettings(bench_dir=bench, run_dir=tmp_path / "run", static_only=True, sandbox="podman")
    ).run()
    report = (tmp_path / "run" / "report.md").read_text()
    assert "1 finding on 2 tasks (1 flagged)" in report
    # the static COPY check and the failed build are one finding, with both pieces of evidence
    assert report.count("#### [Critical]") == 1
    assert "`environment/Dockerfile:4`" in report and "`logs/build.log`" in report
    assert "oracle pass, null agent fail (podman" in report
    assert "podman: the environment does not build (1 task)" in report


def test_a_run_step_reading_a_file_the_context_lacks_really_breaks_the_build(
    engine, tmp_path: Path
) -> None:
    """The static RUN-read finding is what Podman sees: the build stops at that chmod, and the
    audit reports the static finding and the failed build as one defect."""
    bench = tmp_path / "bench"
    task = copy_task("clean/csv-dedupe", bench)
    (task / "environment" / "scripts").mkdir()
    (task / "environment" / "scripts" / "build.sh").write_text("#!/bin/bash\necho built\n")
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text()
        + "COPY scripts/ /app/scripts/\n"
        + "RUN chmod +x /app/scripts/reset-state.sh /app/scripts/build.sh && mkdir -p /app/out\n"
    )
    result = run(task)
    assert result.skipped == "podman: the environment does not build"
    assert "/app/scripts/reset-state.sh" in result.build_log
    assert "No such file or directory" in result.build_log
    AuditRun(
        AuditSettings(bench_dir=bench, run_dir=tmp_path / "run", static_only=True, sandbox="podman")
    ).run()
    report = (tmp_path / "run" / "report.md").read_text()
    assert "1 finding on 1 tasks (1 flagged)" in report, report
    assert report.count("#### [Critical]") == 1
    assert "reads `/app/scripts/reset-state.sh`, which the build context does not provide" in report
    assert "`logs/build.log`" in report  # the failed build is folded in as evidence


def test_phases_run_as_the_images_user(engine, tmp_path: Path) -> None:
    task = copy_task("clean/csv-dedupe", tmp_path)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text() + "RUN useradd -m runner && chown -R runner /app\nUSER runner\n"
    )
    (task / "tests" / "test.sh").write_text(
        '#!/bin/bash\necho "user=$(id -un)"\nls /tests/test_outputs.py\n'
        "echo 1 > /logs/verifier/reward.txt\n"
    )
    result = run(task)
    assert result.skipped is None, result.build_log
    assert "user=runner" in result.null_agent.log
    assert "/tests/test_outputs.py" in result.null_agent.log
    assert result.null_agent.reward == 1


BASE = "localhost/metaeval-base:bookworm"  # the offline image under its own name: faithful


def use_base(task: Path, base: str) -> None:
    dockerfile = task / "environment" / "Dockerfile"
    lines = dockerfile.read_text().splitlines(keepends=True)
    dockerfile.write_text(
        "".join(f"FROM {base}\n" if line.startswith("FROM ") else line for line in lines)
    )


def test_a_run_step_failing_on_a_stand_in_is_no_accusation(engine, tmp_path: Path) -> None:
    # python:3.11-slim ships pip; its offline stand-in does not. The build fails at the RUN
    # step on this machine, and that must not read as "the task's image does not build".
    task = copy_task("clean/csv-dedupe", tmp_path)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN pip install --no-cache-dir pandas==2.2.2\n")
    result = run(task)
    # an infrastructure skip that names the stand-in, not a finding (issue 26)
    assert result.skipped == (
        "podman: not run: the build needs `pip`, which a local stand-in for python:3.11-slim "
        "lacks (the real image is not available here)"
    )
    assert "pip: not found" in result.build_log
    assert result.findings == []
    assert result.mismatch and "stand-in for python:3.11-slim" in result.mismatch


def test_a_run_step_failing_on_the_real_base_image_is_critical(engine, tmp_path: Path) -> None:
    task = copy_task("clean/csv-dedupe", tmp_path / "real")
    use_base(task, BASE)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN pip install --no-cache-dir pandas==2.2.2\n")
    result = run(task)
    assert result.stand_in == [] and not result.approximate and result.mismatch is None
    [finding] = result.findings
    assert (finding.subcategory, finding.severity) == ("ENV-DEP", "Critical")


def test_oracle_failures_are_capped_only_on_a_stand_in(engine, tmp_path: Path) -> None:
    seen = {}
    for base in ("python:3.11-slim", BASE):
        task = copy_task("clean/csv-dedupe", tmp_path / base.replace("/", "_").replace(":", "_"))
        use_base(task, base)
        (task / "solution" / "solve.sh").write_text(
            "#!/bin/bash\necho 'wrong' > /app/cleaned_data.csv\n"
        )
        result = run(task)
        assert result.skipped is None, result.build_log
        assert result.oracle.ran and not result.oracle.passed
        [finding] = [f for f in result.findings if f.category == "GT"]
        seen[base] = (finding.severity, finding.confidence <= 0.3)
    assert seen == {"python:3.11-slim": ("Low", True), BASE: ("High", False)}
