"""What task.toml grants one Harbor trial: the only reader of its limits.

Memory and CPUs come from `[environment]` (`memory_mb`, or the deprecated size string
`memory = "2G"` as Harbor maps it; `cpus`), the working directory from `[environment]
workdir`, and each phase's time limit and network from its own table: `[agent]` for the
solve phase, `[verifier]` for the tests (network resolved by `toml_schema.network_setting`,
Harbor's default being public network). Invalid values fall back to the defaults here (the
audit's static checks report them); nothing exceeds the caps in `toml_schema`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from metaeval.tasks.toml_schema import MAX_CPUS, MAX_MEMORY_MB, MAX_TIMEOUT_S, network_setting

Phase = Literal["agent", "verifier"]

DEFAULT_MEMORY_MB = 2048
"""Granted when task.toml declares no memory (a bubblewrap phase always gets a limit)."""
DEFAULT_TIMEOUT_S = 600.0
"""Per phase when task.toml declares none (Harbor's default `[verifier] timeout_sec`)."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt])i?b?\s*$", re.IGNORECASE)
_MB_PER_UNIT = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


@dataclass(frozen=True)
class PhaseLimits:
    """One phase's time limit and network access."""

    timeout_s: float
    network: bool


@dataclass(frozen=True)
class TrialLimits:
    """Everything task.toml grants a trial, resolved to concrete values."""

    memory_mb: int
    cpus: int | None
    workdir: str | None
    agent: PhaseLimits
    verifier: PhaseLimits

    def phase(self, name: Phase) -> PhaseLimits:
        return self.agent if name == "agent" else self.verifier


def trial_limits(
    config: dict[str, Any],
    *,
    agent_timeout_s: float | None = None,
    verifier_timeout_s: float | None = None,
) -> TrialLimits:
    """The limits of a trial of the task whose parsed task.toml is `config`.

    `agent_timeout_s` / `verifier_timeout_s`, when given, override the declared time limits
    (as Harbor's per-run timeout overrides do).
    """
    env = config.get("environment")
    env = env if isinstance(env, dict) else {}
    workdir = env.get("workdir")
    return TrialLimits(
        memory_mb=memory_mb(config),
        cpus=_cpus(env.get("cpus")),
        workdir=workdir if isinstance(workdir, str) and workdir.startswith("/") else None,
        agent=PhaseLimits(
            timeout_s=_override(agent_timeout_s) or timeout_s(config, "agent"),
            network=network_setting(config, "agent") is not False,
        ),
        verifier=PhaseLimits(
            timeout_s=_override(verifier_timeout_s) or timeout_s(config, "verifier"),
            network=network_setting(config, "verifier") is not False,
        ),
    )


def memory_mb(config: dict[str, Any], default: int = DEFAULT_MEMORY_MB) -> int:
    """`[environment] memory_mb`, else the deprecated `memory` size string, else `default`;
    never above MAX_MEMORY_MB."""
    env = config.get("environment")
    env = env if isinstance(env, dict) else {}
    value = _whole(env.get("memory_mb"))
    if value is not None and value >= 1:
        return min(value, MAX_MEMORY_MB)
    size = _size_mb(env.get("memory"))
    if size is not None:
        return min(size, MAX_MEMORY_MB)
    return min(default, MAX_MEMORY_MB)


def timeout_s(config: dict[str, Any], section: str, default: float = DEFAULT_TIMEOUT_S) -> float:
    """`[section] timeout_sec` when valid (finite, above 0), else `default`; never above
    MAX_TIMEOUT_S."""
    table = config.get(section)
    value = table.get("timeout_sec") if isinstance(table, dict) else None
    return min(_override(value) or float(default), MAX_TIMEOUT_S)


def _override(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return min(float(value), MAX_TIMEOUT_S)


def _cpus(value: Any) -> int | None:
    count = _whole(value)
    return count if count is not None and 1 <= count <= MAX_CPUS else None


def _whole(value: Any) -> int | None:
    """An integer, or a float without a fraction (Harbor's int fields accept 512.0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return None
    return int(value)


def _size_mb(value: Any) -> int | None:
    """Megabytes of a size string such as "2G" or "512M" (Harbor's reading), or None."""
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    megabytes = int(float(match.group(1)) * _MB_PER_UNIT[match.group(2).lower()])
    return megabytes if megabytes >= 1 else None
