"""Finding a finder's answer object in what it submitted.

Real models wrap JSON: in a fenced block (```json ... ```), with a sentence before or after,
or both. The answer is taken by content, in this order, and the first that yields a JSON
object wins:

1. the whole submission is a JSON object (`how = "json"`);
2. the last fenced code block whose body is a JSON object (`"fenced"`);
3. the last JSON object embedded in the text that names at least one question id, else the
   last embedded object at all (`"embedded"`).

Nothing is repaired or guessed beyond that: text with no decodable object is `unparsable`, a
distinct outcome the record keeps (never silently read as a finder that answered nothing).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Literal

How = Literal["json", "fenced", "embedded"]

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\n(.*?)```", re.S)
_MAX_SCAN_CHARS = 2_000_000


def extract_answer_object(
    text: str, question_ids: Iterable[str] = ()
) -> tuple[dict[str, Any] | None, How | None]:
    """The answer object in `text` and how it was found, or (None, None)."""
    whole = _as_object(text.strip())
    if whole is not None:
        return whole, "json"
    for body in reversed(_FENCE.findall(text)):
        found = _as_object(body.strip())
        if found is not None:
            return found, "fenced"
    embedded = _embedded_objects(text[:_MAX_SCAN_CHARS])
    ids = set(question_ids)
    named = [obj for obj in embedded if ids & set(obj)]
    if named or embedded:
        return (named or embedded)[-1], "embedded"
    return None, None


def _as_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _embedded_objects(text: str) -> list[dict[str, Any]]:
    """Top-level JSON objects found left to right (an object inside another is not listed)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except (ValueError, RecursionError):
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        index = text.find("{", end)
    return found
