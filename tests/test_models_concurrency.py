"""Provider slots follow the executor's concurrency, a user limit caps them, and rate limits
from a real server (a process on 127.0.0.1 answering 429) shrink them and let them grow back."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from metaeval.engine.executor import Job, LocalExecutor
from metaeval.models.limits import AdaptiveLimiter
from metaeval.models.registry import get_model
from metaeval.models.types import Message, ModelRequest

sys.path.insert(0, str(Path(__file__).parent))
from latency_server import LatencyServer  # noqa: E402


def ask() -> ModelRequest:
    return ModelRequest(model="openai/latency", messages=[Message(role="user", content="hi")])


# --- the limiter alone --------------------------------------------------------------------------


def test_rate_limit_halves_once_per_window_and_successes_grow_it_back() -> None:
    limiter = AdaptiveLimiter(ceiling=16)
    tickets = [limiter.acquire() for _ in range(16)]
    assert limiter.limit == 16 and limiter.in_flight == 16
    # Every call of the window is rate limited; only the first answer halves the limit.
    for ticket in tickets:
        limiter.release(ticket, "rate_limit")
    assert limiter.limit == 8 and limiter.decreases == 1
    # A rate limit on a call started after the decrease halves it again.
    limiter.release(limiter.acquire(), "rate_limit")
    assert limiter.limit == 4 and limiter.decreases == 2
    # Additive increase: about one slot per window of successful calls, up to the ceiling.
    limits = []
    while limiter.limit != 16:
        limiter.release(limiter.acquire(), "ok")
        limits.append(limiter.limit)
        assert len(limits) < 500
    assert limits[0] == 4 and sorted(limits) == limits  # never jumps, never shrinks
    assert 40 <= len(limits) <= 140  # about 4 + 5 + ... + 15 successes
    assert limiter.limit == 16


def test_without_a_ceiling_it_recovers_to_the_demand_seen_before_the_rate_limit() -> None:
    limiter = AdaptiveLimiter(ceiling=None)
    tickets = [limiter.acquire() for _ in range(10)]
    assert limiter.limit is None
    limiter.release(tickets[0], "rate_limit")
    assert limiter.limit == 5
    for ticket in tickets[1:]:
        limiter.release(ticket, "ok")
    while limiter.limit is not None:
        limiter.release(limiter.acquire(), "ok")
    assert limiter.limit is None  # back to unlimited (the executor bounds the calls again)


def test_acquire_blocks_at_the_limit() -> None:
    limiter = AdaptiveLimiter(ceiling=2)
    first, second = limiter.acquire(), limiter.acquire()
    got = threading.Event()
    threading.Thread(target=lambda: (limiter.acquire(), got.set()), daemon=True).start()
    assert not got.wait(0.2)
    limiter.release(first, "ok")
    assert got.wait(5)
    limiter.release(second, "ok")


# --- against a real server ----------------------------------------------------------------------


def test_provider_slots_follow_the_executor_concurrency() -> None:
    """Without a provider limit, 24 jobs in flight means 24 requests in flight (not 8)."""
    with LatencyServer(latency=0.5) as server:
        model = get_model("openai/latency-follow", base_url=server.url)
        jobs = [Job(str(i), lambda: model.complete(ask()).text) for i in range(48)]
        outcomes = LocalExecutor(24, progress=False).run(jobs, lambda o: None)
        assert all(o.status == "done" for o in outcomes)
        assert server.stats()["peak_in_service"] == 24


def test_max_connections_caps_requests_in_flight() -> None:
    with LatencyServer(latency=0.3) as server:
        model = get_model("openai/latency-cap", base_url=server.url, max_connections=3)
        jobs = [Job(str(i), lambda: model.complete(ask()).text) for i in range(12)]
        outcomes = LocalExecutor(12, progress=False).run(jobs, lambda o: None)
        assert all(o.status == "done" for o in outcomes)
        assert server.stats()["peak_in_service"] == 3


def test_rate_limits_lower_the_in_flight_count_and_it_recovers() -> None:
    """32 jobs in flight; the server then takes only 4 at a time (429 beyond); the client's
    requests in flight drop to a few, and climb back to 32 once the server takes more."""
    concurrency = 32
    with LatencyServer(0.2, "--retry-after-ms", "100") as server:
        model = get_model(
            "openai/latency-aimd",
            base_url=server.url,
            retry={"max_attempts": 20, "base_delay_s": 0.05, "max_delay_s": 0.5},
        )
        limiter = model.limiter
        stop = threading.Event()
        samples: list[tuple[float, int, int | None]] = []

        def call() -> str:
            if stop.is_set():
                return "skipped"
            return model.complete(ask()).text

        def sample() -> None:
            while not stop.is_set():
                samples.append((time.monotonic(), limiter.in_flight, limiter.limit))
                time.sleep(0.01)

        def drive() -> None:
            # Unthrottled until all 32 are in flight (start-up is slow on a busy machine).
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and server.stats()["peak_in_service"] < concurrency:
                time.sleep(0.1)
            marks["full"] = time.monotonic()
            time.sleep(1.0)
            marks["throttle"] = time.monotonic()
            server.set_capacity(4)
            time.sleep(4.0)
            marks["release"] = time.monotonic()
            server.set_capacity(None)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                recent = [s for s in samples[-20:] if s[0] > marks["release"]]
                if len(recent) == 20 and all(s[1] >= concurrency - 2 for s in recent):
                    break
                time.sleep(0.05)
            marks["recovered"] = time.monotonic()
            stop.set()

        marks: dict[str, float] = {}
        threading.Thread(target=sample, daemon=True).start()
        driver = threading.Thread(target=drive, daemon=True)
        driver.start()
        jobs = [Job(str(i), call) for i in range(20000)]
        outcomes = LocalExecutor(concurrency, progress=False).run(jobs, lambda o: None)
        driver.join(5)
        events = server.stats()["events"]

    assert all(o.status == "done" for o in outcomes), [o.error for o in outcomes if o.error][:1]

    def window(start: float, end: float) -> list[tuple[float, int, int | None]]:
        return [s for s in samples if start <= s[0] < end]

    before = window(marks["full"] - 0.5, marks["throttle"])
    throttled = window(marks["throttle"] + 1.5, marks["release"])
    after = window(marks["release"], marks["recovered"] + 0.01)
    assert max(s[1] for s in before) >= concurrency - 2
    served_before = [e for e in events if _mono(e[0]) < marks["throttle"] and e[2] == 200]
    assert max(e[3] for e in served_before) == concurrency  # the server saw all 32 at once
    # While throttled, the limiter keeps the requests in flight near the server's capacity.
    assert limiter.decreases >= 2
    assert max(s[1] for s in throttled) <= 8, max(s[1] for s in throttled)
    assert sum(s[1] for s in throttled) / len(throttled) <= 6
    # After the server takes more again, the in-flight count climbs back to the concurrency.
    assert max(s[1] for s in after) >= concurrency - 2
    assert marks["recovered"] - marks["release"] < 55
    # The client did not storm the server: most requests while throttled were served.
    throttled_events = [
        e for e in events if marks["throttle"] + 1.5 <= _mono(e[0]) < marks["release"]
    ]
    rejected = sum(1 for e in throttled_events if e[2] == 429)
    assert rejected <= 0.5 * len(throttled_events), (rejected, len(throttled_events))


_OFFSET = time.time() - time.monotonic()


def _mono(epoch: float) -> float:
    return epoch - _OFFSET
