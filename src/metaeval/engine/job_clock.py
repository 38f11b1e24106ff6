"""A job body's own time: from its start to its end, less its waits for shared slots.

The executor starts a `JobClock` in the thread that runs a job's body; code inside the body
wraps a wait for a shared slot (a model call slot) in `queued()`, so that wait is left out
of the job's `duration_s` and of its heartbeat.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_job_state = threading.local()


class JobClock:
    """A job body's own time: from its start to its end, less its waits in queues."""

    def __init__(self) -> None:
        self.started = 0.0
        self.queued = 0.0
        self.waiting_since: float | None = None
        self.duration_s = 0.0

    def start(self) -> None:
        """The body starts, in this thread: `queued` waits here count against this clock."""
        self.started = time.monotonic()
        _job_state.clock = self

    def stop(self) -> None:
        """The body ended (in the thread that started it)."""
        _job_state.clock = None
        self.duration_s = time.monotonic() - self.started - self.queued

    def elapsed(self, now: float) -> float | None:
        """The body's own time so far; None while it waits in a queue."""
        if self.waiting_since is not None:
            return None
        return now - self.started - self.queued


@contextmanager
def queued() -> Iterator[None]:
    """Around a wait for a shared slot inside a job's body (e.g. a model call slot): the
    wait is queue time, left out of the job's `duration_s` and its heartbeat."""
    clock: JobClock | None = getattr(_job_state, "clock", None)
    if clock is None or clock.waiting_since is not None:
        yield
        return
    clock.waiting_since = time.monotonic()
    try:
        yield
    finally:
        clock.queued += time.monotonic() - clock.waiting_since
        clock.waiting_since = None
