"""A gate that bounds how many threads do Python work at once.

A run with 128 model calls in flight has 128 job threads. Only the waits are worth running
concurrently: when the CPU parts (load a task, render a prompt, parse an answer, verify
evidence) of many threads interleave, every system call hands the GIL to another thread and
the work of all of them slows down (measured: 180,000 context switches and 2.4 s of system
time for 1,024 cells). A job holds a slot of the gate (`CpuGate.held`) while it works and
gives it back while it waits on the network (`waiting`), so at most `slots` threads compete
for the interpreter and the rest sleep in their sockets.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_state = threading.local()


class CpuGate:
    """At most `slots` threads between `held()` and the end of it, minus those `waiting()`."""

    def __init__(self, slots: int):
        if slots < 1:
            raise ValueError("a CPU gate needs at least one slot")
        self.slots = slots
        self._semaphore = threading.Semaphore(slots)

    def __getstate__(self) -> dict[str, int]:
        # a job sent to another process (a Ray worker) gets a fresh gate of the same size
        return {"slots": self.slots}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__init__(state["slots"])  # type: ignore[misc]

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold a slot for the body (a job's work); `waiting()` inside gives it back."""
        if getattr(_state, "gate", None) is not None:  # nested: the slot is already ours
            yield
            return
        self._semaphore.acquire()
        _state.gate = self
        try:
            yield
        finally:
            _state.gate = None
            self._semaphore.release()


@contextmanager
def waiting() -> Iterator[None]:
    """Around a blocking wait (a network call, a retry's sleep): the calling thread's slot,
    if it holds one, is free for another thread until the wait is over."""
    gate: CpuGate | None = getattr(_state, "gate", None)
    if gate is None:
        yield
        return
    _state.gate = None
    gate._semaphore.release()
    try:
        yield
    finally:
        gate._semaphore.acquire()
        _state.gate = gate
