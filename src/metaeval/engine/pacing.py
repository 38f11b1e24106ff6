"""Pacing for a run whose cells mostly wait on model calls: prepare ahead, bound the calls.

`CallPacing(concurrency)` joins the engine's two bounds: at most `concurrency` model calls in
service (`CallSlots`), and at most one thread per core doing Python work (`CpuGate`). The
executor may then run up to `prepared_ahead()` more cells than `concurrency`: they load their
task and render their request while the others' calls are out, and take a slot the moment a
call returns (`metaeval.engine.call_slots`). Process-lane helpers decide when plain CPU cells
go to worker processes (`process_lane_workers`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from metaeval.engine.call_slots import CallSlots, call_slot
from metaeval.engine.cpu_gate import CpuGate
from metaeval.engine.executor import available_cores, selected_backend

# At most this many cells wait with a prepared request (each is a thread): a full wave at
# C <= 256, while a very high --concurrency does not double the thread count.
MAX_PREPARED_AHEAD = 256


class CallPacing:
    """Call slots and the CPU gate of one run (see the module doc)."""

    def __init__(self, concurrency: int):
        self.concurrency = concurrency
        self.slots = CallSlots(concurrency)
        self.gate = CpuGate(available_cores())

    def prepared_ahead(self, has_call_cells: bool) -> int:
        """Cells the executor may run beyond `concurrency`: with the local executor, as many
        call cells as there are call slots (capped); none on Ray or without call cells."""
        if not has_call_cells or selected_backend() != "local":
            return 0
        return min(self.concurrency, MAX_PREPARED_AHEAD)

    def when_all_busy(self, callback: Callable[[], None]) -> None:
        """Run `callback` once, on another thread, the first time every call slot is in
        service (the run then only prepares cells: a moment for ahead-of-time work)."""
        self.slots.when_all_busy(callback)

    @contextmanager
    def call_cell(self) -> Iterator[None]:
        """Around a cell that makes model calls: its Python work holds a CPU-gate slot, given
        back while it waits for a call slot or a call is out (`call_slot()`)."""
        with self.slots.bound(), self.gate.held():
            yield

    @contextmanager
    def in_service(self) -> Iterator[None]:
        """Around a cell in this process that is in service from start to end (CPU work):
        it takes a call slot, so cells prepared ahead never raise the work in service above
        `concurrency`."""
        with self.slots.bound(), call_slot():
            yield


def process_lane_workers(concurrency: int, cells: int) -> int:
    """Worker processes for a run's plain CPU cells: one per core, at most `concurrency` and
    `cells`; 0 (run them in this process) below two, or when Ray places the jobs itself."""
    workers = min(available_cores(), concurrency, cells)
    if workers < 2 or selected_backend() != "local":
        return 0
    return workers
