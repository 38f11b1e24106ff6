"""Run many jobs concurrently with per-job timeouts and a progress bar.

The contract every executor keeps (local threads here; a Ray executor later):

- `run(jobs, on_outcome)` runs each `Job` once; at most `concurrency` job bodies are in
  flight at a time. A job's `fn()` returns a value or raises; a job that exceeds its
  `timeout_s` is reported as "timeout" and its late result is discarded.
- `on_outcome(JobOutcome)` is called exactly once per job, one call at a time, in the
  orchestrating thread; it is where records are written. It must not block: it hands records
  to the run directory's writer thread and may return the `concurrent.futures.Future` that
  completes once they are durable (fsynced). A job counts as finished (progress bar) only when
  that future is done, and `run` returns only after every future is done (an error writing a
  record is raised from `run`).

So a job that fails or times out never loses or blocks the records of others, and the event
loop that starts jobs never waits for a disk.

A job's `duration_s` counts from the moment its body starts running, so the time it waited
for a slot (queue wait) is not in it. When output is not a terminal (a log, CI, `tee`), each
finished job prints one line and every job still running prints a heartbeat line every
`heartbeat_s` seconds (30 by default; `METAEVAL_HEARTBEAT_S` changes it), naming the job and
how long its body has run.

Backends are found by name (`BACKENDS`: "module:Class"), so this module imports none of them:
a backend imports the executor, never the other way round.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from metaeval.console import SafeConsole
from metaeval.engine.job_clock import JobClock
from metaeval.engine.progress import heartbeat_interval, write_line
from metaeval.engine.workers import WorkerThreads

OutcomeStatus = Literal["done", "failed", "timeout"]


@dataclass(frozen=True)
class JobResources:
    """What one job needs from the machine that runs it (the Ray backend schedules on it)."""

    cpus: float = 1.0
    memory_mb: int | None = None
    sandbox: bool = False  # needs bubblewrap or a container engine on its node


@dataclass
class Job:
    """One unit of work: `fn()` returns a value handed to the outcome callback.

    `key` is deterministic (derived from the cell), so a restarted driver plans the same jobs.
    """

    key: str
    fn: Callable[[], Any]
    timeout_s: float | None = None
    label: str = ""
    resources: JobResources | None = None
    # A named lane with its own bound (LocalExecutor `lanes`), outside `concurrency`: e.g.
    # short CPU work handed to worker processes, which must not hold a model call's slot.
    lane: str | None = None


@dataclass(frozen=True)
class JobFailed:
    """What a job body may return, instead of raising, to end as "failed" with this error
    text (a message written for the user rather than a traceback). The outcome keeps it as
    its `value`."""

    error: str


@dataclass
class JobOutcome:
    """How a job ended. `error` holds the traceback text of a failed job."""

    job: Job
    status: OutcomeStatus
    value: Any = None
    error: str | None = None
    duration_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


OutcomeCallback = Callable[[JobOutcome], "concurrent.futures.Future[Any] | None"]


def heartbeat_line(description: str, job: Job, elapsed_s: float) -> str:
    """The line a job still running prints: its name and how long its body has run."""
    return f"{description}: {job.label or job.key} still running, {elapsed_s:.1f}s"


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Executor(ABC):
    """Runs jobs and reports each outcome exactly once."""

    @abstractmethod
    def run(self, jobs: Sequence[Job], on_outcome: OutcomeCallback) -> list[JobOutcome]:
        """Run every job; call `on_outcome` once per job as it ends; return all outcomes
        once every record future `on_outcome` returned is done."""


class LocalExecutor(Executor):
    """Concurrent execution on this machine (threads under asyncio)."""

    def __init__(
        self,
        concurrency: int = 1,
        progress: bool | None = None,
        description: str = "jobs",
        console: Console | None = None,
        lanes: dict[str, int] | None = None,
        heartbeat_s: float | None = None,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if any(bound < 1 for bound in (lanes or {}).values()):
            raise ValueError("a lane's bound must be at least 1")
        self.concurrency = concurrency
        self.lanes = dict(lanes or {})
        self.console = console or SafeConsole(stderr=True)
        # None: a bar on a terminal, one line per finished job otherwise (logs, CI, files)
        self.lines = progress is None and not self.console.is_terminal
        self.progress = self.console.is_terminal if progress is None else progress
        self.description = description
        self.heartbeat_s = heartbeat_s or heartbeat_interval()

    def run(self, jobs: Sequence[Job], on_outcome: OutcomeCallback) -> list[JobOutcome]:
        """Run `jobs`; Ctrl-C cancels pending jobs, outcomes already handled stay written."""
        return asyncio.run(self._run_all(list(jobs), on_outcome))

    async def _run_all(self, jobs: list[Job], on_outcome: OutcomeCallback) -> list[JobOutcome]:
        semaphore = asyncio.Semaphore(self.concurrency)
        lanes = {name: asyncio.Semaphore(bound) for name, bound in self.lanes.items()}
        outcomes: list[JobOutcome] = []
        running: dict[int, tuple[Job, JobClock]] = {}  # jobs whose body runs
        workers = WorkerThreads(min(self.concurrency + sum(self.lanes.values()), len(jobs)))
        with (
            workers,
            Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
                console=self.console,
                disable=not self.progress,
            ) as bar,
        ):
            task_id = bar.add_task(self.description, total=len(jobs))

            async def one(job: Job) -> None:
                async with lanes.get(job.lane or "", semaphore):
                    outcome = await _run_job(job, workers, running)
                written = on_outcome(outcome)
                outcomes.append(outcome)
                if written is not None:
                    await asyncio.wrap_future(written)  # durable: then it counts as done
                bar.advance(task_id)
                if self.lines:
                    self._line(outcome, len(outcomes), len(jobs))

            beat = asyncio.create_task(self._heartbeat(running)) if self.lines else None
            try:
                await asyncio.gather(*(one(job) for job in jobs))
            finally:
                if beat is not None:
                    beat.cancel()
        return outcomes

    async def _heartbeat(self, running: dict[int, tuple[Job, JobClock]]) -> None:
        """Every `heartbeat_s`, one line per job whose body has run that long or longer
        (not counting, nor while, it waits in a queue)."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            now = time.monotonic()
            for job, clock in list(running.values()):
                elapsed = clock.elapsed(now)
                if elapsed is not None and elapsed >= self.heartbeat_s:
                    write_line(self.console, heartbeat_line(self.description, job, elapsed))

    def _line(self, outcome: JobOutcome, done: int, total: int) -> None:
        """One plain line per finished job, for output that is not a terminal."""
        name = outcome.job.label or outcome.job.key
        status = ended(outcome)
        line = f"{self.description} {done}/{total}: {name} {status} in {outcome.duration_s:.1f}s"
        write_line(self.console, line)


