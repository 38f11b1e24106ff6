"""Execution checks with real bubblewrap: oracle and null-agent runs in a container-like root.

Tests marked `bwrap` skip only when bubblewrap cannot run here; with METAEVAL_REQUIRE_BWRAP=1
they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from metaeval.protocols.audit import execution_checks
from metaeval.protocols.audit.execution_checks import run_execution_checks
from metaeval.protocols.audit.execution_findings import log_tail
from metaeval.protocols.audit.execution_results import ExecutionCheckResult
from metaeval.protocols.audit.task_hints import Hints, load_hints
from metaeval.protocols.audit.task_view import load_task
from metaeval.sandbox import bwrap as bwrap_mod
from metaeval.sandbox.bwrap import bwrap_available
from metaeval.sandbox.policy import NETNS_SCRIPT, network_isolation
from metaeval.tasks.harbor_root import build_harbor_root_argv, run_harbor_phase
from metaeval.tasks.reward import read_reward

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"


@pytest.fixture
def sandboxed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bwrap_mod.FORCE_FALLBACK_ENV, raising=False)
    if not bwrap_available():
        if os.environ.get("METAEVAL_REQUIRE_BWRAP") == "1":
            pytest.fail("METAEVAL_REQUIRE_BWRAP=1 but bubblewrap cannot run on this machine")
        pytest.skip("bubblewrap (bwrap) is not usable on this machine")


def check(task_id: str, bench: Path = BENCH, hints: Hints | None = None) -> ExecutionCheckResult:
    hints = load_hints(bench) if hints is None else hints
    task = load_task(bench / task_id, bench_root=bench, hints=hints)
    return run_execution_checks(task, hints=hints, timeout_s=60)


# --------------------------------------------------------------------------- example bench


@pytest.mark.bwrap
def test_gt_logic_task_oracle_fails_with_finding(sandboxed: None) -> None:
    result = check("median-price")
    assert result.skipped is None
    assert result.oracle.ran and not result.oracle.passed
    assert result.oracle.reward == 0.0 and result.oracle.reward_source == "reward.txt"
    assert [f.subcategory for f in result.findings] == ["GT-LOGIC"]
    finding = result.findings[0]
    assert (finding.category, finding.severity, finding.finding_type) == ("GT", "High", "Bug")
    assert (finding.confidence, finding.source, finding.protocol) == (0.9, "static", "static")
    assert finding.task_id == "median-price"
    [evidence] = finding.evidence
    assert evidence.file == "logs/oracle.log"
    assert "FAIL: expected 14, found '8'" in evidence.snippet
    assert evidence.snippet in result.oracle.log
    assert set(result.logs) == {"logs/oracle.log", "logs/null_agent.log"}


@pytest.mark.bwrap
def test_clean_task_oracle_passes_and_null_agent_fails(sandboxed: None) -> None:
    result = check("word-count")
    assert result.skipped is None and result.findings == []
    assert result.oracle.passed and result.oracle.reward == 1.0
    assert result.null_agent.ran and not result.null_agent.passed
    assert result.null_agent.reward == 0.0
    assert "$ bash /solution/solve.sh" in result.oracle.log
    assert "$ bash /tests/test.sh" in result.oracle.log
    assert "solve.sh" not in result.null_agent.log
    assert "FAIL: /app/word_count.txt was not written" in result.null_agent.log


@pytest.mark.bwrap
def test_null_agent_passing_gives_eval_coverage(sandboxed: None) -> None:
    result = check("not-found-count")
    assert result.oracle.passed and result.null_agent.passed
    [finding] = result.findings
    assert (finding.category, finding.subcategory) == ("EVAL", "EVAL-COVERAGE")
    assert (finding.severity, finding.finding_type, finding.confidence) == ("High", "Bug", 0.9)
    assert finding.evidence[0].file == "logs/null_agent.log"
    assert "nothing to compare" in finding.evidence[0].snippet
    # the rerun without the oracle's output passes too, and adds no second finding
    removed = result.outputs_removed
    assert removed is not None and removed.passed
    assert result.removed_files == ["/app/not_found.txt"]
    assert removed.note == "the tests pass without the oracle's files, as the null agent showed"


@pytest.mark.bwrap
@pytest.mark.parametrize(
    ("task_id", "subcategory", "needle"),
    [
        ("inventory-by-category", "ENV-DEP", "No module named 'pandas'"),
        ("row-count", "ENV-PATH", "/home/alice/data/input.csv"),
        ("exchange-rates", "ENV-RESOURCE", "name resolution"),
        ("uppercase-names", "EVAL-MISMATCH", "reward: none"),
    ],
)
def test_oracle_failures_are_classified_by_cause(
    sandboxed: None, task_id: str, subcategory: str, needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Classification by cause, in an environment taken as the task's real image: on this
    # machine python:3.11-slim is an offline stand-in, whose evidence is capped (tested in
    # test_audit_container.py).
    monkeypatch.setattr(execution_checks, "stand_in_images", lambda engine, refs: [])
    result = check(task_id)
    assert [f.subcategory for f in result.findings] == [subcategory]
    assert needle in result.findings[0].evidence[0].snippet
    assert not result.null_agent.passed


@pytest.mark.bwrap
def test_without_an_engine_a_dockerfile_task_is_skipped_unless_marked_local(
    sandboxed: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No container engine on this "machine" (the engine probe is replaced; the runs are real).
    monkeypatch.setattr(
        execution_checks, "find_engine", lambda kind: (None, "no container engine: test")
    )
    bench = tmp_path / "bench"
    shutil.copytree(BENCH / "word-count", bench / "word-count")
    (bench / "word-count" / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    result = check("word-count", bench=bench)
    assert result.skipped == "no container engine: test"
    assert result.findings == [] and result.infra_error  # retried on resume
    assert not result.oracle.ran and not result.null_agent.ran and result.logs == {}

    # the same task marked local runs in bubblewrap, as an approximation of its image
    (bench / "benchguard_hints.yaml").write_text("local: [word-count]\n")
    result = check("word-count", bench=bench)
    assert result.skipped is None and result.oracle.passed
    assert result.approximate and result.backend == "bubblewrap"

    # the example bench's Dockerfile task, without its hints, is skipped too
    result = check("inventory-by-category", hints=Hints())
    assert result.skipped == "no container engine: test"


@pytest.mark.bwrap
def test_approximate_runs_call_a_missing_module_a_mismatch_not_a_defect(
    sandboxed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        execution_checks, "find_engine", lambda kind: (None, "no container engine: test")
    )
    # inventory-by-category's checker imports pandas; in bubblewrap that says nothing about
    # the image the Dockerfile builds.
    result = check("inventory-by-category")
    assert result.approximate and result.oracle.ran
    assert result.findings == []
    assert result.mismatch and "environment mismatch" in result.mismatch
    assert "pandas" in result.mismatch


@pytest.mark.bwrap
def test_approximate_failures_are_capped_at_low(sandboxed: None, tmp_path: Path) -> None:
    shutil.copytree(BENCH / "median-price", tmp_path / "median-price")
    (tmp_path / "median-price" / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nWORKDIR /app\nCOPY prices.csv .\n"
    )
    task = load_task(tmp_path / "median-price", bench_root=tmp_path, hints=Hints())
    result = run_execution_checks(task, hints=Hints(), timeout_s=60, sandbox="bwrap")
    [finding] = result.findings
    assert finding.subcategory == "GT-LOGIC"
    assert finding.severity == "Low" and finding.confidence <= 0.3
    assert "approximation" in finding.description


@pytest.mark.bwrap
def test_timeout_is_an_env_resource_finding(sandboxed: None, tmp_path: Path) -> None:
    shutil.copytree(BENCH / "order-total", tmp_path / "slow")
    (tmp_path / "slow" / "solution" / "solve.sh").write_text("#!/bin/bash\nsleep 30\n")
    task = load_task(tmp_path / "slow", bench_root=tmp_path, hints=Hints())
    result = run_execution_checks(task, hints=Hints(), timeout_s=1)
    assert result.oracle.timed_out
    [finding] = result.findings
    assert finding.subcategory == "ENV-RESOURCE" and finding.confidence == 0.6
    assert "timed out" in finding.evidence[0].snippet


@pytest.mark.bwrap
def test_task_without_solution_runs_only_the_null_agent(sandboxed: None, tmp_path: Path) -> None:
    shutil.copytree(BENCH / "order-total", tmp_path / "t")
    shutil.rmtree(tmp_path / "t" / "solution")
    result = check("t", bench=tmp_path, hints=Hints())
    assert not result.oracle.ran and result.oracle.note == "not run: no solution/solve.sh"
    assert result.null_agent.ran and result.findings == []
    assert set(result.logs) == {"logs/null_agent.log"}


# --------------------------------------------------------------------------- the root itself


@pytest.mark.bwrap
def test_harbor_root_isolation(sandboxed: None, tmp_path: Path) -> None:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "t.txt").write_text("from tests\n")
    (task / "solution").mkdir()
    (task / "solution" / "s.txt").write_text("from solution\n")
    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    logs.mkdir()
    secret = Path(__file__).resolve()  # a host file outside the root
    script = f"""
    set -u
    echo "pwd=$(pwd)"
    cat /tests/t.txt /solution/s.txt
    echo hi > /app/out.txt && echo app-writable
    touch /tests/new 2>/dev/null && echo tests-writable || echo tests-readonly
    test -e {secret} && echo host-visible || echo host-hidden
    test -e /work && echo work-visible || echo work-hidden
    python3 -c 'import sys; print("python", sys.version_info[0])'
    python3 -c 'import socket; socket.create_connection(("1.1.1.1", 53), timeout=2)' \
        2>/dev/null && echo net-on || echo net-off
    echo 1 > /logs/verifier/reward.txt
    """
    res = run_harbor_phase(task, work, logs, script, 30, False)
    assert res.ok, res.stderr
    out = res.stdout.split()
    assert "pwd=/app" in out
    for word in ("app-writable", "tests-readonly", "host-hidden", "work-hidden", "net-off"):
        assert word in out, (word, res.stdout)
    assert "from tests\nfrom solution" in res.stdout
    assert "python 3" in res.stdout
    assert (work / "out.txt").read_text() == "hi\n"
    assert read_reward(logs) == (1.0, "reward.txt", None)

    only_tests = run_harbor_phase(
        task, work, logs, "ls /solution 2>&1 || true; ls /tests", 30, False, mounts=("tests",)
    )
    assert "No such file or directory" in only_tests.stdout and "t.txt" in only_tests.stdout


def test_harbor_root_argv_shape(tmp_path: Path) -> None:
    argv = build_harbor_root_argv(
        app_dir=tmp_path, logs_dir=tmp_path, tests_dir=tmp_path, network=False
    )
    assert argv[-1] == "--" and argv[-3:-1] == ["--chdir", "/app"]
    assert "--share-net" not in argv and "--unshare-all" in argv
    joined = " ".join(argv)
    assert f"--bind {os.path.realpath(tmp_path)} /app" in joined
    assert f"--ro-bind {os.path.realpath(tmp_path)} /tests" in joined
    assert f"--bind {os.path.realpath(tmp_path)} /logs/verifier" in joined
    assert "/solution" not in argv
    triples = list(zip(argv, argv[1:], argv[2:], strict=False))
    assert ("--ro-bind", "/", "/") not in triples and ("--bind", "/", "/") not in triples
    networked = build_harbor_root_argv(app_dir=tmp_path, logs_dir=tmp_path, network=True)
    own = network_isolation() == "own"  # slirp4netns around bwrap, else the host's network
    assert ("--share-net" in networked) != own and (str(NETNS_SCRIPT) in networked) == own


def test_without_bwrap_everything_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(bwrap_mod.FORCE_FALLBACK_ENV, "1")
    result = check("word-count")
    assert result.skipped is not None and "bwrap" in result.skipped
    assert result.findings == [] and not result.oracle.passed
    (tmp_path / "w").mkdir()
    res = run_harbor_phase(BENCH / "word-count", tmp_path / "w", tmp_path, "true", 5, False)
    assert res.returncode is None and not res.ok
    assert "bubblewrap" in res.stderr


# --------------------------------------------------------------------------- rewards


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("reward.txt", "1\n", (1.0, "reward.txt", None)),
        ("reward.txt", " 0.5 ", (0.5, "reward.txt", None)),
        ("reward.json", json.dumps({"reward": 1}), (1.0, "reward.json", None)),
        ("reward.json", json.dumps({"accuracy": 0.25}), (0.25, "reward.json", None)),
        ("reward.json", "0.75", (0.75, "reward.json", None)),
    ],
)
def test_read_reward(tmp_path: Path, name: str, content: str, expected: tuple) -> None:
    (tmp_path / name).write_text(content)
    assert read_reward(tmp_path) == expected


def test_read_reward_problems(tmp_path: Path) -> None:
    assert read_reward(tmp_path) == (
        None,
        None,
        "no /logs/verifier/reward.txt or reward.json was written",
    )
    (tmp_path / "reward.txt").write_text("pass\n")
    value, source, error = read_reward(tmp_path)
    assert (value, source) == (None, "reward.txt") and "does not hold a number" in error
    (tmp_path / "reward.txt").unlink()
    (tmp_path / "reward.json").write_text(json.dumps({"a": 1, "b": 0}))
    assert read_reward(tmp_path)[2] == "reward.json has no 'reward' number"


def test_log_tail_is_an_exact_substring() -> None:
    log = "".join(f"line {i}\r\n" for i in range(100)) + "\n\n"
    tail = log_tail(log, lines=3)
    assert tail == "line 97\r\nline 98\r\nline 99\r"
    assert tail in log
    assert log_tail("short\nlog\n") == "short\nlog"
    assert log_tail("x" * 5000, chars=10) == "x" * 10


@pytest.mark.bwrap
def test_task_roots_get_a_stdlib_only_python(sandboxed: None, tmp_path: Path) -> None:
    """The root's python3 is a bare stand-in for a slim image: stdlib yes, host packages no.

    pydantic is installed wherever metaeval runs, so it would be importable if the task saw
    the host's (or metaeval's venv) site-packages.
    """
    from metaeval.sandbox.python_env import bare_python
    from metaeval.tasks.harbor_root import run_harbor_phase

    assert bare_python() is not None
    (tmp_path / "task").mkdir()
    (tmp_path / "app").mkdir()
    (tmp_path / "logs").mkdir()
    script = (
        "python3 -c 'import json, sqlite3, csv; print(\"stdlib ok\")'; "
        "python3 -c 'import pydantic' 2>&1 | tail -1; "
        "python3 -c 'import sys; print(sys.prefix)'"
    )
    result = run_harbor_phase(
        tmp_path / "task", tmp_path / "app", tmp_path / "logs", script, 60, False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "stdlib ok"
    assert lines[1] == "ModuleNotFoundError: No module named 'pydantic'"
    assert lines[2] == bare_python()
