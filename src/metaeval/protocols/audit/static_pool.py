"""Worker processes for the static source's cells (see `static_cell`).

Kept apart from the checks themselves so the orchestrating process does not import the
parsers it hands to its workers: the workers (forked from a server that imported
`static_cell` once) do.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metaeval.tasks.bench_hash import benchmark_hash

if TYPE_CHECKING:
    from metaeval.protocols.audit.task_view import Hints, InputTier

Cell = tuple[dict[str, Any], list[dict[str, Any]]]
WORKER_MODULE = "metaeval.protocols.audit.static_cell"


def in_worker(*args: Any) -> Cell:
    """Runs in a worker: `static_cell.in_worker`."""
    from metaeval.protocols.audit.static_cell import in_worker as compute

    return compute(*args)


# Static cells are background work: with model calls in flight the orchestrating process
# must get a core the moment a response arrives, or every call of a wave waits behind
# parsing (on 2 cores, two busy workers held N=1024 C=128 to 0.73 of the latency limit).
WORKER_NICENESS = 10


def lower_priority() -> None:
    """Worker initializer: run static cells at a lower CPU priority than the orchestrator."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


def ready() -> None:
    """A no-op run in a fresh worker, so that the pool starts it now."""


class StaticPool:
    """Worker processes for static cells; a pool whose worker died is replaced, and the
    cell that saw it fails as an infrastructure error (retried on resume)."""

    def __init__(self, workers: int, blobs_root: Path, hints: Hints | None, tier: InputTier,
                 bench_root: Path, agent_results: Path | None, execution_checks: bool,
                 sandbox: str, host_env: tuple[str, ...] = ()):  # fmt: skip
        self.workers = workers
        self.blobs_root = blobs_root
        self.load = {"tier": tier, "bench_root": bench_root, "agent_results": agent_results}
        self.checks = {
            "hints": hints,
            "execution_checks": execution_checks,
            "sandbox": sandbox,
            "host_env": host_env,
        }
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError("the static worker pool is closed")
            if self._pool is None:
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload([WORKER_MODULE])
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=context, initializer=lower_priority
                )
            return self._pool

    def start(self) -> None:
        """Start the worker processes now, in the background: starting the fork server
        (which imports the checks once) takes a few hundred ms the caller need not wait."""

        def spawn() -> None:
            with contextlib.suppress(RuntimeError):  # closed before it started: nothing to do
                pool = self._executor()
                for _ in range(self.workers):
                    pool.submit(ready)

        threading.Thread(target=spawn, name="static-pool-start", daemon=True).start()

    def benchmark_hash(self, bench_dir: Path, task_dirs: list[Path]) -> Callable[[], str]:
        """Start hashing the benchmark in a worker (on another core than the orchestrator's,
        ahead of most static cells); the returned function waits for the digest. If no
        worker can compute it, it is computed in this process instead."""
        digest: Future[str] = Future()

        def compute() -> None:  # a thread: submitting waits for the fork server to start
            try:
                try:
                    pool = self._executor()
                    value = pool.submit(benchmark_hash, bench_dir, task_dirs).result()
                except (RuntimeError, BrokenProcessPool, OSError, EOFError):
                    value = benchmark_hash(bench_dir, task_dirs)
                digest.set_result(value)
            except BaseException as exc:  # noqa: BLE001 - raised to whoever waits
                digest.set_exception(exc)

        threading.Thread(target=compute, name="benchmark-hash", daemon=True).start()
        return digest.result

    def run(self, task_dir: Path, base: dict[str, Any]) -> Cell:
        """The static cell of `task_dir`, computed in a worker process."""
        pool = self._executor()
        try:
            return pool.submit(
                in_worker, task_dir, base, self.load, self.checks, self.blobs_root
            ).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._closed = True
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
