"""The `task.toml` keys Harbor accepts, and the dotted keys of a parsed file it would drop.

(The values those keys may take are checked in `toml_values`.)

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
