"""Static cells in the engine's process lane give exactly what they give in-process, and a
killed worker is an infrastructure error, not a verdict on the task."""

from __future__ import annotations

import json
import os
import signal
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from metaeval.engine.executor import available_cores
from metaeval.engine.process_lane import ProcessLane
from metaeval.protocols.audit.run import AuditRun, AuditSettings
from metaeval.transient import is_transient

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
VOLATILE = {"attempt", "created_at", "ts", "layer", "duration_s"}


def stable(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted(
        json.dumps({k: v for k, v in r.items() if k not in VOLATILE}, sort_keys=True) for r in rows
    )


def audit(run_dir: Path, concurrency: int) -> None:
    AuditRun(
        AuditSettings(
            bench_dir=BENCH,
            run_dir=run_dir,
            static_only=True,
            concurrency=concurrency,
            execution_checks=False,
            progress=False,
        )
    ).run()


def test_worker_processes_give_the_in_process_result(tmp_path: Path, monkeypatch) -> None:
    in_workers: list[int] = []
    original = ProcessLane.call_named

    def counting(self, target, *args):
        cell = original(self, target, *args)
        in_workers.append(1)
        return cell

    monkeypatch.setattr(ProcessLane, "call_named", counting)
    audit(tmp_path / "serial", 1)
    assert in_workers == []  # one job in flight: no worker processes
    audit(tmp_path / "pooled", 4)
    assert len(in_workers) == 14  # every static cell of the example bench ran in a worker
    for name in ("audits.jsonl", "findings.jsonl"):
        assert stable(tmp_path / "pooled" / name) == stable(tmp_path / "serial" / name), name


def _kill_myself(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_an_infrastructure_error_and_the_lane_recovers(tmp_path: Path) -> None:
    lane = ProcessLane(2, preload=["metaeval.protocols.audit.cells.static"])
    try:
        try:
            lane.call(_kill_myself)
        except BrokenProcessPool as exc:
            error: BaseException = exc
        assert is_transient(error)
        # the pool is replaced: the next cell is computed normally
        cell, findings = lane.call_named(
            "metaeval.protocols.audit.cells.static:in_worker",
            BENCH / "word-count",
            {"task_id": "word-count", "source": "static", "attempt": "a1"},
            {"tier": "definition", "bench_root": BENCH, "agent_results": None},
            {"hints": None, "execution_checks": False, "sandbox": "auto", "host_env": ()},
            tmp_path / "blobs",
        )
        assert cell["status"] == "ok" and cell["task_id"] == "word-count"
    finally:
        lane.close()


def test_the_benchmark_hash_is_the_same_from_a_worker_and_a_changed_task_refuses_resume(
    tmp_path: Path, monkeypatch
) -> None:
    import shutil

    import pytest

    from metaeval.errors import RecordIntegrityError
    from metaeval.tasks.bench_hash import benchmark_hash

    bench = tmp_path / "bench"
    shutil.copytree(BENCH, bench)
    tasks = sorted(p.parent for p in bench.glob("*/task.toml"))
    expected = benchmark_hash(bench, tasks)
    in_worker: list[int] = []
    original = ProcessLane.background

    def recorded(self, fn, *args):
        in_worker.append(1)
        return original(self, fn, *args)

    monkeypatch.setattr(ProcessLane, "background", recorded)

    def settings(concurrency: int) -> AuditSettings:
        return AuditSettings(
            bench_dir=bench,
            run_dir=tmp_path / f"run-{concurrency}",
            static_only=True,
            concurrency=concurrency,
            execution_checks=False,
            progress=False,
        )

    digests = {}
    for concurrency in (1, 2):  # 1: computed in-process; 2: in a static worker process
        AuditRun(settings(concurrency)).run()
        assert len(in_worker) == (1 if concurrency == 2 and available_cores() >= 2 else 0)
        manifest = json.loads((tmp_path / f"run-{concurrency}" / "manifest.json").read_text())
        digests[concurrency] = manifest["hashes"]["benchmark"]
    assert digests == {1: expected, 2: expected}
    (tasks[0] / "instruction.md").write_text("edited after the run\n")
    with pytest.raises(RecordIntegrityError, match="benchmark"):
        AuditRun(settings(2)).run()
