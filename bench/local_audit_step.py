"""The audit's model step on the local model: time per task and prompt tokens per second.

Audits the first K tasks of the example benchmark (examples/audit-bench) with `local/smollm2`
through `audit_task`, exactly as `metaeval audit run` does (definition protocol, the default
output budget), in a fresh process. Prints per task the wall time, prompt tokens and the
tokens llama.cpp actually evaluated (a reused prefix is not evaluated again), then the mean
time per task and the prompt tokens per second (prompt tokens of the calls / time spent
evaluating prompts, from llama.cpp's own counters).

With --compare-src DIR (the `src/` of another checkout, e.g. a worktree of the commit before
the tuning), the same tasks first run with that code in a child process (PYTHONPATH=DIR, its
own defaults), then with this checkout's, and the speed-up of the mean time per task is
printed. Running the old code itself matters: its defaults are not reproducible by options of
the new code (llama-cpp-python evaluated its prompts with every core even when n_threads was
1), and an earlier in-process "old configuration" overstated the speed-up for that reason.

Usage: python bench/local_audit_step.py [--tasks 4] [--max-tokens 2048] [--n-threads N]
           [--compare-src DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from metaeval.models.registry import get_model
from metaeval.protocols.audit.llm_protocol import audit_task
from metaeval.protocols.audit.task_view import load_task
from metaeval.tasks.task_dirs import discover_tasks

BENCH = Path(__file__).resolve().parents[1] / "examples" / "audit-bench"


def perf(llama) -> tuple[float, int, float, int]:
    """(prompt eval ms, prompt tokens evaluated, generation ms, tokens generated) so far."""
    import llama_cpp

    data = llama_cpp.llama_perf_context(llama._ctx.ctx)
    return data.t_p_eval_ms, data.n_p_eval, data.t_eval_ms, data.n_eval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--n-threads", type=int, default=None)
    parser.add_argument(
        "--compare-src", type=Path, default=None, help="src/ of a checkout to compare against"
    )
    args = parser.parse_args()

    options: dict = {} if args.n_threads is None else {"n_threads": args.n_threads}
    if args.compare_src is None:
        measure(options, args.tasks, args.max_tokens)
        return
    print(f"== before: the code in {args.compare_src}, its defaults")
    old = run_other(args.compare_src, args.tasks, args.max_tokens)
    print("== now: this checkout, the default configuration")
    new = measure(options, args.tasks, args.max_tokens)
    print(
        f"speed-up of the mean time per audit task: {old / new:.2f}x ({old:.1f} s -> {new:.1f} s)"
    )


def run_other(src: Path, n_tasks: int, max_tokens: int) -> float:
    """This script under another checkout's code, in a child process; its mean s per task."""
    env = {**os.environ, "PYTHONPATH": str(src.resolve())}
    argv = [sys.executable, __file__, "--tasks", str(n_tasks), "--max-tokens", str(max_tokens)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    lines = [line for line in done.stdout.splitlines() if not line.startswith("llama")]
    print("\n".join(lines), flush=True)
    found = re.search(r"time per audit task: mean ([0-9.]+) s", done.stdout)
    if found is None:
        raise RuntimeError(f"no mean time in the child's output:\n{done.stdout}\n{done.stderr}")
    return float(found.group(1))


def measure(options: dict, n_tasks: int, max_tokens: int) -> float:
    """Audit the first `n_tasks` example tasks with these local-model options; print the
    figures and return the mean seconds per task."""
    started = time.perf_counter()
    model = get_model("local/smollm2", **options)
    llama = model._loaded.llama  # type: ignore[attr-defined]
    print(
        f"load: {time.perf_counter() - started:.2f} s; threads {llama.n_threads}; "
        f"weights {getattr(model, 'weights', 'file')} ({model.path.name})"  # type: ignore[attr-defined]
    )
    task_dirs, _ = discover_tasks(BENCH)
    times, prompt_tokens = [], 0
    before = perf(llama)
    for task_dir in task_dirs[:n_tasks]:
        task = load_task(task_dir, bench_root=BENCH)
        p0 = perf(llama)
        t0 = time.perf_counter()
        audit = audit_task(task, model, max_tokens=max_tokens)
        elapsed = time.perf_counter() - t0
        p1 = perf(llama)
        times.append(elapsed)
        tokens = sum(c["usage"]["input_tokens"] for c in audit.model_calls)
        prompt_tokens += tokens
        print(
            f"{task.task_id:22s} {elapsed:6.2f} s; calls {audit.attempts}; prompt tokens "
            f"{tokens}, evaluated {p1[1] - p0[1]}; generated {p1[3] - p0[3]}; "
            f"status {audit.status}; findings {len(audit.findings)}",
            flush=True,
        )
    after = perf(llama)
    prompt_ms = after[0] - before[0]
    print(f"time per audit task: mean {statistics.mean(times):.2f} s over {len(times)} tasks")
    print(
        f"prompt tokens/s: {prompt_tokens / (prompt_ms / 1000):.0f} "
        f"({prompt_tokens} prompt tokens, {after[1] - before[1]} evaluated, "
        f"{prompt_ms / 1000:.2f} s evaluating)"
    )
    print(
        f"generation: {after[3] - before[3]} tokens in {(after[2] - before[2]) / 1000:.2f} s; "
        f"total {sum(times):.2f} s"
    )
    return statistics.mean(times)


if __name__ == "__main__":
    main()