def ended(outcome: JobOutcome) -> str:
    """How a job ended, for its progress line: the job's status, or, when the job returned a
    record that says it did not end ok (a cell that timed out or failed inside), that."""
    value = outcome.value
    inner = value.get("status") if isinstance(value, dict) else getattr(value, "status", None)
    if outcome.status == "done" and isinstance(inner, str) and inner not in ("ok", "done"):
        return inner
    return outcome.status


async def _run_job(
    job: Job, workers: WorkerThreads, running: dict[int, tuple[Job, JobClock]]
) -> JobOutcome:
    """Run one job's body on a worker thread; its duration is the body's own time (from its
    start, less its waits in queues)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()
    clock = JobClock()

    def body() -> None:
        clock.start()
        running[id(future)] = (job, clock)
        try:
            value, error = job.fn(), None
        except BaseException:  # noqa: BLE001 - reported as a failed outcome
            value, error = None, traceback.format_exc()
        finally:
            running.pop(id(future), None)
            clock.stop()
        # RuntimeError: the run already ended (job timed out), so the late result is discarded.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, value, error)

    workers.submit(body)
    try:
        value, error = await asyncio.wait_for(asyncio.shield(future), job.timeout_s)
    except TimeoutError:
        workers.replace_one()  # the timed-out body still holds its thread
        return JobOutcome(
            job, "timeout", error=f"job exceeded {job.timeout_s}s", duration_s=job.timeout_s or 0
        )
    finally:
        running.pop(id(future), None)
    duration = clock.duration_s
    if error is not None:
        return JobOutcome(job, "failed", error=error, duration_s=duration)
    return settled(job, value, duration)


def settled(job: Job, value: Any, duration_s: float, **extra: Any) -> JobOutcome:
    """The outcome of a job body that returned `value` ("failed" if it is a `JobFailed`)."""
    if isinstance(value, JobFailed):
        return JobOutcome(job, "failed", value, value.error, duration_s, dict(extra))
    return JobOutcome(job, "done", value, None, duration_s, dict(extra))


def _settle(future: asyncio.Future, value: Any, error: str | None) -> None:
    if not future.done():
        future.set_result((value, error))


# --------------------------------------------------------------------------- backend switch

BACKENDS = {
    "local": "metaeval.engine.executor:LocalExecutor",
    "ray": "metaeval.engine.ray_backend:RayExecutor",
}
"""Executor backends by name: "module:Class", imported only when chosen."""
_backend: dict[str, str | None] = {
    "name": os.environ.get("METAEVAL_EXECUTOR") or "local",
    "ray_address": os.environ.get("METAEVAL_RAY_ADDRESS") or None,
}


def select_backend(name: str, ray_address: str | None = None) -> None:
    """Choose the backend `make_executor` builds for this process (`--executor`)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown executor {name!r}: choose one of {', '.join(BACKENDS)}")
    _backend["name"], _backend["ray_address"] = name, ray_address


def selected_backend() -> str:
    """The backend `make_executor` builds: "local" or "ray"."""
    return str(_backend["name"])


def make_executor(
    concurrency: int = 1,
    progress: bool | None = None,
    description: str = "jobs",
    console: Console | None = None,
    lanes: dict[str, int] | None = None,
    heartbeat_s: float | None = None,
) -> Executor:
    """The executor of the selected backend (local unless `select_backend("ray")` was called).

    `lanes` bound jobs of a named lane separately from `concurrency` (local backend only;
    Ray schedules every job on its declared resources)."""
    name = selected_backend()
    if name == "local":
        return LocalExecutor(
            concurrency, progress, description, console, lanes=lanes, heartbeat_s=heartbeat_s
        )
    import importlib

    module, _, class_name = BACKENDS[name].partition(":")
    backend: type[Executor] = getattr(importlib.import_module(module), class_name)
    return backend(  # type: ignore[call-arg]  # a remote backend takes its address
        concurrency, progress, description, console, address=_backend["ray_address"]
    )
