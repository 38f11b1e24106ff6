"""Faults of the machine and odd inputs get their own clear message, never "report it as a bug".

Each fault is real: a tmpfs of a few KiB that fills up during an audit (then grows, and the
same command resumes), a tmpfs remounted read-only under a finished run, a file size limit
(RLIMIT_FSIZE), benchmark files and folders whose names are not UTF-8, an artifact so named
in a build-and-find release, a compose file nested thousands deep, a binary instruction.md and
a run config of megabytes.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from metaeval.records import read_jsonl

REPO = Path(__file__).resolve().parents[1]
AUDIT_BENCH = REPO / "examples" / "audit-bench"
RESUMES = "run the same command again: it resumes where it stopped"


def cli(*args: str, cwd: Path | None = None, fsize: int | None = None):
    env = {k: v for k, v in os.environ.items() if k != "METAEVAL_DEBUG"}

    def limit() -> None:  # in the child: a file size limit (writes past it fail with EFBIG)
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", *args],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=600,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        preexec_fn=limit,
    )


def audit_argv(bench: Path, run: Path) -> list[str]:
    return ["audit", "run", str(bench), "--static-only", "--no-execution", "-o", str(run)]


def assert_operator_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "unexpected" not in output and "report it as a bug" not in output, output
    assert "Traceback" not in output, output
    for needle in needles:
        assert needle in result.stderr, (needle, output)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def can_mount(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(probe)], capture_output=True
    )
    if done.returncode == 0:
        subprocess.run(["umount", str(probe)], check=False)
    return done.returncode == 0


def records_readable(run: Path) -> None:
    """Every record file parses, but for at most a torn last line."""
    for path in run.glob("*.jsonl"):
        _, problems = read_jsonl(path)
        assert all(p.kind == "torn" and p.last for p in problems), problems


@pytest.fixture(scope="module")
def clean_findings(tmp_path_factory: pytest.TempPathFactory) -> int:
    run = tmp_path_factory.mktemp("clean") / "run"
    result = cli(*audit_argv(AUDIT_BENCH, run))
    assert result.returncode == 0, result.stderr
    return len(read_jsonl(run / "findings.jsonl")[0])


# ------------------------------------------------------------------------------ a full disk


@pytest.mark.parametrize("size", ["8k", "16k", "24k", "40k"])
def test_a_full_disk_names_the_file_and_a_rerun_resumes(
    tmp_path: Path, clean_findings: int, size: str
) -> None:
    """Each size runs out at another write: the manifest, the cell records, the findings,
    the reports."""
    if not can_mount(tmp_path):  # not root: a file size limit stands in for the full disk
        run = tmp_path / "run"
        full = cli(*audit_argv(AUDIT_BENCH, run), fsize=int(size[:-1]) * 1024)
        assert_operator_error(full, str(run), "file too large", RESUMES)
        records_readable(run)
        again = cli(*audit_argv(AUDIT_BENCH, run))
        assert again.returncode == 0, again.stderr
        return
    with tmpfs(tmp_path / "disk", size) as disk:
        run = disk / "run"
        full = cli(*audit_argv(AUDIT_BENCH, run))
        assert_operator_error(full, f"error: {run}", "no space left on the device", RESUMES)
        records_readable(run)
        remount(disk, "size=8m")
        again = cli(*audit_argv(AUDIT_BENCH, run))
        assert again.returncode == 0, again.stdout + again.stderr
        findings = read_jsonl(run / "findings.jsonl")[0]
        cells = read_jsonl(run / "audits.jsonl")[0]
        assert len({c["task_id"] for c in cells}) == 14
        assert len(findings) >= clean_findings  # all there (a retried cell may add a copy)
        assert (run / "report.md").is_file()


def test_a_file_size_limit_is_an_operator_fault(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = cli(*audit_argv(AUDIT_BENCH, run), fsize=6000)
    assert_operator_error(result, str(run), "file too large", RESUMES)
    records_readable(run)
    assert cli(*audit_argv(AUDIT_BENCH, run)).returncode == 0


# ------------------------------------------------------------------------------ read-only


def test_a_read_only_output_names_the_file_and_changes_nothing(tmp_path: Path) -> None:
    if not can_mount(tmp_path):
        pytest.fail("this test mounts a tmpfs (run it as root, as the project's CI does)")
    with tmpfs(tmp_path / "disk", "8m") as disk:
        run = disk / "run"
        assert cli(*audit_argv(AUDIT_BENCH, run)).returncode == 0
        before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
        remount(disk, "ro")
        try:
            report = cli("audit", "report", str(run))
            assert_operator_error(report, f"{run / '.lock'}: the file system is read-only")
            new = cli(*audit_argv(AUDIT_BENCH, disk / "new"))
            assert_operator_error(new, f"{disk / 'new'}: the file system is read-only", RESUMES)
            assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
        finally:
            remount(disk, "rw")


# ------------------------------------------------------------------------------ odd names


def test_names_that_are_not_utf8_do_not_block_an_audit(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(AUDIT_BENCH, bench)
    env_dir = os.fsencode(bench / "grade-mean" / "environment")
    with open(env_dir + b"/data-\xff.txt", "wb") as handle:
        handle.write(b"x\n")
    odd_dir = os.fsencode(bench / "word-count" / "tests") + b"/dir-\xfe"
    os.mkdir(odd_dir)
    with open(odd_dir + b"/helper.py", "wb") as handle:
        handle.write(b"print(1)\n")
    run = tmp_path / "run"
    first = cli(*audit_argv(bench, run))
    assert first.returncode == 0, first.stdout + first.stderr
    cells = {c["task_id"]: c for c in read_jsonl(run / "audits.jsonl")[0]}
    assert cells["grade-mean"]["status"] == "ok" and cells["word-count"]["status"] == "ok"
    again = cli(*audit_argv(bench, run))  # the benchmark hash is stable: a resume, no change
    assert again.returncode == 0, again.stderr
    assert "resumed: 14 completed cell(s) reused" in again.stdout


def test_a_release_with_an_undecodable_artifact_name_names_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    made = cli(
        "buildfind", "run", str(REPO / "examples" / "buildfind-reference.yaml"), "-o", str(run)
    )
    assert made.returncode == 0, made.stderr
    artifact = next(p for p in (run / "artifacts").glob("*/*") if p.is_dir())
    with open(os.fsencode(artifact) + b"/notes-\xff.txt", "wb") as handle:
        handle.write(b"x\n")
    out = tmp_path / "release"
    result = cli("buildfind", "release", str(run), "-o", str(out))
    rel = artifact.relative_to(run).as_posix()
    assert_operator_error(result, f"{rel}/notes-\\xff.txt: a file name that is not UTF-8")
    assert not out.exists()  # no half-written release is left behind


# ------------------------------------------------------------------------------ odd files


def test_a_deep_compose_file_and_a_binary_instruction_draw_findings(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(AUDIT_BENCH, bench)
    nested = "services: " + "[" * 5000 + "]" * 5000 + "\n"
    (bench / "word-count" / "environment" / "docker-compose.yaml").write_text(nested)
    (bench / "grade-mean" / "instruction.md").write_bytes(bytes(range(256)) * 8)
    run = tmp_path / "run"
    result = cli(*audit_argv(bench, run))
    assert result.returncode == 0, result.stderr
    findings = read_jsonl(run / "findings.jsonl")[0]
    by_task = {(f["task_id"], f["title"]): f for f in findings}
    compose = by_task[("word-count", "environment/docker-compose.yaml is not valid YAML")]
    assert "nests too deeply" in compose["description"]
    binary = by_task[("grade-mean", "instruction.md is not readable text")]
    assert binary["subcategory"] == "INST-INFEASIBLE" and "binary" in binary["description"]
    cells = {c["task_id"]: c for c in read_jsonl(run / "audits.jsonl")[0]}
    assert not cells["word-count"].get("check_errors")
    report = (run / "report.md").read_text()
    assert "instruction.md is not readable text" in report


def test_a_failing_static_check_shows_in_the_report() -> None:
    from metaeval.protocols.audit.records import parse_cell
    from metaeval.protocols.audit.render import _task_entries
    from metaeval.protocols.audit.report import AuditReportData
    from metaeval.protocols.audit.report_markdown import render_markdown

    cell = {
        "task_id": "t",
        "source": "static",
        "attempt": "a1",
        "status": "ok",
        "n_findings": 0,
        "n_files": 3,
        "check_errors": {"build": "RecursionError: maximum recursion depth exceeded"},
        "execution": {"skipped": "disabled"},
    }
    tasks = _task_entries({("t", "static"): parse_cell(cell)})
    assert tasks[0].audit_failures == {
        "static check build": "RecursionError: maximum recursion depth exceeded"
    }
    data = AuditReportData(benchmark="b", run_id="r", models=[], tier="definition", tasks=tasks)
    assert "static check build: RecursionError" in render_markdown(data)


def test_a_huge_run_config_is_refused_at_once(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    agents = "\n".join(
        f'  - {{name: b{i}, agent: "reference:terse", effort: low, family: f}}'
        for i in range(60_000)
    )
    config.write_text(f"pack: {tmp_path}\nbuilders:\n{agents}\n")
    started = time.monotonic()
    result = cli("buildfind", "run", str(config), "-o", str(tmp_path / "run"))
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert f"{config}: run config is {config.stat().st_size} bytes" in result.stderr
    assert elapsed < 15, elapsed  # parsing it took about 20 s on a quiet machine
    assert not (tmp_path / "run").exists()
