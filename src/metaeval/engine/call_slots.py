"""Run-wide slots for model calls, so cells can prepare their next request ahead.

With a fixed provider latency, the C calls of a run finish close together; if each freed job
must then load its next task and render its prompt before it can call again, those
milliseconds of Python work queue behind each other on one interpreter and the run drifts
further from the latency limit with every wave. Splitting "jobs in flight" from "calls in
service" removes that: the executor may start up to C more cells than there are slots; they
prepare their request while the others' calls are out and wait in `call_slot()` with it
ready, and a slot freed by a returning call is taken at once by a prepared cell.

A job binds the run's `CallSlots` to its thread (`CallSlots.bound`); `call_slot()` around a
model call then holds one slot for the call, and is a no-op on threads with no binding.
Waiting for a slot gives the thread's CPU-gate slot back (see `metaeval.engine.cpu_gate`).
Slots only bound calls within one process. The wait for a slot is queue time: it is left out
of the job's `duration_s` (`metaeval.engine.job_clock.queued`).

`when_all_busy(callback)` runs a callback once, on a daemon thread, the first time every slot
is in service: from then until a call returns, the run's own work is only preparing cells
ahead, so work the end of the run will need (the report renderer) can be done there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from metaeval.engine.cpu_gate import waiting
from metaeval.engine.job_clock import queued

_state = threading.local()


class CallSlots:
    """At most `slots` model calls in service at once among the threads bound to it."""

    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError("call slots must be at least 1")
        self.slots = slots
        self._semaphore = threading.Semaphore(slots)
        self._lock = threading.Lock()
        self._in_service = 0
        self.peak_in_service = 0  # the most calls ever held at once (tests, reports)
        self._when_all_busy: Callable[[], None] | None = None

    def when_all_busy(self, callback: Callable[[], None]) -> None:
        """Run `callback` once, on a daemon thread, the first time every slot is in service
        (never if that does not happen). Not carried to a copy in another process."""
        with self._lock:
            self._when_all_busy = callback

    def __getstate__(self) -> dict[str, int]:
        # a job sent to another process gets slots of its own of the same size
        return {"slots": self.slots}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(state["slots"])  # type: ignore[misc]

    @contextmanager
    def bound(self) -> Iterator[None]:
        """Within the body, `call_slot()` on this thread takes a slot of these."""
        previous = getattr(_state, "slots", None)
        _state.slots = self
        try:
            yield
        finally:
            _state.slots = previous

    @contextmanager
    def _held(self) -> Iterator[None]:
        with queued():
            self._semaphore.acquire()
        callback = None
        with self._lock:
            self._in_service += 1
            self.peak_in_service = max(self.peak_in_service, self._in_service)
            if self._in_service == self.slots and self._when_all_busy is not None:
                callback, self._when_all_busy = self._when_all_busy, None
        if callback is not None:
            threading.Thread(target=callback, name="when-all-busy", daemon=True).start()
        try:
            yield
        finally:
            with self._lock:
                self._in_service -= 1
            self._semaphore.release()


@contextmanager
def call_slot() -> Iterator[None]:
    """Hold one of the thread's bound call slots around a model call (no-op when unbound).

    The thread's CPU-gate slot is free from the wait for a call slot to the end of the call."""
    slots: CallSlots | None = getattr(_state, "slots", None)
    if slots is None or getattr(_state, "holding", False):  # unbound, or nested in a call
        yield
        return
    with waiting(), slots._held():
        _state.holding = True
        try:
            yield
        finally:
            _state.holding = False
