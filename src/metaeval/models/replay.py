"""Record completions to JSONL and replay them: `replay/PATH.jsonl`.

Each line is {"request_hash", "request", "result"}. Lines are keyed by `request_hash`, which
leaves out the model name, so a run recorded against openai/x replays under replay/FILE.
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from metaeval.errors import ConfigError, MetaevalError
from metaeval.models.base import Model
from metaeval.models.provider_model import ProviderModel
from metaeval.models.request_hash import request_hash
from metaeval.models.retry import NO_RETRY
from metaeval.models.types import ModelRequest, ModelResult

__all__ = ["RecordingModel", "ReplayModel", "load_recording", "request_hash"]


def load_recording(path: str | Path) -> dict[str, list[ModelResult]]:
    """Results of a recording, grouped by request hash in file order."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError("replay file not found", file=str(path)) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read replay file: {exc}", file=str(path)) from exc
    results: dict[str, list[ModelResult]] = defaultdict(list)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict):
                raise ValueError("expected a JSON object")
            key = entry["request_hash"]
            if not isinstance(key, str):
                raise ValueError("request_hash must be a string")
            result = ModelResult.model_validate(entry["result"])
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ConfigError(
                f"line {number}: malformed replay entry: {detail}", file=str(path)
            ) from exc
        results[key].append(result)
    return dict(results)


class ReplayModel(ProviderModel):
    """Answers each request with the recorded result for its hash.

    A hash recorded several times is answered in recorded order, then the last one repeats.
    Usage, text and raw exchange are the recorded ones; cost comes from the price table
    (`replay/*` is 0.0: replaying costs nothing; the recorded cost stays in the file).
    """

    provider = "replay"
    default_retry = NO_RETRY

    def __init__(
        self,
        name: str,
        model_id: str,
        *,
        native_tools: bool = True,
        **common: Any,
    ):
        super().__init__(name, **common)
        self.path = Path(model_id)
        self._native_tools = native_tools
        self._results = load_recording(self.path)
        self._served: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def supports_native_tools(self) -> bool:
        return self._native_tools

    def _complete_once(self, request: ModelRequest) -> ModelResult:
        key = request_hash(request)
        with self._lock:
            recorded = self._results.get(key)
            if not recorded:
                raise MetaevalError(f"{self.path}: no recorded completion for request hash {key}")
            index = min(self._served[key], len(recorded) - 1)
            self._served[key] += 1
        return recorded[index].model_copy(deep=True)


class RecordingModel(Model):
    """Wraps a model and appends every completion to a JSONL file (flushed and fsynced)."""

    def __init__(self, inner: Model, path: str | Path):
        super().__init__(inner.name)
        self.provider = inner.provider
        self.inner = inner
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def supports_native_tools(self) -> bool:
        return self.inner.supports_native_tools()

    def complete(self, request: ModelRequest) -> ModelResult:
        result = self.inner.complete(request)
        line = json.dumps(
            {
                "request_hash": request_hash(request),
                "request": request.model_dump(mode="json"),
                "result": result.model_dump(mode="json"),
            },
            sort_keys=True,
            ensure_ascii=False,
        )
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return result
