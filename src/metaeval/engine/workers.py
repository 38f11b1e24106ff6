"""The threads that run a local executor's job bodies."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class WorkerThreads:
    """Daemon threads that run job bodies from a queue, reused from job to job.

    Threads are started by a helper thread, so the event loop never waits for a thread to
    start (under load that wait alone serialised a run). A job that times out keeps its
    thread busy; `replace_one` starts another so `size` threads stay available.
    """

    def __init__(self, size: int):
        self._size = max(1, size)
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._started = 0

    def __enter__(self) -> WorkerThreads:
        threading.Thread(target=self._spawn, args=(self._size,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in range(self._started + self._size):
            self._queue.put(None)  # one stop signal per thread (extra ones are harmless)

    def submit(self, body: Callable[[], None]) -> None:
        self._queue.put(body)

    def replace_one(self) -> None:
        threading.Thread(target=self._spawn, args=(1,), daemon=True).start()

    def _spawn(self, count: int) -> None:
        for _ in range(count):
            self._started += 1
            threading.Thread(
                target=self._work, name=f"job-worker-{self._started}", daemon=True
            ).start()

    def _work(self) -> None:
        while True:
            body = self._queue.get()
            if body is None:
                return
            body()
