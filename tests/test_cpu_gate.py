"""The CPU gate: few threads work at once, any number wait at once."""

from __future__ import annotations

import threading
import time

import pytest

from metaeval.cpu_gate import CpuGate, waiting


def test_at_most_slots_threads_work_and_every_thread_can_wait_at_once():
    gate = CpuGate(2)
    lock = threading.Lock()
    working = {"now": 0, "peak": 0}
    # all 8 threads must be inside waiting() together: impossible unless waiting frees slots
    all_waiting = threading.Barrier(8, timeout=10)
    errors: list[BaseException] = []

    def work() -> None:
        with lock:
            working["now"] += 1
            working["peak"] = max(working["peak"], working["now"])
        time.sleep(0.02)
        with lock:
            working["now"] -= 1

    def job() -> None:
        try:
            with gate.held():
                work()
                with waiting():
                    all_waiting.wait()
                work()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=job) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
    assert working["peak"] == 2


def test_waiting_outside_a_gate_and_nested_holds_are_harmless():
    gate = CpuGate(1)
    with waiting():  # no slot held: nothing to give back
        pass
    # nested holds take one slot (no deadlock on a 1-slot gate)
    entered = threading.Event()

    def take() -> None:
        with gate.held():
            entered.set()

    with gate.held(), gate.held(), waiting():
        # the slot is free while waiting: another thread can take it
        other = threading.Thread(target=take)
        other.start()
        assert entered.wait(timeout=5)
        other.join(timeout=5)
    with pytest.raises(ValueError):
        CpuGate(0)


def _until(condition) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_thread_starting_work_goes_before_one_returning_from_a_wait():
    gate = CpuGate(1)
    order: list[str] = []
    returner_waiting = threading.Event()
    release_returner = threading.Event()

    def returner() -> None:
        with gate.held():
            with waiting():
                returner_waiting.set()
                release_returner.wait(timeout=10)
            order.append("returned")

    def starter() -> None:
        with gate.held():
            order.append("started")

    ret = threading.Thread(target=returner)
    ret.start()
    assert returner_waiting.wait(timeout=5)  # it holds no slot while it waits
    start = threading.Thread(target=starter)
    with gate.held():  # take the only slot, then let both queue for it
        release_returner.set()
        _until(lambda: gate._waiting_to_return == 1)
        start.start()
        _until(lambda: gate._waiting_to_start == 1)
    ret.join(timeout=5)
    start.join(timeout=5)
    assert order == ["started", "returned"]
