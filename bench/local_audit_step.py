"""The audit's model step on the local model: time per task and prompt tokens per second.

Audits the first K tasks of the example benchmark (examples/audit-bench) with `local/smollm2`
through `audit_task`, exactly as `metaeval audit run` does (definition protocol, the default
output budget), in a fresh process. Prints per task the wall time, prompt tokens and the
tokens llama.cpp actually evaluated (a reused prefix is not evaluated again), then the mean
time per task and the prompt tokens per second (prompt tokens of the calls / time spent
evaluating prompts, from llama.cpp's own counters).

With --compare, the same tasks first run in the configuration the local provider had before
it was tuned (one thread, no prefix-state cache, no flash attention, the GGUF file's own Q4_1
weights instead of the cached F16 copy), then in the current
default, in the same process and session, and the speed-up of the mean time per task is
printed: on a shared machine both sides see the same load.

Usage: python bench/local_audit_step.py [--tasks 4] [--max-tokens 2048] [--n-threads N]
           [--compare]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from metaeval.models.registry import get_model
from metaeval.protocols.audit.llm_protocol import audit_task
from metaeval.tasks.harbor import discover_tasks, load_task

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
    parser.add_argument("--compare", action="store_true", help="also run the old configuration")
    args = parser.parse_args()

    options: dict = {} if args.n_threads is None else {"n_threads": args.n_threads}
    if not args.compare:
        measure(options, args.tasks, args.max_tokens)
        return
    print("== before: 1 thread, no prefix cache, no flash attention, the file's Q4_1 weights")
    before = {"n_threads": 1, "prefix_cache_mb": 0, "flash_attn": False, "weights": "file"}
    old = measure(before, args.tasks, args.max_tokens)
    print("== now: the default configuration")
    new = measure(options, args.tasks, args.max_tokens)
    print(
        f"speed-up of the mean time per audit task: {old / new:.2f}x ({old:.1f} s -> {new:.1f} s)"
    )


def measure(options: dict, n_tasks: int, max_tokens: int) -> float:
    """Audit the first `n_tasks` example tasks with these local-model options; print the
    figures and return the mean seconds per task."""
    started = time.perf_counter()
    model = get_model("local/smollm2", **options)
    llama = model._loaded.llama  # type: ignore[attr-defined]
    print(
        f"load: {time.perf_counter() - started:.2f} s; threads {llama.n_threads}; "
        f"weights {model.weights} ({model.path.name})"  # type: ignore[attr-defined]
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
