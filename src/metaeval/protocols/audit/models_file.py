"""The models file of an audit run (`audit run --models FILE`, `audit plan --models FILE`):
several models in one run, each with its own call settings.

BenchGuard ran five models at once, each as its provider allows (temperature 0.0, but 1.0 for
the Gemini models; 4096 output tokens). A YAML or JSON file lists them::

    models:
      - model: openai/gpt-5.4
        temperature: 0.0
        max_tokens: 4096
        key_env: OPENAI_API_KEY          # the key is read from this variable at run time
      - model: litellm/vertex_ai/gemini-3-flash
        temperature: 1.0
        options: {vertex_location: global}   # passed to the provider as they are
        price: {input: 0.5, output: 3.0}     # USD per million tokens: the plan and the run

A key a model leaves out takes the run's value (`-M`, `--max-tokens`, else the default).
Each model's resolved settings are recorded: in the manifest (the setting `model:<name>`), in
every open's `sessions.jsonl` entry, and in each of its cell records (`call`). Resuming with
another value for a model that has cells is refused, naming the model and the setting. Adding
a model to a run later is an addition, not a change, and the pooled rows of `audit score`
cover every model of the run. Only a key variable's name is recorded, never a key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from metaeval.config_files import load
from metaeval.errors import ConfigError
from metaeval.models.pricing import PriceTable
from metaeval.models.registry import parse_model_name
from metaeval.protocols.audit.call_options import ModelCallOptions
from metaeval.records import sha256_text

OptionValue = str | int | float | bool


class Price(BaseModel):
    """USD per million tokens, for a model the price table does not know."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)

    def table(self, model: str) -> PriceTable:
        """A price table holding this price for `model` alone."""
        data = {
            "version": "models-file",
            "models": {model: {"input_per_mtok": self.input, "output_per_mtok": self.output}},
        }
        return PriceTable(data, sha256_text(json.dumps(data, sort_keys=True)), "models file")


class ModelEntry(BaseModel):
    """One model of the file and the settings it overrides."""

    model_config = ConfigDict(extra="forbid")

    model: str
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(default=None, ge=64, le=1_000_000)
    reasoning: bool | None = None
    max_findings: int | None = Field(default=None, ge=1, le=100)
    max_evidence: int | None = Field(default=None, ge=1, le=20)
    max_description: int | None = Field(default=None, ge=50, le=20000)
    key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    base_url: str | None = None
    options: dict[str, OptionValue] = Field(default_factory=dict)
    price: Price | None = None

    @field_validator("model")
    @classmethod
    def _provider_model(cls, value: str) -> str:
        try:
            parse_model_name(value)  # the registry's rule for a model name
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("field 'model': ")) from None
        return value

    @field_validator("options")
    @classmethod
    def _no_secrets(cls, value: dict[str, OptionValue]) -> dict[str, OptionValue]:
        if "api_key" in value:
            raise ValueError("give the key's environment variable as key_env, not api_key")
        return value


class ModelsFile(BaseModel):
    """The file: a non-empty list of models, each named once."""

    model_config = ConfigDict(extra="forbid")

    models: list[ModelEntry] = Field(min_length=1)


@dataclass(frozen=True)
class ModelSettings:
    """What one model of a run is called with: the audit's side and the provider's."""

    call: ModelCallOptions
    max_tokens: int
    provider_options: tuple[tuple[str, OptionValue], ...] = ()  # never a key
    key_env: str | None = None
    price: Price | None = None
    origin: tuple[str, int] | None = None  # (models file, entry index), for error messages

    def recorded(self) -> dict[str, Any]:
        """The values a run records for the model and compares on a resume."""
        return {
            "max_tokens": self.max_tokens,
            **self.call.settings(),
            **({"key_env": self.key_env} if self.key_env else {}),
            **({"price": self.price.model_dump()} if self.price else {}),
            **dict(self.provider_options),
        }

    def model_options(self, name: str) -> dict[str, Any]:
        """The provider options model `name` is made with: the key read from `key_env` now,
        and its own price (the run's costs then use it, as `audit plan` does)."""
        options: dict[str, Any] = dict(self.provider_options)
        if self.price is not None:
            options["prices"] = self.price.table(name)
        if self.key_env:
            key = os.environ.get(self.key_env)
            if not key:
                file, index = self.origin or (None, None)
                raise ConfigError(
                    f"environment variable {self.key_env} is not set (the key of {name})",
                    file=file,
                    field="key_env" if index is None else f"models.{index}.key_env",
                )
            options["api_key"] = key
        return options


def load_models_file(path: Path) -> ModelsFile:
    """Read and validate the file; a problem is a ConfigError naming the file and field."""
    parsed = load(path, ModelsFile)
    seen: dict[str, int] = {}
    for i, entry in enumerate(parsed.models):
        if entry.model in seen:
            raise ConfigError(
                f"model '{entry.model}' is listed twice (also models.{seen[entry.model]})",
                file=str(path),
                field=f"models.{i}.model",
            )
        seen[entry.model] = i
    return parsed


def resolve_models(
    parsed: ModelsFile, call: ModelCallOptions, max_tokens: int, file: str | None = None
) -> dict[str, ModelSettings]:
    """Each model's settings: its own values over the run's (`call`, `max_tokens`); `file`
    (where `parsed` was read) is named in the errors found later (a key variable unset)."""
    out: dict[str, ModelSettings] = {}
    for index, entry in enumerate(parsed.models):
        answer = call.answer
        caps = {
            key: getattr(entry, key)
            for key in ("max_findings", "max_evidence", "max_description", "reasoning")
            if getattr(entry, key) is not None
        }
        own = ModelCallOptions(
            temperature=call.temperature if entry.temperature is None else entry.temperature,
            answer=replace(answer, **caps),
        )
        options = dict(sorted(entry.options.items()))
        if entry.base_url:
            options["base_url"] = entry.base_url
        out[entry.model] = ModelSettings(
            call=own,
            max_tokens=max_tokens if entry.max_tokens is None else entry.max_tokens,
            provider_options=tuple(options.items()),
            key_env=entry.key_env,
            price=entry.price,
            origin=(file, index) if file else None,
        )
    return out
