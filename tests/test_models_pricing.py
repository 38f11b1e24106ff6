"""Price table: published list prices, cache and reasoning billing, globs, unknown models."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import pytest

from metaeval.errors import ConfigError
from metaeval.models.pricing import load_price_table, price_table
from metaeval.models.types import Usage

PLAIN = Usage(input_tokens=1000, output_tokens=500)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # Published list prices, USD per million tokens (input, output):
        ("openai/gpt-4o", 1000 * 2.50 / 1e6 + 500 * 10.00 / 1e6),  # 0.0075
        ("openai/gpt-4o-mini", 1000 * 0.15 / 1e6 + 500 * 0.60 / 1e6),  # 0.00045
        ("openai/gpt-4.1", 1000 * 2.00 / 1e6 + 500 * 8.00 / 1e6),  # 0.006
        ("openai/gpt-4.1-mini", 1000 * 0.40 / 1e6 + 500 * 1.60 / 1e6),  # 0.0012
        ("anthropic/claude-sonnet-4-20250514", 1000 * 3.00 / 1e6 + 500 * 15.00 / 1e6),
        ("anthropic/claude-opus-4-20250514", 1000 * 15.00 / 1e6 + 500 * 75.00 / 1e6),
        ("anthropic/claude-3-5-haiku-20241022", 1000 * 0.80 / 1e6 + 500 * 4.00 / 1e6),
    ],
)
def test_published_prices(model: str, expected: float) -> None:
    assert price_table().cost(model, PLAIN) == pytest.approx(expected, rel=1e-12)


def test_written_out_values() -> None:
    table = price_table()
    assert table.cost("openai/gpt-4o", PLAIN) == pytest.approx(0.0075)
    assert table.cost("anthropic/claude-sonnet-4-20250514", PLAIN) == pytest.approx(0.0105)
    assert table.cost("anthropic/claude-opus-4-20250514", PLAIN) == pytest.approx(0.0525)


def test_openai_cached_tokens_are_not_billed_twice_and_reasoning_is_output() -> None:
    # 1000 prompt tokens of which 400 cached; 500 completion tokens of which 200 reasoning.
    usage = Usage(input_tokens=1000, cache_read_tokens=400, output_tokens=500, reasoning_tokens=200)
    expected = 600 * 2.50 / 1e6 + 400 * 1.25 / 1e6 + 500 * 10.00 / 1e6  # 0.007
    assert price_table().cost("openai/gpt-4o", usage) == pytest.approx(expected)
    assert expected == pytest.approx(0.007)


def test_anthropic_cache_reads_and_writes() -> None:
    # Normalised usage: 1000 prompt tokens = 500 plain + 300 cache read + 200 cache write.
    usage = Usage(
        input_tokens=1000, cache_read_tokens=300, cache_write_tokens=200, output_tokens=500
    )
    expected = 500 * 3.00 / 1e6 + 300 * 0.30 / 1e6 + 200 * 3.75 / 1e6 + 500 * 15.00 / 1e6
    assert price_table().cost("anthropic/claude-sonnet-4-20250514", usage) == pytest.approx(
        expected
    )
    assert expected == pytest.approx(0.00984)


@pytest.mark.parametrize(
    "model",
    ["local/smollm2", "local//abs/path/x.gguf", "local/./rel.gguf", "scripted/x", "replay/a.jsonl"],
)
def test_zero_cost_providers_are_explicitly_zero(model: str) -> None:
    assert price_table().cost(model, PLAIN) == 0.0


@pytest.mark.parametrize(
    "model",
    ["openai/gpt-9000", "openai/gpt-4o-2024-05-13", "litellm/foo", "anthropic/claude-2"],
)
def test_unknown_models_cost_none_never_zero(model: str) -> None:
    assert price_table().cost(model, PLAIN) is None


def test_version_and_sha256_of_file_bytes() -> None:
    table = price_table()
    raw = resources.files("metaeval.models").joinpath("prices.json").read_bytes()
    assert table.version == "2026-11-01"
    assert table.as_of == "2026-11-01"
    assert table.currency == "USD"
    assert table.sha256 == hashlib.sha256(raw).hexdigest()


def test_custom_table_exact_beats_glob_and_longest_glob_wins(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    data = {
        "version": "t1",
        "models": {
            "acme/*": {"input_per_mtok": 1.0, "output_per_mtok": 1.0},
            "acme/big-*": {"input_per_mtok": 2.0, "output_per_mtok": 2.0},
            "acme/big-one": {"input_per_mtok": 3.0, "output_per_mtok": 3.0},
        },
    }
    path.write_text(json.dumps(data))
    table = load_price_table(path)
    one_m = Usage(input_tokens=1_000_000)
    assert table.cost("acme/small", one_m) == pytest.approx(1.0)
    assert table.cost("acme/big-two", one_m) == pytest.approx(2.0)
    assert table.cost("acme/big-one", one_m) == pytest.approx(3.0)
    # Cache prices default to the input price when the table gives none.
    cached = Usage(input_tokens=1_000_000, cache_read_tokens=500_000)
    assert table.cost("acme/small", cached) == pytest.approx(1.0)
    assert table.version == "t1"
    assert table.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_malformed_tables_name_the_file(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(ConfigError, match="bad.json"):
        load_price_table(bad_json)
    bad_entry = tmp_path / "entry.json"
    bad_entry.write_text(json.dumps({"version": "x", "models": {"a/b": {"input_per_mtok": 1}}}))
    with pytest.raises(ConfigError, match=r"entry.json.*models.a/b"):
        load_price_table(bad_entry)
    with pytest.raises(ConfigError, match="missing.json"):
        load_price_table(tmp_path / "missing.json")


def test_a_model_priced_twice_is_refused(tmp_path: Path) -> None:
    # json.loads would keep the second price silently
    path = tmp_path / "prices.json"
    path.write_text(
        '{"version": "t", "models": {\n'
        '  "acme/x": {"input_per_mtok": 1.0, "output_per_mtok": 1.0},\n'
        '  "acme/x": {"input_per_mtok": 9.0, "output_per_mtok": 9.0}}}\n'
    )
    with pytest.raises(ConfigError) as info:
        load_price_table(path)
    assert info.value.file == str(path)
    assert "duplicate key 'acme/x'" in str(info.value)
