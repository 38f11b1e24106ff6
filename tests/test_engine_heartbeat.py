"""With output piped (CI, `tee`), a cell still running says so every heartbeat interval, and a
cell's time leaves out its wait in the queue.

End to end: `metaeval audit run` as a user runs it, its stdout and stderr a pipe, against an
OpenAI-compatible server on 127.0.0.1 that holds every request for HOLD_S seconds. At
--concurrency 1 the second model cell is prepared ahead and waits for the first call to
return: its wait is queue time, so both model cells report about HOLD_S, not 2 * HOLD_S.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from rich.console import Console

from metaeval.engine.executor import Job, LocalExecutor
from metaeval.engine.job_clock import queued

sys.path.insert(0, str(Path(__file__).parent))
from openai_stub import OpenAIStub  # noqa: E402

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"
HOLD_S = 2.5
BEAT_S = 0.5


def held_reply(messages: list[dict]) -> str:
    time.sleep(HOLD_S)
    return "[]"


def test_a_running_cell_prints_heartbeats_into_a_pipe_and_its_time_excludes_queue_wait(
    tmp_path: Path,
) -> None:
    with OpenAIStub(held_reply) as stub:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        env.update(
            OPENAI_BASE_URL=stub.base_url,
            OPENAI_API_KEY="sk-test",
            METAEVAL_HEARTBEAT_S=str(BEAT_S),
            NO_COLOR="1",
        )
        argv = [sys.executable, "-m", "metaeval.cli", "audit", "run", str(BENCH)]
        argv += ["-m", "openai/held", "--task", "word-count", "--task", "row-count"]
        argv += ["--no-execution", "--concurrency", "1", "-o", str(tmp_path / "run")]
        started = time.monotonic()
        done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=300)  # fmt: skip
        wall = time.monotonic() - started
    out = done.stdout
    assert done.returncode in (0, 1), out[-3000:]
    assert wall >= 2 * HOLD_S  # the two calls went one after the other
    beats = re.findall(r"audit cells: (\S+) openai/held still running, ([\d.]+)s", out)
    by_task: dict[str, list[float]] = {}
    for task, seconds in beats:
        by_task.setdefault(task, []).append(float(seconds))
    # each held call lasts HOLD_S = 5 intervals: at least 3 beats each, elapsed growing
    assert sorted(by_task) == ["row-count", "word-count"], out[-3000:]
    for seconds in by_task.values():
        assert len(seconds) >= 3 and seconds == sorted(seconds) and seconds[-1] >= 2
    times = dict(re.findall(r"audit cells \d+/\d+: (\S+) openai/held done in ([\d.]+)s", out))
    assert sorted(times) == ["row-count", "word-count"], out[-3000:]
    for seconds in times.values():  # one call each; the queue wait for the slot left out
        assert HOLD_S - 0.1 <= float(seconds) < 2 * HOLD_S - 0.5, times


def test_a_wait_in_a_queue_inside_a_job_is_neither_timed_nor_reported_as_running(
    tmp_path: Path,
) -> None:
    """Job `holder` keeps a shared slot for 1.5 s; job `waiter` queues for it (`queued()`),
    then works 0.2 s: its time is about 0.2 s and it never shows as still running."""
    slot = threading.Semaphore(1)
    holding = threading.Event()

    def holder() -> None:
        with slot:
            holding.set()
            time.sleep(1.5)

    def waiter() -> None:
        holding.wait(10)
        with queued():
            slot.acquire()
        try:
            time.sleep(0.2)
        finally:
            slot.release()

    with (tmp_path / "out.txt").open("w") as sink:
        console = Console(file=sink, force_terminal=False)
        executor = LocalExecutor(2, console=console, description="cells", heartbeat_s=0.3)
        jobs = [Job(key="holder", fn=holder), Job(key="waiter", fn=waiter)]
        outcomes = {o.job.key: o for o in executor.run(jobs, lambda outcome: None)}
    assert 1.45 <= outcomes["holder"].duration_s < 2.0
    assert 0.15 <= outcomes["waiter"].duration_s < 0.6
    text = (tmp_path / "out.txt").read_text()
    beats = [float(x) for x in re.findall(r"cells: holder still running, ([\d.]+)s", text)]
    assert len(beats) >= 3 and beats == sorted(beats) and beats[0] >= 0.3, text
    assert "waiter still running" not in text


def test_executor_durations_leave_out_the_wait_for_a_free_slot(tmp_path: Path) -> None:
    with (tmp_path / "out.txt").open("w") as sink:
        console = Console(file=sink, force_terminal=False)
        executor = LocalExecutor(concurrency=1, console=console, description="steps")
        jobs = [Job(key=f"j{i}", fn=lambda: time.sleep(0.6)) for i in range(3)]
        outcomes = executor.run(jobs, lambda outcome: None)
    assert all(0.55 <= o.duration_s < 1.0 for o in outcomes), [o.duration_s for o in outcomes]
    lines = (tmp_path / "out.txt").read_text().splitlines()
    assert [line.split(":")[0] for line in lines] == ["steps 1/3", "steps 2/3", "steps 3/3"]


def test_a_long_step_of_a_step_loop_prints_heartbeats_into_a_pipe(tmp_path: Path) -> None:
    from metaeval.engine.progress import StepProgress

    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w") as pipe:
        console = Console(file=pipe, force_terminal=False)
        with StepProgress("trials", 2, console=console, heartbeat_s=0.3) as progress:
            time.sleep(1.1)  # step 1: long enough for three beats
            progress.advance("trial 001 promoted")
            time.sleep(0.1)  # step 2: shorter than one interval, no beat
            progress.advance("trial 002 rejected")
        time.sleep(0.5)  # the loop is over: no more beats
    with os.fdopen(read_end) as reader:
        lines = reader.read().splitlines()
    beats = [line for line in lines if "still running" in line]
    assert len(beats) >= 3 and all(b.startswith("trials 1/2: still running, ") for b in beats)
    assert lines[len(beats) :] == [
        "trials 1/2: trial 001 promoted",
        "trials 2/2: trial 002 rejected",
    ]
