"""How close the local model's prompt evaluation comes to this machine's arithmetic ceiling.

1. Counts the floating-point operations of one prompt token of the GGUF model from the file's
   own metadata: the weight matrices of every layer (attention projections and the gated
   feed-forward) plus attention over every earlier token of the context, so a token late in a
   long prompt costs more than an early one. The vocabulary projection runs once per call.
2. Runs the audit's model step on the first K example tasks exactly as
   `bench/local_audit_step.py` does, and for every call reads llama.cpp's own counters: how
   many prompt tokens it evaluated (a reused prefix is not evaluated again), at which
   positions, and how long that took. Achieved GFLOP/s = counted operations / that time.
3. Measures the machine's ceiling on the same cores: a large float32 matrix product through
   numpy's BLAS (OpenBLAS, hand-tuned kernels) with as many threads as llama.cpp used.
4. Prints the shortest prompt-evaluation time per task that ceiling allows, and with it the
   largest speed-up of the audit's model step any configuration of the same model on the same
   prompts could give over a baseline time per task (--baseline-s, default 11.0 s: the code
   before the tuning, measured by `bench/local_audit_step.py --compare-src`).

Usage: python bench/local_compute_ceiling.py [--tasks 4] [--baseline-s 11.0] [--max-tokens 2048]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaeval.models.registry import get_model
from metaeval.protocols.audit.llm_protocol import audit_task
from metaeval.protocols.audit.task_view import load_task
from metaeval.tasks.task_dirs import discover_tasks

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_audit_step import BENCH, perf  # noqa: E402


@dataclass(frozen=True)
class Shape:
    """The dimensions of a llama-architecture model, as its GGUF metadata states them."""

    layers: int
    width: int
    feed_forward: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    @classmethod
    def from_metadata(cls, meta: dict[str, str]) -> Shape:
        arch = meta["general.architecture"]
        width = int(meta[f"{arch}.embedding_length"])
        heads = int(meta[f"{arch}.attention.head_count"])
        head_dim = int(meta.get(f"{arch}.attention.key_length", width // heads))
        return cls(
            layers=int(meta[f"{arch}.block_count"]),
            width=width,
            feed_forward=int(meta[f"{arch}.feed_forward_length"]),
            heads=heads,
            kv_heads=int(meta.get(f"{arch}.attention.head_count_kv", heads)),
            head_dim=head_dim,
            vocab=int(meta[f"{arch}.vocab_size"]),
        )

    def weight_flops_per_token(self) -> int:
        """Multiply-adds x 2 of every layer's weight matrices for one token."""
        q_and_out = 2 * self.width * self.heads * self.head_dim
        k_and_v = 2 * self.width * self.kv_heads * self.head_dim
        gated_ffn = 3 * self.width * self.feed_forward
        return 2 * self.layers * (q_and_out + k_and_v + gated_ffn)

    def attention_flops(self, first: int, end: int) -> int:
        """Scores and weighted values of tokens at positions first..end-1, each attending to
        itself and every token before it."""
        attended = (end * (end + 1) - first * (first + 1)) // 2  # sum of (p + 1)
        return 2 * self.layers * 2 * self.heads * self.head_dim * attended

    def prompt_flops(self, prompt_tokens: int, evaluated: int) -> int:
        """Operations to evaluate the last `evaluated` of `prompt_tokens` (the rest reused)."""
        first = prompt_tokens - evaluated
        head = 2 * self.width * self.vocab  # logits of the last prompt token only
        return (
            evaluated * self.weight_flops_per_token()
            + self.attention_flops(first, prompt_tokens)
            + head
        )


class CountingModel:
    """The model, with every call's prompt size, evaluated tokens and prompt time kept."""

    def __init__(self, model: Any):
        self.model = model
        self.llama = model._loaded.llama
        self.calls: list[tuple[int, int, float]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def complete(self, request: Any) -> Any:
        ms0, n0, _, _ = perf(self.llama)  # prompt ms and tokens evaluated so far
        result = self.model.complete(request)
        ms1, n1, _, _ = perf(self.llama)
        self.calls.append((result.usage.input_tokens, n1 - n0, (ms1 - ms0) / 1000))
        return result


GEMM_PROGRAM = """
import sys, time
import numpy as np
size, repeats = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((size, size), dtype=np.float32)
b = rng.standard_normal((size, size), dtype=np.float32)
a @ b
best = float("inf")
for _ in range(repeats):
    t0 = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - t0)
print(2 * size**3 / best / 1e9)
"""


def gemm_gflops(threads: int, size: int = 2048, repeats: int = 8) -> float:
    """Best float32 matrix-product rate of numpy's BLAS with `threads` threads, measured in a
    child process (OpenBLAS reads its thread count when it loads)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    argv = [sys.executable, "-c", GEMM_PROGRAM, str(size), str(repeats)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--baseline-s", type=float, default=11.0)
    parser.add_argument("--max-tokens", type=int, default=2048)
    args = parser.parse_args()

    model = CountingModel(get_model("local/smollm2"))
    shape = Shape.from_metadata(model.llama.metadata)
    threads = model.llama.n_threads
    print(f"model: {model.path.name}; {shape}")
    print(
        f"per prompt token: {shape.weight_flops_per_token() / 1e6:.0f} MFLOP in weight "
        f"matrices + {shape.attention_flops(0, 1) / 1e3:.1f} kFLOP per token of context"
    )
    task_dirs, _ = discover_tasks(BENCH)
    per_task: list[tuple[float, float, float]] = []  # (GFLOP, prompt s, wall s)
    for task_dir in task_dirs[: args.tasks]:
        task = load_task(task_dir, bench_root=BENCH)
        first_call = len(model.calls)
        t0 = time.perf_counter()
        audit_task(task, model, max_tokens=args.max_tokens)
        wall = time.perf_counter() - t0
        gflop = prompt_s = 0.0
        for prompt, evaluated, seconds in model.calls[first_call:]:
            flops = shape.prompt_flops(prompt, evaluated) / 1e9
            gflop += flops
            prompt_s += seconds
            print(
                f"{task.task_id:22s} prompt {prompt} tokens, evaluated {evaluated} "
                f"(positions {prompt - evaluated}-{prompt - 1}) in {seconds:.2f} s: "
                f"{flops:.0f} GFLOP, {flops / seconds:.0f} GFLOP/s",
                flush=True,
            )
        per_task.append((gflop, prompt_s, wall))
    # The first task also evaluates the shared system prompt; a long run sees the others.
    steady = per_task[1:] or per_task
    gflop = sum(t[0] for t in steady) / len(steady)
    prompt_s = sum(t[1] for t in steady) / len(steady)
    wall = sum(t[2] for t in steady) / len(steady)
    ceiling = gemm_gflops(threads)
    floor_s = gflop / ceiling
    print(f"llama.cpp threads: {threads}; tasks after the first: {len(steady)}")
    print(
        f"per task: {gflop:.0f} GFLOP of prompt evaluation in {prompt_s:.2f} s "
        f"({gflop / prompt_s:.0f} GFLOP/s); wall {wall:.2f} s"
    )
    print(f"float32 matrix product (numpy BLAS, {threads} threads): {ceiling:.0f} GFLOP/s")
    print(f"prompt evaluation / ceiling: {gflop / prompt_s / ceiling:.2f}")
    print(
        f"prompt evaluation at the ceiling: {floor_s:.2f} s per task, so the model step can be "
        f"at most {args.baseline_s / floor_s:.1f}x faster than the {args.baseline_s:.1f} s "
        f"baseline (generation, sampling and parsing counted as free)"
    )


if __name__ == "__main__":
    main()
