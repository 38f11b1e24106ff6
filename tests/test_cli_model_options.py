"""Model options on the command line (-M, --model-base-url, --model-timeout, --max-connections),
exercised through `metaeval audit run` against a real server process on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from metaeval.cli_options import model_options, parse_model_args
from metaeval.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parent))
from latency_server import LatencyServer  # noqa: E402

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
TASKS = ["word-count", "row-count", "order-total", "median-price", "grade-mean", "latency-mean"]


def audit(run_dir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    task_args = [a for t in TASKS for a in ("--task", t)]
    argv = [sys.executable, "-m", "metaeval.cli", "audit", "run", str(BENCH), "-o", str(run_dir)]
    env = {**os.environ, "OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    return subprocess.run(
        [*argv, *task_args, "--no-execution", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def model_cells(run_dir: Path) -> list[dict]:
    lines = (run_dir / "audits.jsonl").read_text().splitlines()
    return [c for c in map(json.loads, lines) if c["source"].startswith("openai/")]


def test_values_are_json_where_they_parse() -> None:
    parsed = parse_model_args(
        ["base_url=http://127.0.0.1:8000/v1", "max_connections=4", 'retry={"max_attempts": 2}']
    )
    assert parsed == {
        "base_url": "http://127.0.0.1:8000/v1",
        "max_connections": 4,
        "retry": {"max_attempts": 2},
    }
    assert parse_model_args(["timeout=30", "json_mode=json_object"]) == {
        "timeout_s": 30,
        "json_mode": "json_object",
    }
    assert model_options(["base_url=a"], base_url="b", timeout=5.0, max_connections=2) == {
        "base_url": "b",
        "timeout_s": 5.0,
        "max_connections": 2,
    }
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_model_args(["no-equals-sign"])


def test_base_url_and_max_connections_reach_the_provider(tmp_path: Path) -> None:
    with LatencyServer(0.5) as server:
        proc = audit(
            tmp_path / "run",
            "-m", "openai/cli-test", "-M", f"base_url={server.url}",
            "--concurrency", "6", "--max-connections", "2",
        )  # fmt: skip
        stats = server.stats()
    assert proc.returncode == 0, proc.stderr
    assert stats["peak_in_service"] == 2
    # calls share kept-alive connections: no more are opened than calls are allowed out
    assert 1 <= stats["connections"] <= 2
    cells = model_cells(tmp_path / "run")
    assert len(cells) == len(TASKS) and all(c["status"] == "ok" for c in cells)


def test_provider_slots_follow_concurrency_from_the_command_line(tmp_path: Path) -> None:
    with LatencyServer(1.0) as server:
        proc = audit(
            tmp_path / "run",
            "-m", "openai/cli-test", "--model-base-url", server.url, "--concurrency", "12",
        )  # fmt: skip
        stats = server.stats()
    assert proc.returncode == 0, proc.stderr
    # 6 model cells (the 6 static cells finish at once): all 6 requests in flight together.
    assert stats["peak_in_service"] == len(TASKS)


def test_model_timeout_bounds_each_call(tmp_path: Path) -> None:
    with LatencyServer(5.0) as server:
        proc = audit(
            tmp_path / "run",
            "-m", "openai/cli-test", "--model-base-url", server.url, "--concurrency", "6",
            "--model-timeout", "0.5", "-M", 'retry={"max_attempts": 2, "base_delay_s": 0}',
        )  # fmt: skip
    assert proc.returncode == 3, proc.stderr  # finished, every model cell an infra error
    assert f"infra errors: {len(TASKS)} × openai/cli-test: model call to {server.url}" in (
        proc.stdout
    )
    cells = model_cells(tmp_path / "run")
    assert len(cells) == len(TASKS)
    for cell in cells:
        assert cell["infra_error"] is True
        assert "after 2 attempts (transient)" in cell["error"] and "Timeout" in cell["error"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-m", "openai/x", "-M", "base_url"], "expected KEY=VALUE"),
        (["-m", "local/smollm2", "-M", "base_url=http://x"], "does not take the option 'base_url'"),
        (
            ["-m", "openai/x", "-M", "max_connections=0", "-M", "base_url=http://x"],
            "max_connections",
        ),
    ],
)
def test_bad_model_options_exit_2_with_a_clear_message(
    tmp_path: Path, args: list[str], message: str
) -> None:
    proc = audit(tmp_path / "run", *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()  # nothing written for a bad command line


def test_static_only_runs_one_job_per_core_by_default(tmp_path: Path) -> None:
    proc = audit(tmp_path / "run", "--static-only")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["concurrency"] == len(os.sched_getaffinity(0))
    proc = audit(tmp_path / "run1", "--static-only", "--concurrency", "1")
    assert proc.returncode == 0, proc.stderr
    one = json.loads((tmp_path / "run1" / "manifest.json").read_text())
    assert one["config"]["concurrency"] == 1

    # Parallel or not, the same findings.
    def findings(run: str) -> list[tuple[str, str]]:
        lines = (tmp_path / run / "findings.jsonl").read_text().splitlines()
        return sorted((f["task_id"], f["title"]) for f in map(json.loads, lines))

    assert findings("run") == findings("run1") and findings("run")
