"""The `task.toml` keys Harbor accepts, and the dotted keys of a parsed file it would drop.

Harbor reads task.toml with pydantic models (`TaskConfig` and the section models next to it
in `src/harbor/models/task/config.py`). Those models ignore keys they do not declare, so a
misspelt key (`[verifier] timeout = 30`, `[environment] memory_gb = 8`) is dropped without a
word and the task silently runs with the default. `unknown_keys` reports such keys.

Sources read for this table (all copies of Harbor's `src/harbor/models/task/config.py`):

- schema 1.0: the early form with `version`, `[metadata]` (free-form), `[verifier]` and
  `[agent]` `timeout_sec`, `[environment]` `build_timeout_sec`, `docker_image`, `cpus`,
  `memory_mb`, `storage_mb` and the deprecated `memory` / `storage` size strings, and
  top-level `source` (as vendored in parsewave/parsewave-harness, commit 29e9f50).
- schema 1.1: adds `[task]` (package name, description, authors, keywords), `[solution]`
  `env`, `[verifier]` `env` / `user`, `[agent]` `user`, `[environment]` `gpus`, `gpu_types`,
  `allow_internet`, `mcp_servers`, `env`, `skills_dir`, `healthcheck` (harbor fork
  LegoX/harbor, commit 73fd120).
- schema 1.4: `schema_version` (with `version` still accepted and renamed), network
  policies (`network_mode`, `allowed_hosts`) on `[environment]`, `[agent]` and
  `[verifier]` with `allow_internet` kept as a deprecated spelling, `[environment]` `os`,
  `tpu`, `workdir`, `[verifier]` `environment_mode` / `environment` / `collect`,
  top-level `artifacts`, `steps` and `multi_step_reward_strategy` (vendored in
  AlienKevin/sprint, commit 49e3cd7; NVIDIA NeMo Gym documents the same 1.4 field list in
  its Harbor mirror, nemo_gym.tasks.harbor.models). That copy also has a
  `[verifier.continuous]` table that appears in no other source, so it is treated as a
  fork addition and not accepted here.

The table is the union over these versions: a key valid in any of them is known, because
benchmarks in the wild were written against all of them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FREE = "free"
"""Marker for a free-form table: any keys are accepted below it (metadata, env maps)."""

LEAF = None
"""Marker for a scalar or array value whose inner structure is not checked."""

Schema = dict[str, Any]

_NETWORK: Schema = {"network_mode": LEAF, "allowed_hosts": LEAF}

_HEALTHCHECK: Schema = {
    "command": LEAF,
    "interval_sec": LEAF,
    "timeout_sec": LEAF,
    "start_period_sec": LEAF,
    "start_interval_sec": LEAF,
    "retries": LEAF,
}

_MCP_SERVER: Schema = {
    "name": LEAF,
    "transport": LEAF,
    "url": LEAF,
    "command": LEAF,
    "args": LEAF,
}

ENVIRONMENT_KEYS: Schema = {
    "build_timeout_sec": LEAF,
    "docker_image": LEAF,
    "os": LEAF,
    "cpus": LEAF,
    "memory_mb": LEAF,
    "storage_mb": LEAF,
    "memory": LEAF,  # deprecated size string ("2G"), mapped to memory_mb
    "storage": LEAF,  # deprecated size string, mapped to storage_mb
    "gpus": LEAF,
    "gpu_types": LEAF,
    "tpu": {"type": LEAF, "topology": LEAF},
    "allow_internet": LEAF,  # deprecated in 1.4 in favour of network_mode
    **_NETWORK,
    "mcp_servers": [_MCP_SERVER],
    "env": FREE,
    "skills_dir": LEAF,
    "healthcheck": _HEALTHCHECK,
    "workdir": LEAF,
}

_ARTIFACT: Schema = {"source": LEAF, "destination": LEAF, "exclude": LEAF, "service": LEAF}

_COLLECT: Schema = {"command": LEAF, "service": LEAF, "timeout_sec": LEAF, "user": LEAF}

VERIFIER_KEYS: Schema = {
    "timeout_sec": LEAF,
    "env": FREE,
    "user": LEAF,
    **_NETWORK,
    "environment_mode": LEAF,
    "environment": ENVIRONMENT_KEYS,
    "collect": [_COLLECT],
}

AGENT_KEYS: Schema = {"timeout_sec": LEAF, "user": LEAF, **_NETWORK}

TASK_TOML_SCHEMA: Schema = {
    "version": LEAF,  # schema 1.0 spelling of schema_version
    "schema_version": LEAF,
    "source": LEAF,
    "task": {
        "name": LEAF,
        "version": LEAF,
        "description": LEAF,
        "authors": [{"name": LEAF, "email": LEAF}],
        "keywords": LEAF,
    },
    "metadata": FREE,
    "verifier": VERIFIER_KEYS,
    "agent": AGENT_KEYS,
    "environment": ENVIRONMENT_KEYS,
    "solution": {"env": FREE},
    "multi_step_reward_strategy": LEAF,
    "multi_step_reward_mode": LEAF,  # pre-1.3 spelling, accepted and dropped by Harbor
    "steps": [
        {
            "name": LEAF,
            "agent": AGENT_KEYS,
            "verifier": VERIFIER_KEYS,
            "min_reward": LEAF,
            "healthcheck": _HEALTHCHECK,
            "artifacts": LEAF,
        }
    ],
    "artifacts": LEAF,  # strings or {source, destination, exclude, service} tables
}


def unknown_keys(config: dict[str, Any]) -> list[str]:
    """Dotted paths of the keys in a parsed task.toml that Harbor's models do not declare.

    Entries of arrays of tables are reported with their index, e.g. `steps[0].agent.foo`.
    Below a free-form table (`[metadata]`, the `env` maps) everything is accepted.
    """
    found: list[str] = []
    _walk(config, TASK_TOML_SCHEMA, "", found)
    return found


def _walk(data: dict[str, Any], schema: Schema, prefix: str, found: list[str]) -> None:
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in schema:
            found.append(path)
            continue
        sub = schema[key]
        if sub is FREE or sub is LEAF:
            if key == "artifacts" and isinstance(value, list):
                _walk_artifacts(value, path, found)
            continue
        if isinstance(sub, list):  # array of tables
            if isinstance(value, list):
                for index, item in enumerate(value):
                    if isinstance(item, dict):
                        _walk(item, sub[0], f"{path}[{index}].", found)
            continue
        if isinstance(value, dict):
            _walk(value, sub, f"{path}.", found)


def _walk_artifacts(items: list[Any], path: str, found: list[str]) -> None:
    for index, item in enumerate(items):
        if isinstance(item, dict):
            _walk(item, _ARTIFACT, f"{path}[{index}].", found)


def network_setting(config: dict[str, Any], phase: str = "environment") -> bool | None:
    """What task.toml says about network access for a phase, or None when it says nothing.

    `phase` is "environment" (the baseline), "agent" or "verifier"; the two phases use
    their own `network_mode` when set and otherwise fall back to the baseline (for the
    verifier, that of a separate `[verifier.environment]` first), as Harbor resolves it. `network_mode = "no-network"` means no network; "public" and "allowlist"
    mean some network (an allowlist cannot be enforced by a plain sandbox). The deprecated
    boolean `[environment] allow_internet` is honoured when `network_mode` is absent.
    """
    if phase not in ("environment", "agent", "verifier"):
        raise ValueError(f"unknown phase {phase!r}")
    if phase != "environment":
        section = config.get(phase)
        if isinstance(section, dict):
            verdict = _mode_verdict(section.get("network_mode"))
            if verdict is not None:
                return verdict
            if section.get("allowed_hosts"):
                return True
            if phase == "verifier":  # a separate verifier container has its own baseline
                verdict = _baseline(section.get("environment"))
                if verdict is not None:
                    return verdict
    return _baseline(config.get("environment"))


def _baseline(env: Any) -> bool | None:
    """The network baseline of an [environment]-shaped table."""
    if not isinstance(env, dict):
        return None
    verdict = _mode_verdict(env.get("network_mode"))
    if verdict is not None:
        return verdict
    if env.get("allowed_hosts"):
        return True
    allow = env.get("allow_internet")
    if isinstance(allow, bool):
        return allow
    return None


def _mode_verdict(mode: Any) -> bool | None:
    if not isinstance(mode, str):
        return None
    mode = mode.strip().lower()
    if mode == "no-network":
        return False
    if mode in ("public", "allowlist"):
        return True
    return None


# --------------------------------------------------------------------------- value checks

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
