"""Where a key of task.toml is written: dotted key paths -> line numbers, for evidence."""

from __future__ import annotations

import re
from functools import cached_property

_TOML_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(
    r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*="
)
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")


def _toml_key_parts(key: str) -> list[str]:
    parts = re.findall(r"\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+", key)
    return [p.strip("\"'") for p in parts]


def toml_key_lines(lines: list[str]) -> dict[str, int]:
    """Dotted key (and table) paths of a task.toml text -> 1-based line of first appearance.

    Arrays of tables get their index (`steps[0].agent`), as `toml_schema.unknown_keys` names
    them. Keys of one-line inline tables are included (`environment.tpu.type`).
    """
    found = KeyLines()
    table: list[str] = []
    array_counts: dict[str, int] = {}
    in_multiline = ""
    for number, line in enumerate(lines, 1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = ""
            continue
        header = _TOML_HEADER.match(line)
        if header:
            parts = _toml_key_parts(header.group(2))
            dotted = ".".join(parts)
            if header.group(1) == "[[":
                index = array_counts.get(dotted, 0)
                array_counts[dotted] = index + 1
                parts = parts[:-1] + [f"{parts[-1]}[{index}]"]
            table = _resolve_table(parts, array_counts)
            found.setdefault(".".join(table), number)
            continue
        key = _TOML_KEY.match(line)
        if not key:
            continue
        path = ".".join(table + _toml_key_parts(key.group(1)))
        found.setdefault(path, number)
        rest = line[key.end() :]
        for quote in ('"""', "'''"):
            if rest.count(quote) % 2 == 1:
                in_multiline = quote
        if "{" in rest:
            for inner in _INLINE_KEY.finditer(rest):
                found.setdefault(f"{path}.{inner.group(1).strip(chr(34))}", number)
    return found


def _resolve_table(parts: list[str], array_counts: dict[str, int]) -> list[str]:
    """Give a sub-table of an array of tables its parent's current index: [steps.agent]."""
    resolved: list[str] = []
    for index, part in enumerate(parts):
        resolved.append(part)
        prefix = ".".join(p.split("[", 1)[0] for p in resolved)
        if index < len(parts) - 1 and prefix in array_counts and "[" not in part:
            resolved[-1] = f"{part}[{array_counts[prefix] - 1}]"
    return resolved


class KeyLines(dict[str, int]):
    """`toml_key_lines` output that also indexes the keys without array indexes (built once),
    so looking up many keys stays linear in their number."""

    @cached_property
    def plain(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for key, line in self.items():
            index.setdefault(_ARRAY_INDEX.sub("", key), line)
        return index


_ARRAY_INDEX = re.compile(r"\[\d+\]")


def toml_line_for(key_lines: dict[str, int], dotted: str) -> int | None:
    """The line of a dotted key, trying the exact path, then without array indexes."""
    if dotted in key_lines:
        return key_lines[dotted]
    plain = _ARRAY_INDEX.sub("", dotted)
    if isinstance(key_lines, KeyLines):
        return key_lines.plain.get(plain)
    for key, line in key_lines.items():
        if _ARRAY_INDEX.sub("", key) == plain:
            return line
    return None
