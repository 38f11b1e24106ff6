"""A process lane: worker processes for plain CPU cells, beside the threads of model calls.

A cell that is CPU work (parsers, AST walks) contends for the interpreter lock with every
thread waiting on a model call; in worker processes it uses the other cores instead. The
workers are forked from a server that imported `preload` once, so the orchestrating process
never imports what it hands them. A worker that dies (out of memory, a signal) breaks the
pool: the call that saw it raises `BrokenProcessPool` (a transient failure under
`metaeval.transient.is_transient`, so its cell is retried on resume) and the next call starts
a fresh pool.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")

# Lane work is background work: with model calls in flight the orchestrating process must
# get a core the moment a response arrives, or every call of a wave waits behind parsing
# (on 2 cores, two busy workers held N=1024 C=128 to 0.73 of the latency limit).
WORKER_NICENESS = 10


def lower_priority() -> None:
    """Worker initializer: run lane work at a lower CPU priority than the orchestrator."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


SOCKET_PATH_MAX = 107
"""The longest path an AF_UNIX socket may have on Linux (108 bytes with the NUL)."""
_SOCKET_IN_TEMP = os.path.join("pymp-xxxxxxxx", "listener-xxxxxxxx")


def short_socket_dir() -> None:
    """Make multiprocessing keep its fork server's socket where the path fits AF_UNIX.

    It puts the socket in a directory under TMPDIR; with a long TMPDIR (a test's tmp path,
    a deep per-job directory) the path passes the limit and every worker fails to start
    ("AF_UNIX path too long"). Then that directory is made under /tmp instead, once per
    process (multiprocessing reuses it and removes it at exit)."""
    base = tempfile.gettempdir()
    if len(os.path.join(base, _SOCKET_IN_TEMP)) <= SOCKET_PATH_MAX:
        return
    saved = tempfile.tempdir
    tempfile.tempdir = "/tmp"
    try:
        multiprocessing.util.get_temp_dir()
    finally:
        tempfile.tempdir = saved


def ready() -> None:
    """A no-op run in a fresh worker, so that the pool starts it now."""


def call_named(target: str, *args: Any) -> Any:
    """Runs in a worker: the function `target` ("package.module:function") on `args`, so the
    caller need not import that module to send it."""
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)(*args)


class ProcessLane:
    """`workers` processes (forkserver, `preload` modules imported once) that run
    picklable functions; a pool whose worker died is replaced on the next call."""

    def __init__(self, workers: int, preload: Sequence[str] = ()):
        if workers < 1:
            raise ValueError("a process lane needs at least one worker")
        self.workers = workers
        self.preload = list(preload)
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._closed = False

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError("the process lane is closed")
            if self._pool is None:
                short_socket_dir()
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(self.preload)
                self._pool = ProcessPoolExecutor(
                    self.workers, mp_context=context, initializer=lower_priority
                )
            return self._pool

    def start(self) -> None:
        """Start the worker processes now, in the background: starting the fork server
        (which imports `preload`) takes a few hundred ms the caller need not wait."""

        def spawn() -> None:
            with contextlib.suppress(RuntimeError):  # closed before it started: nothing to do
                pool = self._executor()
                for _ in range(self.workers):
                    pool.submit(ready)

        threading.Thread(target=spawn, name="process-lane-start", daemon=True).start()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker process; blocks for its result. A dead worker raises
        `BrokenProcessPool` here and the pool is replaced for the next call."""
        pool = self._executor()
        try:
            return pool.submit(fn, *args).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise

    def call_named(self, target: str, *args: Any) -> Any:
        """`call` of the function named `target` ("package.module:function"), imported in
        the worker only."""
        return self.call(call_named, target, *args)

    def background(self, fn: Callable[..., T], *args: Any) -> Callable[[], T]:
        """Start `fn(*args)` in a worker now (on another core than the caller's); the
        returned function waits for the value. If no worker can run it (lane closed or
        broken), it runs in this process instead."""
        result: Future[T] = Future()

        def compute() -> None:  # a thread: submitting waits for the fork server to start
            try:
                try:
                    value = self._executor().submit(fn, *args).result()
                except (RuntimeError, BrokenProcessPool, OSError, EOFError):
                    value = fn(*args)
                result.set_result(value)
            except BaseException as exc:  # noqa: BLE001 - raised to whoever waits
                result.set_exception(exc)

        threading.Thread(target=compute, name="process-lane-background", daemon=True).start()
        return result.result

    def close(self) -> None:
        """Stop the workers (waits for running calls); later calls raise RuntimeError."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._closed = True
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
