"""Reading a JSON document metaeval does not trust: capped in size and nesting, shape checked.

Bundles, releases and run directories handed to a command may come from anyone. Their JSON
files are read through `read_json` (the file through `safe_files.read_regular`: never a FIFO
or device, never a symlink leading out of the tree) and parsed by `parse_json`, which refuses
a document nested deeper than `MAX_JSON_DEPTH` (the parser's own recursion, and every
recursive walk of the value afterwards, would otherwise end in RecursionError) and, by
default, one whose top level is not an object. Every refusal is a ConfigError naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError
from metaeval.tasks.safe_files import read_regular

MAX_JSON_BYTES = 64 * 1024 * 1024
"""A JSON document larger than this is not read."""
MAX_JSON_DEPTH = 100
"""Arrays and objects nested deeper than this are refused."""

_JSON_TYPES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    type(None): "null",
}


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type ("an object", "an array", ...)."""
    return _JSON_TYPES.get(type(value), type(value).__name__)


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when arrays and objects in `value` nest more than `limit` levels (iterative)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_json(
    data: bytes | str,
    where: str,
    *,
    expect: type | None = dict,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The value of a JSON document; ConfigError naming `where` when it is not UTF-8, not
    JSON, nested deeper than `max_depth`, or (with `expect`) of another top-level type."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = json.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=where
        ) from None
    except RecursionError:
        raise ConfigError(f"JSON nested deeper than {max_depth} levels", file=where) from None
    except ValueError as exc:
        raise ConfigError(f"not valid JSON: {exc}", file=where) from None
    if nested_deeper_than(value, max_depth):
        raise ConfigError(f"JSON nested deeper than {max_depth} levels", file=where)
    if expect is not None and not isinstance(value, expect):
        wanted = _JSON_TYPES.get(expect, expect.__name__)
        raise ConfigError(
            f"expected {wanted} at the top level, found {json_type(value)}", file=where
        )
    return value


def read_json(
    path: Path | str,
    boundary: Path | str,
    *,
    expect: type | None = dict,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
    follow_inside_links: bool = False,
) -> Any:
    """`parse_json` of a file that must be a regular file inside `boundary` (by default not
    a symlink at all), at most `max_bytes` long; ConfigError naming the file otherwise."""
    try:
        data = read_regular(
            path, boundary, max_bytes=max_bytes, follow_inside_links=follow_inside_links
        )
    except OSError as exc:
        raise ConfigError(str(exc), file=str(path)) from None
    return parse_json(data, str(path), expect=expect, max_depth=max_depth)
