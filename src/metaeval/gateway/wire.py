"""Pieces every wire format shares: the parsed call, ids, SSE framing, schema and text helpers."""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from metaeval.models.types import ModelRequest, ModelResult, ToolCall

_counter = itertools.count(1)
_counter_lock = threading.Lock()


def new_id(prefix: str) -> str:
    """A process-unique id such as ``msg_000017`` (deterministic order, no randomness)."""
    with _counter_lock:
        n = next(_counter)
    return f"{prefix}_{n:06d}"


class WireError(ValueError):
    """A request the gateway cannot understand; answered with HTTP 400 naming the field."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(f"field '{field}': {message}" if field else message)


@dataclass
class Call:
    """One parsed API call: the metaeval request, whether to stream, what the client asked."""

    api: str
    request: ModelRequest
    stream: bool
    requested_model: str
    extra: dict[str, Any] = field(default_factory=dict)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: optional ``event:`` line, one ``data:`` line, blank line."""
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else dumps(data)
    return f"{head}data: {payload}\n\n".encode()


def text_of(content: Any, text_keys: tuple[str, ...] = ("text",)) -> str:
    """Text of a content value: a string, or blocks carrying one of `text_keys`."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        for key in text_keys:
            if isinstance(content.get(key), str):
                return content[key]
        return dumps(content)
    if isinstance(content, list):
        return "\n".join(text_of(part, text_keys) for part in content if part is not None)
    return str(content)


def arguments_json(call: ToolCall) -> str:
    """The raw argument text of a call (re-encoded when the model gave only the object)."""
    return call.arguments_json or dumps(call.arguments)


def parse_arguments(raw: Any, field_name: str) -> tuple[dict[str, Any], str]:
    """(object, raw text) of tool arguments sent as a JSON string or an object."""
    if isinstance(raw, dict):
        return raw, dumps(raw)
    if raw in (None, ""):
        return {}, ""
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return {"input": raw}, raw  # freeform tools (e.g. codex's apply_patch grammar)
        return (value if isinstance(value, dict) else {"value": value}), raw
    raise WireError(f"tool arguments must be a JSON string or object, got {raw!r}", field_name)


def lower_types(schema: Any) -> Any:
    """A JSON schema with Gemini-style upper-case ``type`` names (OBJECT, STRING) lowered."""
    if isinstance(schema, dict):
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "type" and isinstance(value, str):
                out[key] = value.lower()
            elif key == "type" and isinstance(value, list):
                out[key] = [v.lower() if isinstance(v, str) else v for v in value]
            else:
                out[key] = lower_types(value)
        return out
    if isinstance(schema, list):
        return [lower_types(v) for v in schema]
    return schema


def as_int(value: Any, field_name: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WireError(f"must be a positive integer, got {value!r}", field_name)
    return value


def as_temperature(value: Any, field_name: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError(f"must be a number, got {value!r}", field_name)
    return float(value)


def finish_kind(result: ModelResult) -> str:
    """'tool' when the result calls tools, 'length' when cut by max tokens, else 'stop'."""
    if result.tool_calls:
        return "tool"
    if (result.finish_reason or "") in ("length", "max_tokens", "MAX_TOKENS"):
        return "length"
    return "stop"


def tool_list(raw: Any) -> list:
    """A request's `tools` value as a list (none: empty); WireError when it is not a list."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise WireError("must be a list", "tools")
    return raw
