"""What task.toml grants one Harbor trial: the only reader of its limits.

Memory, storage and CPUs come from `[environment]` (`memory_mb` and `storage_mb`, or the
deprecated size strings `memory = "2G"` / `storage = "10G"` as Harbor maps them; `cpus`), the working directory from `[environment]
workdir`, and each phase's time limit and network from its own table: `[agent]` for the
solve phase, `[verifier]` for the tests (network resolved by `toml_schema.network_setting`).
Unlike Harbor, whose default is public network, a phase of a task that says nothing about the
network gets none: network access is granted only by an explicit `network_mode = "public"` /
`"allowlist"` (or the deprecated `allow_internet = true`). Invalid values fall back to the
defaults here (the audit's static checks report them); nothing exceeds the caps in
`toml_schema`.

Environment variables come from three tables of names to strings: `[environment.env]` (the
container's own, so every phase run in the room: the oracle's or null agent's solve step and
the tests), `[solution.env]` (the oracle's solve.sh) and `[verifier.env]` (the tests); a
phase's own table wins over `[environment.env]` for a name both set. As in Harbor, a value that is
exactly `${NAME}` or `${NAME:-default}` refers to a host variable, anything else is literal.
Unlike Harbor, a host variable is read only when the caller allows its name (`host_env`):
task.toml is untrusted input, and a task that names `${AWS_SECRET_ACCESS_KEY}` must not get
it. A reference that is not allowed takes its default, or leaves the variable unset; entries
that cannot be environment variables are left out. Each such decision is a note in the
trial's log, naming variables, never their values.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from metaeval.tasks.toml_schema import network_setting
from metaeval.tasks.toml_values import (
    MAX_CPUS,
    MAX_MEMORY_MB,
    MAX_STORAGE_MB,
    MAX_TIMEOUT_S,
    show_toml_value,
)

Phase = Literal["agent", "verifier"]

DEFAULT_MEMORY_MB = 2048
"""Granted when task.toml declares no memory (a bubblewrap phase always gets a limit)."""
DEFAULT_STORAGE_MB = 2048
"""Granted when task.toml declares no storage: what a phase may write (see `sandbox.storage`)."""
DEFAULT_TIMEOUT_S = 600.0
"""Per phase when task.toml declares none (Harbor's default `[verifier] timeout_sec`)."""

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
"""A variable name a POSIX shell accepts (at most 128 characters)."""
MAX_ENV_VARS = 100
"""More entries than this in one env table: the whole table is ignored."""
MAX_ENV_VALUE_CHARS = 32 * 1024
"""A longer value is left out (a kernel takes at most 128 KiB per variable)."""
# Harbor's template shape: the whole value is `${NAME}` or `${NAME:-default}`.
_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt])i?b?\s*$", re.IGNORECASE)
_MB_PER_UNIT = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


@dataclass(frozen=True)
class PhaseLimits:
    """One phase's time limit and network access (`network_declared`: False when task.toml
    says nothing about the phase's network, so `network` is metaeval's default, none)."""

    timeout_s: float
    network: bool
    network_declared: bool = True


@dataclass(frozen=True)
class PhaseEnv:
    """The variables task.toml sets for one phase, resolved, and notes on what was left out
    or taken from the host (names only). `values` may hold an allowed host secret: it is
    kept out of the repr."""

    values: Mapping[str, str] = field(default_factory=dict, repr=False)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrialLimits:
    """Everything task.toml grants a trial, resolved to concrete values."""

    memory_mb: int
    cpus: int | None
    workdir: str | None
    agent: PhaseLimits
    verifier: PhaseLimits
    solution_env: PhaseEnv = field(default_factory=PhaseEnv)  # the oracle's solve phase only
    verifier_env: PhaseEnv = field(default_factory=PhaseEnv)  # the tests
    environment_env: PhaseEnv = field(default_factory=PhaseEnv)  # every phase in the room
    storage_mb: int = DEFAULT_STORAGE_MB

    def with_environment(self, env: Mapping[str, str] | None) -> dict[str, str]:
        """`env` (a phase's variables) over `[environment.env]`: what one command gets."""
        return {**self.environment_env.values, **(env or {})}

    def phase(self, name: Phase) -> PhaseLimits:
        return self.agent if name == "agent" else self.verifier


