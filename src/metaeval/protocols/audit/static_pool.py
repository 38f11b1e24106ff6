"""Worker processes for the static source's cells (see `static_cell`).

Kept apart from the checks themselves so the orchestrating process does not import the
parsers it hands to its workers: the workers (forked from a server that imported
`static_cell` once) do.
"""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metaeval.tasks.harbor import Hints, InputTier

Cell = tuple[dict[str, Any], list[dict[str, Any]]]
WORKER_MODULE = "metaeval.protocols.audit.static_cell"


def in_worker(*args: Any) -> Cell:
    """Runs in a worker: `static_cell.in_worker`."""
    from metaeval.protocols.audit.static_cell import in_worker as compute

    return compute(*args)


def ready() -> None:
    """A no-op run in a fresh worker, so that the pool starts it now."""


class StaticPool:
    """Worker processes for static cells; a pool whose worker died is replaced, and the
    cell that saw it fails as an infrastructure error (retried on resume)."""

    def __init__(self, workers: int, blobs_root: Path, hints: Hints | None, tier: InputTier,
                 bench_root: Path, agent_results: Path | None, execution_checks: bool,
                 sandbox: str):  # fmt: skip
        self.workers = workers
        self.blobs_root = blobs_root
        self.load = {"tier": tier, "bench_root": bench_root, "agent_results": agent_results}
        self.checks = {"hints": hints, "execution_checks": execution_checks, "sandbox": sandbox}
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload([WORKER_MODULE])
                self._pool = ProcessPoolExecutor(self.workers, mp_context=context)
            return self._pool

    def start(self) -> None:
        """Start the worker processes now (each imports the checks once) without waiting."""
        pool = self._executor()
        for _ in range(self.workers):
            pool.submit(ready)

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
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
