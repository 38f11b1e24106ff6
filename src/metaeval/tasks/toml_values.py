"""Values of the `task.toml` keys Harbor accepts: their types and plausible ranges.

`value_problems` reports a known key whose value Harbor's models would reject or coerce (a
timeout of "60", `cpus = 0`, a misspelt `network_mode`); `toml_schema.unknown_keys` reports
the keys themselves. The ceilings (`MAX_MEMORY_MB`, ...) are also what metaeval grants a
task phase, whatever task.toml asks for.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_MEMORY_MB = 64 * 1024
"""The largest memory limit (MB) metaeval grants a task phase, whatever task.toml says."""
MAX_STORAGE_MB = 1024 * 1024
"""The most a task phase may write (MB), whatever task.toml says."""
MAX_TIMEOUT_S = 24 * 3600.0
"""The longest time limit (s) metaeval grants a task phase, whatever task.toml says."""
MAX_CPUS = 4096
MAX_SIZE_MB = 1024 * 1024 * 1024
"""Upper ends of the plausible ranges (a petabyte of memory or storage is a typo or an attack)."""
NETWORK_MODES = ("public", "no-network", "allowlist")
_SIZE_STRING = re.compile(r"^\s*\d+(\.\d+)?\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
SHOWN_VALUE_CHARS = 60


@dataclass(frozen=True)
class ValueProblem:
    """A task.toml value of the wrong type or outside its range, as Harbor's models read it."""

    key: str  # dotted path, e.g. "environment.memory_mb" or "steps[0].agent.timeout_sec"
    value: Any
    expected: str  # e.g. "a number of seconds greater than 0"

    @property
    def shown(self) -> str:
        """The value as written in TOML (shortened)."""
        return show_toml_value(self.value)

    def __str__(self) -> str:
        return f"{self.key} = {self.shown} (expected {self.expected})"


