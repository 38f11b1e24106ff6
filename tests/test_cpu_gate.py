"""The CPU gate: few threads work at once, any number wait at once."""

from __future__ import annotations

import threading
import time

import pytest

from metaeval.engine.cpu_gate import CpuGate, waiting


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


def test_a_gate_travels_to_another_process_as_a_fresh_gate_of_the_same_size():
    import pickle

    gate = CpuGate(3)
    with gate.held():  # a slot in use here is not in use over there
        copy = pickle.loads(pickle.dumps(gate))
    assert copy.slots == 3 and copy is not gate
    together = threading.Barrier(3, timeout=10)  # all three slots free in the copy
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            with copy.held():
                together.wait()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors
