"""The local executor: concurrency, isolation of failures, timeouts, one outcome per job."""

import threading
import time

import pytest

from metaeval.engine.executor import Job, LocalExecutor


def test_runs_all_jobs_and_respects_concurrency():
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}

    def work(i: int):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return i * i

    seen = []
    jobs = [Job(key=str(i), fn=lambda i=i: work(i)) for i in range(9)]
    outcomes = LocalExecutor(concurrency=3, progress=False).run(jobs, seen.append)
    assert sorted(o.value for o in outcomes) == [i * i for i in range(9)]
    assert len(seen) == 9 and all(o.status == "done" for o in seen)
    assert state["peak"] == 3


def test_a_failing_job_does_not_stop_the_others():
    def boom():
        raise RuntimeError("provider exploded")

    jobs = [Job("a", lambda: 1), Job("b", boom), Job("c", lambda: 3)]
    outcomes = {o.job.key: o for o in LocalExecutor(2, progress=False).run(jobs, lambda o: None)}
    assert outcomes["a"].value == 1 and outcomes["c"].value == 3
    assert outcomes["b"].status == "failed"
    assert "provider exploded" in outcomes["b"].error


def test_timeout_reports_once_and_discards_the_late_result():
    handled = []
    release = threading.Event()

    def slow():
        release.wait(60)
        return "late"

    jobs = [Job("slow", slow, timeout_s=0.2), Job("fast", lambda: "ok")]
    started = time.monotonic()
    outcomes = LocalExecutor(2, progress=False).run(jobs, handled.append)
    assert time.monotonic() - started < 30  # the slow job was not waited for
    release.set()
    time.sleep(0.1)
    by_key = {o.job.key: o for o in outcomes}
    assert by_key["slow"].status == "timeout" and by_key["slow"].value is None
    assert [o.job.key for o in handled].count("slow") == 1


def test_invalid_concurrency_is_rejected():
    with pytest.raises(ValueError):
        LocalExecutor(concurrency=0)


def test_progress_prints_a_line_per_job_when_not_a_terminal_and_eta_on_a_terminal():
    import io

    from rich.console import Console

    from metaeval.engine.progress import StepProgress

    piped = io.StringIO()
    jobs = [Job(key=f"k{i}", fn=lambda i=i: i, label=f"cell {i}") for i in range(3)]
    LocalExecutor(1, None, "cells", console=Console(file=piped, width=200)).run(
        jobs, lambda o: None
    )
    lines = piped.getvalue().splitlines()
    assert [line.split(" done in ")[0] for line in lines] == [
        "cells 1/3: cell 0",
        "cells 2/3: cell 1",
        "cells 3/3: cell 2",
    ]
    # a label with control characters (a task directory named with an escape sequence)
    # must not reach the log as a live terminal control sequence
    hostile = io.StringIO()
    evil = [Job(key="e", fn=lambda: 0, label="task\x1b]0;pwned\x07\x1b[2J name")]
    LocalExecutor(1, None, "cells", console=Console(file=hostile, width=200)).run(
        evil, lambda o: None
    )
    assert "\x1b" not in hostile.getvalue() and "\x07" not in hostile.getvalue()
    assert hostile.getvalue().startswith("cells 1/1: task\\x1b]0;pwned\\x07\\x1b[2J name done in")
    quiet = io.StringIO()
    LocalExecutor(1, False, "cells", console=Console(file=quiet)).run(jobs, lambda o: None)
    assert quiet.getvalue() == ""
    terminal = io.StringIO()
    console = Console(file=terminal, force_terminal=True, width=120)
    LocalExecutor(1, None, "cells", console=console).run(jobs, lambda o: None)
    assert "eta" in terminal.getvalue() and "3/3" in terminal.getvalue()

    steps = io.StringIO()
    with StepProgress("trials", 2, console=Console(file=steps, width=200)) as progress:
        progress.advance("trial 001 promoted")
        progress.advance("trial 002 rejected")
        progress.advance("trial 003 \x1b[31mred")
    assert steps.getvalue().splitlines() == [
        "trials 1/2: trial 001 promoted",
        "trials 2/2: trial 002 rejected",
        "trials 3/2: trial 003 \\x1b[31mred",
    ]
    bar = io.StringIO()
    with StepProgress("trials", 1, console=Console(file=bar, force_terminal=True)) as progress:
        progress.advance("trial 001 promoted")
    assert "eta" in bar.getvalue() and "trial 001 promoted" in bar.getvalue()


def test_run_returns_only_when_every_record_future_is_done():
    import concurrent.futures

    pending: list[concurrent.futures.Future] = []

    def on_outcome(outcome):
        future: concurrent.futures.Future = concurrent.futures.Future()
        pending.append(future)
        threading.Timer(0.3, future.set_result, args=(None,)).start()
        return future

    jobs = [Job(str(i), lambda i=i: i) for i in range(5)]
    LocalExecutor(5, progress=False).run(jobs, on_outcome)
    assert len(pending) == 5 and all(f.done() for f in pending)


def test_a_record_that_cannot_be_written_is_raised_from_run():
    import concurrent.futures

    def on_outcome(outcome):
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_exception(OSError("disk full"))
        return future

    with pytest.raises(OSError, match="disk full"):
        LocalExecutor(2, progress=False).run([Job("a", lambda: 1)], on_outcome)


def test_lane_jobs_hold_no_concurrency_slot_and_respect_their_own_bound():
    # concurrency 1 is taken by a slow job; lane jobs must still run meanwhile, at most two
    # at a time.
    slow_started = threading.Event()
    release = threading.Event()
    lock = threading.Lock()
    in_lane = {"now": 0, "peak": 0, "done_while_slow": 0}

    def slow():
        slow_started.set()
        assert release.wait(10)
        return "slow"

    def lane_job():
        assert slow_started.wait(10)
        with lock:
            in_lane["now"] += 1
            in_lane["peak"] = max(in_lane["peak"], in_lane["now"])
        time.sleep(0.05)
        with lock:
            in_lane["now"] -= 1
            if not release.is_set():
                in_lane["done_while_slow"] += 1
        return "lane"

    jobs = [Job(key="slow", fn=slow)] + [
        Job(key=f"lane-{i}", fn=lane_job, lane="cpu") for i in range(6)
    ]
    finished: list[str] = []

    def on_outcome(outcome):
        finished.append(outcome.job.key)
        if len([k for k in finished if k.startswith("lane")]) == 6:
            release.set()

    outcomes = LocalExecutor(concurrency=1, progress=False, lanes={"cpu": 2}).run(jobs, on_outcome)
    assert sorted(o.value for o in outcomes) == ["lane"] * 6 + ["slow"]
    assert in_lane["done_while_slow"] == 6  # all ran while the only slot was taken
    assert in_lane["peak"] == 2
    assert finished[-1] == "slow"


def test_a_lane_bound_below_one_is_rejected():
    with pytest.raises(ValueError):
        LocalExecutor(concurrency=2, lanes={"cpu": 0})


def test_a_job_whose_record_says_it_timed_out_is_not_printed_done():
    import io

    from rich.console import Console

    piped = io.StringIO()
    records = [{"status": "ok"}, {"status": "timeout"}, {"status": "error"}]
    jobs = [Job(key=f"k{i}", fn=lambda r=r: r, label=f"cell {i}") for i, r in enumerate(records)]
    LocalExecutor(1, None, "cells", console=Console(file=piped, width=200)).run(
        jobs, lambda o: None
    )
    ended = [line.split(": ", 1)[1].rsplit(" in ", 1)[0] for line in piped.getvalue().splitlines()]
    assert ended == ["cell 0 done", "cell 1 timeout", "cell 2 error"]
