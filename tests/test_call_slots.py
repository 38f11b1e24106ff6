"""Call slots: at most N model calls in service, while more cells prepare their request ahead.

End to end, an audit at --concurrency 2 against a real HTTP server on 127.0.0.1 that holds
every request until released: two calls are in service, two more cells have rendered their
prompt and wait for a slot, and no third request reaches the server.
"""

from __future__ import annotations

import json
import pickle
import sys
import threading
import time
from pathlib import Path

import pytest

from metaeval.engine.call_slots import CallSlots, call_slot
from metaeval.engine.cpu_gate import CpuGate
from metaeval.models.registry import get_model
from metaeval.protocols.audit import llm_protocol
from metaeval.protocols.audit.cells import static as static_module
from metaeval.protocols.audit.run import AuditRun
from metaeval.protocols.audit.settings import AuditSettings

sys.path.insert(0, str(Path(__file__).parent))
from openai_stub import OpenAIStub  # noqa: E402

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
TASKS = ["word-count", "row-count", "order-total", "median-price", "grade-mean", "latency-mean"]


def wait_for(condition, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_at_most_n_bound_threads_hold_a_slot_and_the_others_wait():
    slots = CallSlots(2)
    release = threading.Event()
    order: list[int] = []
    lock = threading.Lock()

    def job(index: int) -> None:
        with slots.bound(), call_slot():
            with lock:
                order.append(index)
            release.wait(30)

    threads = []
    for index in range(5):
        thread = threading.Thread(target=job, args=(index,))
        thread.start()
        threads.append(thread)
        time.sleep(0.05)  # queue up in a known order
    assert wait_for(lambda: len(order) == 2)
    time.sleep(0.2)
    assert order == [0, 1]  # the other three wait for a slot
    release.set()
    for thread in threads:
        thread.join(30)
    assert sorted(order) == [0, 1, 2, 3, 4]
    assert slots.peak_in_service == 2


def test_unbound_threads_and_nested_slots_are_not_limited():
    slots = CallSlots(1)
    inside = threading.Barrier(3, timeout=10)

    def unbound() -> None:
        with call_slot():
            inside.wait()  # three at once: impossible if unbound threads took slots

    threads = [threading.Thread(target=unbound) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    with slots.bound(), call_slot(), call_slot():  # nested: the outer slot covers it
        pass
    assert slots.peak_in_service == 1


def test_waiting_for_a_slot_gives_the_cpu_gate_back():
    gate = CpuGate(1)
    slots = CallSlots(1)
    holder_in_call = threading.Event()
    release = threading.Event()
    waiter_queued = threading.Event()

    def holder() -> None:
        with slots.bound(), gate.held(), call_slot():
            holder_in_call.set()
            release.wait(30)

    def waiter() -> None:
        with slots.bound(), gate.held():
            waiter_queued.set()
            with call_slot():
                pass

    threads = [threading.Thread(target=holder)]
    threads[0].start()
    assert holder_in_call.wait(10)
    threads.append(threading.Thread(target=waiter))
    threads[1].start()
    assert waiter_queued.wait(10)
    # the waiter sits in call_slot(); a third thread can still take the gate's only slot
    got_gate = threading.Event()

    def third() -> None:
        with gate.held():
            got_gate.set()

    threads.append(threading.Thread(target=third))
    threads[2].start()
    assert got_gate.wait(10)
    release.set()
    for thread in threads:
        thread.join(30)


def test_slots_travel_to_another_process_as_fresh_slots_of_the_same_size():
    slots = CallSlots(3)
    with slots.bound(), call_slot():
        copy = pickle.loads(pickle.dumps(slots))
    assert copy.slots == 3 and copy.peak_in_service == 0 and copy is not slots


def test_the_all_busy_callback_runs_once_on_another_thread_when_every_slot_is_taken():
    slots = CallSlots(2)
    calls: list[str] = []
    ran = threading.Event()

    def callback() -> None:
        calls.append(threading.current_thread().name)
        ran.set()

    slots.when_all_busy(callback)
    with slots.bound(), call_slot():
        time.sleep(0.2)
        assert calls == []  # one of two slots taken: not yet
    release = threading.Event()

    def holder() -> None:
        with slots.bound(), call_slot():
            release.wait(30)

    threads = [threading.Thread(target=holder) for _ in range(2)]
    for thread in threads:
        thread.start()
    assert ran.wait(10)
    release.set()
    for thread in threads:
        thread.join(30)
    with slots.bound(), call_slot():  # busy again later: once only
        pass
    threads = [threading.Thread(target=holder) for _ in range(2)]
    release.set()
    for thread in threads:
        thread.start()
        thread.join(30)
    time.sleep(0.2)
    assert calls == ["when-all-busy"]
    # a copy sent to another process carries no callback; the original keeps its own
    fresh, fired = CallSlots(1), threading.Event()
    fresh.when_all_busy(fired.set)
    copy = pickle.loads(pickle.dumps(fresh))
    with copy.bound(), call_slot():
        pass
    time.sleep(0.2)
    assert not fired.is_set()
    with fresh.bound(), call_slot():
        pass
    assert fired.wait(5)


class HeldServer:
    """Counts requests in service; holds every request until `release` is set."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.hold_s = hold_s  # also held this long after the release
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.in_service = 0
        self.peak = 0
        self.stub = OpenAIStub(self.reply)

    def reply(self, messages: list[dict]) -> str:
        with self.lock:
            self.in_service += 1
            self.peak = max(self.peak, self.in_service)
        try:
            self.release.wait(60)
            time.sleep(self.hold_s)
            return "[]"
        finally:
            with self.lock:
                self.in_service -= 1


def held_audit(
    tmp_path: Path, base_url: str, tasks: list[str], concurrency: int
) -> tuple[AuditSettings, dict]:
    """Settings and models of an audit of `tasks` with one OpenAI-compatible model."""
    model = get_model("openai/held", base_url=base_url, api_key="sk-test")
    settings = AuditSettings(
        bench_dir=BENCH,
        run_dir=tmp_path / "audit",
        models=["openai/held"],
        task_filter=tasks,
        execution_checks=False,
        concurrency=concurrency,
        progress=False,
    )
    return settings, {"openai/held": model}


def test_an_audit_prepares_cells_ahead_but_keeps_calls_at_the_concurrency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared: list[str] = []
    fit = llm_protocol.fit_prompt_for_model

    def counting_fit(task, *args, **kwargs):
        prepared.append(task.task_id)
        return fit(task, *args, **kwargs)

    monkeypatch.setattr(llm_protocol, "fit_prompt_for_model", counting_fit)
    server = HeldServer()
    with server.stub:
        settings, models = held_audit(tmp_path, server.stub.base_url, TASKS, concurrency=2)
        result: dict = {}
        runner = threading.Thread(target=lambda: result.update(AuditRun(settings, models).run()))
        runner.start()
        try:
            # two calls out, and two more cells have their prompt ready while they wait
            assert wait_for(lambda: server.in_service == 2 and len(prepared) == 4), (
                server.in_service,
                prepared,
            )
            time.sleep(0.3)
            assert server.in_service == 2 and len(prepared) == 4
        finally:
            server.release.set()
            runner.join(120)
    assert server.peak == 2
    assert sorted(prepared) == sorted(TASKS)
    cells = [json.loads(line) for line in (tmp_path / "audit" / "audits.jsonl").open()]
    model_cells = [c for c in cells if c["source"] == "openai/held"]
    assert len(model_cells) == len(TASKS) and all(c["status"] == "ok" for c in model_cells)
    assert result["ran"] == 2 * len(TASKS)


def test_at_concurrency_1_an_in_process_static_cell_never_overlaps_a_model_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one job in service, the static cells (run in this process: no worker pool at
    concurrency 1) and the model calls take turns, although a second cell is prepared ahead."""
    server = HeldServer(hold_s=0.5)
    server.release.set()
    overlaps: list[str] = []
    original = static_module.static_cell

    def watched(task, base, **kwargs):
        # a model call that started meanwhile would be in service within this second
        if wait_for(lambda: server.in_service > 0, timeout=1.0):
            overlaps.append(task.task_id)
        return original(task, base, **kwargs)

    monkeypatch.setattr(static_module, "static_cell", watched)
    with server.stub:
        settings, models = held_audit(tmp_path, server.stub.base_url, TASKS[:3], concurrency=1)
        summary = AuditRun(settings, models).run()
    assert summary["ran"] == 6 and summary["cells"] == 6
    assert server.peak == 1
    assert overlaps == []


def test_cells_prepared_ahead_follow_the_concurrency_up_to_a_cap() -> None:
    from metaeval.engine.pacing import MAX_PREPARED_AHEAD, CallPacing

    assert CallPacing(8).prepared_ahead(has_call_cells=True) == 8
    assert CallPacing(1000).prepared_ahead(has_call_cells=True) == MAX_PREPARED_AHEAD == 256
    assert CallPacing(8).prepared_ahead(has_call_cells=False) == 0  # static cells only


def test_the_report_renderer_is_made_ready_while_every_call_is_out(tmp_path: Path) -> None:
    """The template compiles during the wait for the calls, not after the last one."""
    from metaeval.protocols.audit import report

    report.html_template.cache_clear()
    server = HeldServer()
    with server.stub:
        settings, models = held_audit(tmp_path, server.stub.base_url, TASKS[:3], concurrency=2)
        runner = threading.Thread(target=AuditRun(settings, models).run)
        runner.start()
        try:
            assert wait_for(lambda: server.in_service == 2)
            assert wait_for(lambda: report.html_template.cache_info().currsize == 1, 30)
            assert server.in_service == 2  # still held: compiled before any call returned
        finally:
            server.release.set()
            runner.join(120)
    assert (tmp_path / "audit" / "report.html").read_text().count("<html") == 1