def trial_limits(
    config: dict[str, Any],
    *,
    agent_timeout_s: float | None = None,
    verifier_timeout_s: float | None = None,
    host_env: Collection[str] = (),
    environ: Mapping[str, str] | None = None,
) -> TrialLimits:
    """The limits of a trial of the task whose parsed task.toml is `config`.

    `agent_timeout_s` / `verifier_timeout_s`, when given, override the declared time limits
    (as Harbor's per-run timeout overrides do). `host_env` names the host variables that
    `${NAME}` templates of the env tables may read (from `environ`, default os.environ).
    """
    env = config.get("environment")
    env = env if isinstance(env, dict) else {}
    workdir = env.get("workdir")
    return TrialLimits(
        memory_mb=memory_mb(config),
        storage_mb=storage_mb(config),
        cpus=_cpus(env.get("cpus")),
        workdir=workdir if isinstance(workdir, str) and workdir.startswith("/") else None,
        agent=_phase(config, "agent", agent_timeout_s),
        verifier=_phase(config, "verifier", verifier_timeout_s),
        solution_env=phase_env(config, "solution", host_env, environ),
        verifier_env=phase_env(config, "verifier", host_env, environ),
        environment_env=phase_env(config, "environment", host_env, environ),
    )


def _phase(config: dict[str, Any], name: Phase, override: float | None) -> PhaseLimits:
    """A phase's limits: network only when task.toml grants it (none when it is silent)."""
    network = network_setting(config, name)
    return PhaseLimits(
        timeout_s=_override(override) or timeout_s(config, name),
        network=network is True,
        network_declared=network is not None,
    )


def phase_env(
    config: dict[str, Any],
    section: Literal["solution", "verifier", "environment"],
    host_env: Collection[str] = (),
    environ: Mapping[str, str] | None = None,
) -> PhaseEnv:
    """`[section.env]` of task.toml as the variables of that phase (see the module
    docstring); never raises, whatever the table holds."""
    environ = os.environ if environ is None else environ
    table = config.get(section)
    if not isinstance(table, dict) or "env" not in table:
        return PhaseEnv()
    where = f"[{section}.env]"
    entries = table["env"]
    if not isinstance(entries, dict):
        return PhaseEnv(notes=(f"{where} ignored: {show_toml_value(entries)} is not a table",))
    if len(entries) > MAX_ENV_VARS:
        return PhaseEnv(
            notes=(f"{where} ignored: {len(entries)} variables (at most {MAX_ENV_VARS})",)
        )
    values: dict[str, str] = {}
    notes: list[str] = []
    allowed = set(host_env)
    for name, value in entries.items():
        label = f"{section} env {_shown_name(name)}"
        problem = _env_problem(name, value)
        if problem is not None:
            notes.append(f"{label} left out: {problem}")
            continue
        template = _TEMPLATE.fullmatch(value)
        if template is None:
            values[name] = value
            continue
        source, default = template.group(1), template.group(2)
        shown = _shown_name(source)
        if source in allowed and source in environ:
            values[name] = environ[source]
            notes.append(f"{label} = host variable {source} (allowed)")
        elif default is not None:
            values[name] = default
            notes.append(f"{label}: host variable {shown} not passed, its default used")
        else:
            why = "allowed but not set" if source in allowed else "not allowed"
            notes.append(f"{label} needs host variable {shown}, not passed ({why}): left unset")
    return PhaseEnv(values=values, notes=tuple(notes))


def _shown_name(name: Any) -> str:
    """A variable name for a note: bare when valid, else quoted, shortened and escaped to
    ASCII (no control or bidirectional character of a hostile key reaches a log)."""
    if not isinstance(name, str):
        return show_toml_value(name)
    if ENV_NAME.fullmatch(name):
        return name
    return json.dumps(name if len(name) <= 56 else name[:56] + "...")


def _env_problem(name: Any, value: Any) -> str | None:
    """Why an env entry cannot become an environment variable, or None."""
    if not isinstance(name, str) or ENV_NAME.fullmatch(name) is None:
        return "not a valid variable name"
    if not isinstance(value, str):
        return f"the value {show_toml_value(value)} is not a string"
    if "\0" in value:
        return "the value holds a NUL character"
    if len(value) > MAX_ENV_VALUE_CHARS:
        return f"the value is {len(value)} characters long (at most {MAX_ENV_VALUE_CHARS})"
    return None


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


def storage_mb(config: dict[str, Any], default: int = DEFAULT_STORAGE_MB) -> int:
    """`[environment] storage_mb`, else the deprecated `storage` size string, else `default`;
    never above MAX_STORAGE_MB."""
    env = config.get("environment")
    env = env if isinstance(env, dict) else {}
    value = _whole(env.get("storage_mb"))
    if value is None or value < 1:
        value = _size_mb(env.get("storage"))
    return min(value if value is not None else default, MAX_STORAGE_MB)


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
