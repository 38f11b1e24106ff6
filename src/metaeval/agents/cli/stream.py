"""Reading a CLI's output stream: the parsed-stream type and the JSON-lines helpers every
adapter's parser uses."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, Field

from metaeval.agents.types import TranscriptEvent
from metaeval.models.types import Usage

MAX_ERROR_SNIPPET = 200


class ParsedStream(BaseModel):
    """What one CLI run's output says, in the common transcript shape."""

    transcript: list[TranscriptEvent] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    final_text: str | None = None
    error: str | None = None
    cost_usd: float | None = None
    session_id: str | None = None
    num_turns: int | None = None
    # True: the tool reported success; False: it reported failure; None: it reported neither
    # (e.g. the stream was cut off before its final event).
    reported_success: bool | None = None


def compact_json(value: Any) -> str:
    """Compact JSON, the way tool arguments are measured when the raw text is unknown."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def malformed_line_event(lineno: int, line: str, reason: str) -> TranscriptEvent:
    snippet = line.strip()
    if len(snippet) > MAX_ERROR_SNIPPET:
        snippet = snippet[:MAX_ERROR_SNIPPET] + "..."
    return TranscriptEvent(type="error", text=f"line {lineno}: {reason}, line skipped: {snippet}")


def iter_json_objects(
    lines: Iterable[str],
) -> Iterator[tuple[int, dict[str, Any] | None, TranscriptEvent | None]]:
    """Yield (line number, object, None) per JSON-object line, or (n, None, error event).

    Blank lines are skipped. A line that is not valid JSON, or is JSON but not an object, yields
    an ``error`` event naming its 1-based line number; reading goes on with the next line.
    """
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield lineno, None, malformed_line_event(lineno, raw, f"malformed JSON ({exc.msg})")
            continue
        if not isinstance(obj, dict):
            yield lineno, None, malformed_line_event(lineno, raw, "JSON value is not an object")
            continue
        yield lineno, obj, None


def as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def as_float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def text_of_content(content: Any) -> str:
    """Text of a message content: a string, or a list of blocks with ``text`` fields."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return compact_json(content)
