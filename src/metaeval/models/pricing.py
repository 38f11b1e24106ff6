"""Token prices and cost computation, from the versioned table shipped in prices.json.

Billing rules (one convention for every provider, matching `Usage`):

- `usage.input_tokens` counts every prompt token; `cache_read_tokens` and `cache_write_tokens`
  are subsets of it. Uncached input = input - cache_read - cache_write, billed at the input
  price; the cached parts at their own prices. So OpenAI's cached tokens are never billed twice.
- `usage.output_tokens` already includes `reasoning_tokens` (as OpenAI reports it), so reasoning
  is billed at the output price and not added again.
- A model missing from the table costs `None` (unknown), never 0. Zero-cost providers
  (local, scripted, replay) are listed at 0.0 explicitly.
"""

from __future__ import annotations

import fnmatch
import hashlib
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from metaeval.config_files import parse_json, read_text
from metaeval.errors import ConfigError
from metaeval.models.types import Usage

_PER = 1_000_000


class ModelPrice(BaseModel):
    """USD per million tokens. Cache prices default to the input price when absent."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None

    def cost(self, usage: Usage) -> float:
        """Cost of one call's usage under this price."""
        cache_read = usage.cache_read_tokens
        cache_write = usage.cache_write_tokens
        uncached = max(0, usage.input_tokens - cache_read - cache_write)
        read_price = (
            self.input_per_mtok if self.cache_read_per_mtok is None else (self.cache_read_per_mtok)
        )
        write_price = (
            self.input_per_mtok
            if self.cache_write_per_mtok is None
            else (self.cache_write_per_mtok)
        )
        return (
            uncached * self.input_per_mtok
            + cache_read * read_price
            + cache_write * write_price
            + usage.output_tokens * self.output_per_mtok
        ) / _PER


class PriceTable:
    """A loaded price table: `version`, `as_of`, `currency`, `sha256` of the file bytes."""

    def __init__(self, data: dict[str, Any], sha256: str, source: str = "prices.json"):
        self.source = source
        self.sha256 = sha256
        try:
            self.version = str(data["version"])
            self.as_of = str(data.get("as_of", self.version))
            self.currency = str(data.get("currency", "USD"))
            raw_models = data["models"]
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"price table lacks {exc}", file=source) from exc
        if not isinstance(raw_models, dict):
            raise ConfigError("'models' must be an object", file=source, field="models")
        self.models: dict[str, ModelPrice] = {}
        for key, value in raw_models.items():
            try:
                self.models[key] = ModelPrice.model_validate(value)
            except ValidationError as exc:
                raise ConfigError(str(exc), file=source, field=f"models.{key}") from exc

    def lookup(self, model_name: str) -> ModelPrice | None:
        """The price for `model_name`: an exact key, else the longest matching glob, else None."""
        if model_name in self.models:
            return self.models[model_name]
        matches = [k for k in self.models if _is_glob(k) and fnmatch.fnmatchcase(model_name, k)]
        if not matches:
            return None
        return self.models[max(matches, key=len)]

    def cost(self, model_name: str, usage: Usage) -> float | None:
        """USD cost of `usage` on `model_name`, or None when the model has no price."""
        price = self.lookup(model_name)
        return None if price is None else price.cost(usage)


def _is_glob(key: str) -> bool:
    return any(ch in key for ch in "*?[")


def load_price_table(path: str | Path) -> PriceTable:
    """Load a price table from a JSON file (same format as the bundled prices.json)."""
    path = Path(path)
    text = read_text(path)  # a user's file: regular, bounded, UTF-8, read the strict way
    return _parse(text.encode("utf-8"), str(path))  # the same bytes, for the table's sha256


def _parse(raw: bytes, source: str) -> PriceTable:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=source
        ) from None
    data = parse_json(text, source)  # a model priced twice is refused, not silently overridden
    if not isinstance(data, dict):
        raise ConfigError("price table must be a JSON object", file=source)
    return PriceTable(data, hashlib.sha256(raw).hexdigest(), source)


@lru_cache(maxsize=1)
def price_table() -> PriceTable:
    """The bundled price table (loaded once per process)."""
    raw = resources.files("metaeval.models").joinpath("prices.json").read_bytes()
    return _parse(raw, "metaeval/models/prices.json")