def show_toml_value(value: Any) -> str:
    """A TOML-like rendering of a parsed value, at most SHOWN_VALUE_CHARS characters."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = (
            "nan"
            if math.isnan(value)
            else ("inf" if value > 0 else "-inf")
            if math.isinf(value)
            else repr(value)
        )
    elif isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, list):
        text = (
            "["
            + ", ".join(show_toml_value(v) for v in value[:8])
            + (", ..." if len(value) > 8 else "")
            + "]"
        )
    elif isinstance(value, dict):
        text = (
            "{" + ", ".join(f"{k} = {show_toml_value(v)}" for k, v in list(value.items())[:8]) + "}"
        )
    else:
        text = str(value)
    return text if len(text) <= SHOWN_VALUE_CHARS else text[: SHOWN_VALUE_CHARS - 3] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _seconds(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and value > 0


def _seconds_or_zero(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and value >= 0


def _string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _string_table(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


Rule = tuple[Callable[[Any], bool], str]

_SECONDS: Rule = (_seconds, "a number of seconds greater than 0")
_TEXT: Rule = (lambda v: isinstance(v, str), "a string")
_NETWORK_RULES: dict[str, Rule] = {
    "network_mode": (
        lambda v: v in NETWORK_MODES,
        "one of " + ", ".join(f'"{m}"' for m in NETWORK_MODES),
    ),
    "allowed_hosts": (_string_list, "a list of host names"),
}
ENVIRONMENT_RULES: dict[str, Rule] = {
    "build_timeout_sec": _SECONDS,
    "docker_image": _TEXT,
    "os": _TEXT,
    "cpus": (
        lambda v: _is_int(v) and 1 <= v <= MAX_CPUS,
        f"a whole number of CPUs from 1 to {MAX_CPUS}",
    ),
    "memory_mb": (
        lambda v: _is_int(v) and 1 <= v <= MAX_SIZE_MB,
        f"a whole number of megabytes from 1 to {MAX_SIZE_MB}",
    ),
    "storage_mb": (
        lambda v: _is_int(v) and 1 <= v <= MAX_SIZE_MB,
        f"a whole number of megabytes from 1 to {MAX_SIZE_MB}",
    ),
    "memory": (lambda v: isinstance(v, str) and bool(_SIZE_STRING.match(v)), 'a size such as "2G"'),
    "storage": (
        lambda v: isinstance(v, str) and bool(_SIZE_STRING.match(v)),
        'a size such as "10G"',
    ),
    "gpus": (lambda v: _is_int(v) and v >= 0, "a whole number of GPUs, at least 0"),
    "gpu_types": (_string_list, "a list of GPU type names"),
    "allow_internet": (lambda v: isinstance(v, bool), "true or false"),
    "env": (_string_table, "a table of string values"),
    "skills_dir": _TEXT,
    "workdir": _TEXT,
    **_NETWORK_RULES,
}
HEALTHCHECK_RULES: dict[str, Rule] = {
    "command": (lambda v: isinstance(v, str) or _string_list(v), "a command string or list"),
    "interval_sec": _SECONDS,
    "timeout_sec": _SECONDS,
    "start_period_sec": (_seconds_or_zero, "a number of seconds, at least 0"),
    "start_interval_sec": _SECONDS,
    "retries": (lambda v: _is_int(v) and v >= 0, "a whole number, at least 0"),
}
PHASE_RULES: dict[str, Rule] = {
    "timeout_sec": _SECONDS,
    "env": (_string_table, "a table of string values"),
    "user": (lambda v: isinstance(v, str) or _is_int(v), "a user name or id"),
    **_NETWORK_RULES,
}
SOLUTION_RULES: dict[str, Rule] = {"env": (_string_table, "a table of string values")}


def value_problems(config: dict[str, Any]) -> list[ValueProblem]:
    """Values of known task.toml keys that have the wrong type or lie outside their range.

    Types follow Harbor's task models (timeouts are float seconds, cpus / memory_mb /
    storage_mb / gpus integers, allow_internet a boolean, network_mode one of three words);
    ranges are what a runnable task needs (a timeout above 0 and finite, at least one CPU
    and one MB). Harbor's pydantic models would coerce a string such as "60" into a number
    or "yes" into true; a string where TOML has a native type is still reported, because
    other readers of task.toml (and metaeval itself) do not coerce.
    """
    found: list[ValueProblem] = []
    for name in ("environment", "agent", "verifier"):
        table = config.get(name)
        if isinstance(table, dict):
            _check_phase(table, name, found)
        elif name in config:
            found.append(ValueProblem(name, table, "a table"))
    solution = config.get("solution")
    if isinstance(solution, dict):
        _check_table(solution, SOLUTION_RULES, "solution", found)
    elif "solution" in config:
        found.append(ValueProblem("solution", solution, "a table"))
    steps = config.get("steps")
    if isinstance(steps, list):
        for index, step in enumerate(steps):
            if not isinstance(step, dict):
                continue
            for name in ("agent", "verifier"):
                table = step.get(name)
                if isinstance(table, dict):
                    _check_phase(table, f"steps[{index}].{name}", found)
    return found


def _check_phase(table: dict[str, Any], path: str, found: list[ValueProblem]) -> None:
    is_environment = path == "environment" or path.endswith(".environment")
    rules = ENVIRONMENT_RULES if is_environment else PHASE_RULES
    _check_table(table, rules, path, found)
    health = table.get("healthcheck")
    if is_environment and isinstance(health, dict):
        _check_table(health, HEALTHCHECK_RULES, f"{path}.healthcheck", found)
    inner = table.get("environment")
    if path.endswith("verifier") and isinstance(inner, dict):
        _check_phase(inner, f"{path}.environment", found)


def _check_table(
    table: dict[str, Any], rules: dict[str, Rule], path: str, found: list[ValueProblem]
) -> None:
    for key, (accepts, expected) in rules.items():
        if key in table and not accepts(table[key]):
            found.append(ValueProblem(f"{path}.{key}", table[key], expected))
