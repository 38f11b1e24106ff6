"""The local model processes a shared prompt prefix once and reuses it, with identical output."""

from __future__ import annotations

import pytest

from metaeval.models.local import LocalModel
from metaeval.models.types import Message, ModelRequest

# Five model calls: generous timeouts, the machine may be shared with busy processes.
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]
llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

RULES = " ".join(
    f"Rule {i}: a finding must name the file, the line and the reason it is a defect."
    for i in range(1, 16)
)
SYSTEM = f"You are an auditor of benchmark tasks. {RULES}"
OTHER_SYSTEM = f"Answer questions about a small Python repository. {RULES[::-1]}"


def request(system: str, user: str) -> ModelRequest:
    return ModelRequest(
        model="local/smollm2",
        messages=[Message(role="system", content=system), Message(role="user", content=user)],
        max_tokens=16,
        temperature=0.0,
        seed=0,
    )


def evaluated(model: LocalModel) -> int:
    """Prompt tokens llama.cpp has evaluated so far in this model's context."""
    return model.runtime().prompt_tokens_evaluated


def test_shared_prefix_is_reused_across_interleaved_calls_with_the_same_output() -> None:
    cached = LocalModel("local/smollm2", "smollm2", n_ctx=2048, prefix_cache_mb=128)
    plain = LocalModel("local/smollm2", "smollm2", n_ctx=2048, prefix_cache_mb=0)
    assert cached.runtime().instance != plain.runtime().instance  # two loads, two caches

    third = request(SYSTEM, "Task 3: the tests compare floats with ==.")
    for model in (cached, plain):
        model.complete(request(SYSTEM, "Task 1: the instruction names out.json."))
        model.complete(request(OTHER_SYSTEM, "Where is the queue implemented?"))

    before = evaluated(cached)
    with_cache = cached.complete(third)
    cached_cost = evaluated(cached) - before
    before = evaluated(plain)
    without_cache = plain.complete(third)
    plain_cost = evaluated(plain) - before

    prompt_tokens = with_cache.usage.input_tokens
    assert prompt_tokens == without_cache.usage.input_tokens > 300
    # Without the cache the other conversation evicted the shared system prompt: every prompt
    # token after the chat template's few header tokens is evaluated again. With it, only the
    # part after the shared prefix is.
    assert plain_cost >= prompt_tokens - 6
    assert cached_cost < prompt_tokens // 4, (cached_cost, prompt_tokens)
    # Same input, same output, with and without the cache.
    assert with_cache.text == without_cache.text
    fresh = LocalModel("local/smollm2", "smollm2", n_ctx=2048, prefix_cache_mb=64)
    assert fresh.complete(third).text == with_cache.text


def test_threads_default_to_the_available_cores() -> None:
    import os

    model = LocalModel("local/smollm2", "smollm2", n_ctx=2048, prefix_cache_mb=0)
    cores = len(os.sched_getaffinity(0))
    assert model.runtime().n_threads == cores
    assert model.runtime().n_threads_batch == cores


def test_threads_per_call_leave_busy_cores_alone() -> None:
    from metaeval.models.local import others_running, threads_for_call

    # /proc/loadavg: the 4th field is runnable/total threads; the caller is one of them.
    assert others_running("0.10 0.20 0.30 1/300 4242") == 0
    assert others_running("9.1 9.0 8.8 14/800 4242") == 13
    assert others_running("garbage") == 0
    assert threads_for_call(2, 0) == 2  # idle machine: every core
    assert threads_for_call(2, 1) == 1
    assert threads_for_call(2, 13) == 1  # never fewer than one
    assert threads_for_call(8, 3) == 5
