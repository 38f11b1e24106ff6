"""Group commit: one writer thread makes appended records durable, one fsync per file per round.

Callers hand over encoded lines (or functions that encode them, run in the writer thread
so that a caller on an event loop does not spend its time serialising and scrubbing) and get a `concurrent.futures.Future` that completes
once their lines are on disk (written with one `os.write` each and fsynced). While the thread
is busy with one round, new commits queue up; the next round takes all of them, writes them,
and fsyncs each touched file once. So one fsync covers every record appended since the last,
and a record counts as written only after its fsync, exactly as with one fsync per record.

A commit may have several stages that must become durable in order (an audit cell's findings
before its cell record): stage k of every commit in a round is written and fsynced before any
stage k+1 is written. Records of different commits have no order beyond their files' order.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Protocol


class LineSink(Protocol):
    """A file the committer appends to (a JsonlWriter)."""

    def _write_line(self, data: bytes) -> None: ...

    def _fsync(self) -> None: ...


Stage = Sequence[tuple[LineSink, "bytes | Callable[[], bytes]"]]


class _Commit:
    __slots__ = ("future", "stages")

    def __init__(self, stages: Sequence[Stage]):
        self.stages = [list(stage) for stage in stages if stage]
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()


class GroupCommitter:
    """A background thread that appends and fsyncs lines in groups. Start on first use."""

    def __init__(self, name: str = "records", before_commit: Callable[[], object] | None = None):
        """`before_commit` runs in the writer thread before each group is written (e.g. to
        make blobs durable that the group's records name); if it fails, the group fails."""
        self._name = name
        self._before_commit = before_commit
        self._queue: list[_Commit] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pending = 0
        self.rounds = 0  # rounds committed (each: one fsync per touched file per stage)
        self.fsyncs = 0

    def submit(self, stages: Sequence[Stage]) -> concurrent.futures.Future[None]:
        """Queue lines for appending; the future completes when all stages are durable."""
        commit = _Commit(stages)
        if not commit.stages:
            commit.future.set_result(None)
            return commit.future
        with self._cond:
            if self._closed:
                raise ValueError(f"{self._name}: the record writer is closed")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"{self._name}-writer", daemon=True
                )
                self._thread.start()
            self._queue.append(commit)
            self._pending += 1
            self._cond.notify_all()
        return commit.future

    def flush(self) -> None:
        """Wait until everything submitted so far is durable (or failed)."""
        with self._cond:
            while self._pending:
                self._cond.wait()

    def close(self) -> None:
        """Flush, then stop the thread; later submits raise ValueError."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            while self._pending:
                self._cond.wait()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch, self._queue = self._queue, []
            try:
                self._commit(batch)
            finally:  # whatever happens, waiters in flush() and close() are released
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()

    def _commit(self, batch: list[_Commit]) -> None:
        if self._before_commit is not None:
            try:
                self._before_commit()
            except BaseException as exc:  # noqa: BLE001 - reported through every future
                for commit in batch:
                    _settle(commit.future, exc)
                return
        failed: dict[int, BaseException] = {}
        depth = max(len(c.stages) for c in batch)
        for k in range(depth):
            touched: dict[int, tuple[LineSink, list[int]]] = {}
            for index, commit in enumerate(batch):
                if k >= len(commit.stages) or index in failed:
                    continue
                for sink, data in commit.stages[k]:
                    try:
                        sink._write_line(data() if callable(data) else data)
                    except BaseException as exc:  # noqa: BLE001 - reported through the future
                        failed[index] = exc
                        break
                    touched.setdefault(id(sink), (sink, []))[1].append(index)
            for sink, indices in touched.values():
                try:
                    sink._fsync()
                    self.fsyncs += 1
                except BaseException as exc:  # noqa: BLE001 - every commit on it failed
                    for index in indices:
                        failed.setdefault(index, exc)
        self.rounds += 1
        for index, commit in enumerate(batch):
            _settle(commit.future, failed.get(index))


def _settle(future: concurrent.futures.Future[None], error: BaseException | None) -> None:
    """Complete a commit's future. A future its caller cancelled (an interrupted run stops
    waiting for its records) is left as it is: its lines were still written."""
    with contextlib.suppress(concurrent.futures.InvalidStateError):  # it was cancelled
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)
