"""Executor scaling: local and Ray backends side by side against a fixed-latency model server.

A small OpenAI-compatible server on 127.0.0.1 answers every POST /v1/chat/completions after
exactly L seconds (threaded, so calls overlap). Each job makes C sequential chat calls through
metaeval's `openai` provider, so its ideal duration is C*L. For W = 1, 2, 4 workers:

* local: `LocalExecutor(concurrency=W)` (threads in this process);
* ray: a fresh local Ray instance with W logical CPUs, `RayExecutor(concurrency=W)`, one CPU per
  job, so W Ray worker processes run the jobs.

N = jobs_per_worker * W jobs run; the ideal wall time is N*C*L/W, and the efficiency printed is
ideal / measured. The per-job overhead Ray adds is (T_ray - T_local) * W / N: the extra time a
worker slot spends per job (pickling, scheduling, result transfer).

Run inside a loopback-only network namespace when possible (re-executes itself under
`unshare -n`), so Ray binds to 127.0.0.1 only.

Usage: python bench/executor_scaling.py [--latency 0.5] [--calls 2] [--jobs-per-worker 6]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from metaeval.engine.executor import Job, LocalExecutor


class FixedLatencyServer:
    """Chat Completions on 127.0.0.1 answering after `latency_s` seconds."""

    def __init__(self, latency_s: float):
        latency = latency_s

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                time.sleep(latency)
                body = json.dumps(
                    {
                        "id": "chatcmpl-bench",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": request.get("model", "bench"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "ok"},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def chat_job(base_url: str, calls: int) -> int:
    """One job: `calls` sequential completions through metaeval's openai provider."""
    from metaeval.models.registry import get_model
    from metaeval.models.types import Message, ModelRequest

    model = get_model(
        "openai/bench", base_url=base_url, api_key="bench-not-secret", max_concurrency=64
    )
    request = ModelRequest(
        model=model.name, messages=[Message(role="user", content="say ok")], max_tokens=4
    )
    for _ in range(calls):
        model.complete(request)
    return calls


def run_backend(backend: str, workers: int, jobs: list[Job]) -> float:
    if backend == "local":
        executor = LocalExecutor(workers, progress=False)
        executor.run(jobs[:workers], lambda _o: None)  # imports and client set-up, as for Ray
    else:
        import ray

        from metaeval.engine.ray_backend import RayExecutor

        ray.shutdown()
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            object_store_memory=80 * 1024 * 1024,
        )
        executor = RayExecutor(workers, progress=False)
        executor.run(jobs[:workers], lambda _o: None)  # start the W worker processes first
    failed: list[str] = []
    started = time.perf_counter()
    executor.run(jobs, lambda o: failed.append(o.error or "") if o.status != "done" else None)
    elapsed = time.perf_counter() - started
    if failed:
        raise SystemExit(f"{backend}: {len(failed)} jobs failed, first: {failed[0][-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per model call (L)")
    parser.add_argument("--calls", type=int, default=2, help="model calls per job (C)")
    parser.add_argument("--jobs-per-worker", type=int, default=6)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--no-netns", action="store_true", help="do not re-exec under unshare -n")
    args = parser.parse_args()
    if (
        not args.no_netns
        and os.environ.get("METAEVAL_BENCH_NETNS") != "1"
        and shutil.which("unshare")
    ):
        inner = " ".join([sys.executable, *map(_quote, sys.argv)])
        done = subprocess.run(
            ["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {inner}"],
            env={**os.environ, "METAEVAL_BENCH_NETNS": "1", "RAY_AUTH_MODE": "disabled"},
        )
        if done.returncode == 0 or done.returncode not in (1,):
            raise SystemExit(done.returncode)
        print("unshare -n failed; running in the host network namespace", file=sys.stderr)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    server = FixedLatencyServer(args.latency)
    per_job = args.calls * args.latency
    rows = []
    try:
        for workers in [int(w) for w in args.workers.split(",")]:
            n = args.jobs_per_worker * workers
            jobs = [Job(key=f"job-{i}", fn=_partial(server.base_url, args.calls)) for i in range(n)]
            ideal = n * per_job / workers
            times = {b: run_backend(b, workers, jobs) for b in ("local", "ray")}
            rows.append((workers, n, ideal, times))
    finally:
        server.close()
        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()
    print(
        f"fixed latency L={args.latency:g} s, {args.calls} calls per job (ideal {per_job:g} s/job)"
    )
    print(
        f"{'workers':>7} {'jobs':>5} {'ideal s':>8} | {'local s':>8} {'jobs/s':>7} {'eff':>5} | "
        f"{'ray s':>8} {'jobs/s':>7} {'eff':>5} | {'ray overhead/job':>16}"
    )
    for workers, n, ideal, t in rows:
        overhead = (t["ray"] - t["local"]) * workers / n
        print(
            f"{workers:>7} {n:>5} {ideal:>8.2f} | {t['local']:>8.2f} {n / t['local']:>7.2f} "
            f"{ideal / t['local']:>5.0%} | {t['ray']:>8.2f} {n / t['ray']:>7.2f} "
            f"{ideal / t['ray']:>5.0%} | {overhead * 1000:>13.0f} ms"
        )


def _partial(base_url: str, calls: int):
    import functools

    return functools.partial(chat_job, base_url, calls)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


if __name__ == "__main__":
    main()
