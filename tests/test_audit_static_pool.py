"""Static cells in worker processes give exactly what they give in-process, and a killed
worker is an infrastructure error, not a verdict on the task."""

from __future__ import annotations

import json
import os
import signal
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from metaeval.executor import available_cores
from metaeval.protocols.audit import static_pool as static_pool_mod
from metaeval.protocols.audit.runner import AuditRun, AuditSettings
from metaeval.transient import is_transient
from metaeval.transient import is_transient as model_level_transient

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
    original = static_pool_mod.StaticPool.run

    def counting(self, task_dir, base):
        cell = original(self, task_dir, base)
        in_workers.append(1)
        return cell

    monkeypatch.setattr(static_pool_mod.StaticPool, "run", counting)
    audit(tmp_path / "serial", 1)
    assert in_workers == []  # one job in flight: no worker processes
    audit(tmp_path / "pooled", 4)
    assert len(in_workers) == 14  # every static cell of the example bench ran in a worker
    for name in ("audits.jsonl", "findings.jsonl"):
        assert stable(tmp_path / "pooled" / name) == stable(tmp_path / "serial" / name), name


def _kill_myself(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_killed_worker_is_an_infrastructure_error_retried_on_resume(tmp_path: Path) -> None:
    pool = static_pool_mod.StaticPool(
        2, tmp_path / "blobs", None, "definition", BENCH, None, False, "auto"
    )
    try:
        broken = pool._executor().submit(_kill_myself)
        try:
            broken.result(timeout=60)
        except BrokenProcessPool as exc:
            error: BaseException = exc
        assert is_transient(error) and model_level_transient(error)
        # the pool is replaced: the next cell is computed normally
        pool._pool = None
        cell, findings = pool.run(
            BENCH / "word-count", {"task_id": "word-count", "source": "static"}
        )
        assert cell["status"] == "ok" and cell["task_id"] == "word-count"
    finally:
        pool.close()


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
    original = static_pool_mod.StaticPool.benchmark_hash

    def recorded(self, *args):
        in_worker.append(1)
        return original(self, *args)

    monkeypatch.setattr(static_pool_mod.StaticPool, "benchmark_hash", recorded)

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
