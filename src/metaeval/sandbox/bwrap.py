"""Bubblewrap detection, and the workspace sandbox built on the one policy (`policy.py`).

A workspace command sees the policy's allowlisted root (system directories, a few /etc
entries, the Python installations), a private /tmp, a minimal /dev, its own /proc and PID
namespace, no network unless asked for, and runs as the unprivileged `sandbox` user. The
workspace is bound at its own path, writable or read-only, and is the working directory.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from metaeval.sandbox.policy import (
    Mount,
    SandboxSpec,
    bwrap_argv,
    bwrap_binary,
    probe,
    relay_argv,
    sandbox_environment,
)
from metaeval.sandbox.python_env import sandbox_path, task_python_prefixes

logger = logging.getLogger("metaeval.sandbox")

FORCE_FALLBACK_ENV = "METAEVAL_NO_BWRAP"
"""Set to 1 to run commands as plain subprocesses even when bubblewrap works."""

NOT_FOUND_WARNING = (
    "metaeval: bubblewrap (bwrap) not found; commands run as plain subprocesses "
    "without isolation (apt-get install bubblewrap)"
)

SECRET_MARKERS = ("KEY", "TOKEN", "SECRET")
SANDBOX_HOME = "/tmp"

_warned = False


@functools.cache
def _probe(binary: str) -> tuple[bool, str]:
    """Run a no-op through bwrap with the namespace flags real runs use (cached per process)."""
    return probe(binary, userns=False)


def bwrap_available() -> bool:
    """True when bwrap is installed and can actually create a sandbox on this machine.

    Some containers ship the binary but forbid the namespaces it needs; the result of the
    trial run is cached per process.
    """
    binary = bwrap_binary()
    return binary is not None and _probe(binary)[0]


def fallback_forced() -> bool:
    """True when METAEVAL_NO_BWRAP asks for the unsandboxed fallback."""
    return os.environ.get(FORCE_FALLBACK_ENV, "").strip().lower() not in ("", "0", "false", "no")


def use_bwrap() -> bool:
    """Decide whether to sandbox with bwrap now; warns once per process when not."""
    if not fallback_forced() and bwrap_available():
        return True
    _warn_fallback_once()
    return False


def _warn_fallback_once() -> None:
    global _warned
    if _warned:
        return
    _warned = True
    binary = bwrap_binary()
    if fallback_forced():
        message = (
            f"metaeval: {FORCE_FALLBACK_ENV} is set; commands run as plain subprocesses "
            "without isolation"
        )
    elif binary is None:
        message = NOT_FOUND_WARNING
    else:
        reason = _probe(binary)[1]
        message = (
            f"metaeval: bubblewrap (bwrap) cannot create a sandbox here ({reason}); "
            "commands run as plain subprocesses without isolation"
        )
    logger.warning(message)


def build_bwrap_argv(
    workspace_path: Path,
    writable: bool,
    network: bool,
    extra_ro_binds: Iterable[Path | str] = (),
    extra_rw_binds: Iterable[Path | str] = (),
    *,
    status_fd: bool = False,
) -> list[str]:
    """The bwrap prefix for running a command in `workspace_path`; append the command argv.

    The policy's allowlisted root, a stdlib-only Python (the same as a task root's, never
    metaeval's own venv or checkout), the workspace bound at its
    own path (writable or read-only) as the working directory. Each path of
    `extra_ro_binds` is bound read-only at its own path (e.g. an agent CLI's install
    directory); each of `extra_rw_binds` writable (e.g. a private HOME). No network unless
    `network`. The result ends with `--`, so the command may start with a dash. `status_fd`:
    see `policy.bwrap_argv` (for an argv `run_process` starts).
    """
    return bwrap_argv(
        workspace_spec(workspace_path, writable, network, extra_ro_binds, extra_rw_binds),
        status_fd=status_fd,
    )


def workspace_spec(
    workspace_path: Path,
    writable: bool,
    network: bool,
    extra_ro_binds: Iterable[Path | str] = (),
    extra_rw_binds: Iterable[Path | str] = (),
    env: Mapping[str, str] | None = None,
) -> SandboxSpec:
    """The policy for a workspace command (see `build_bwrap_argv`)."""
    ws = str(Path(workspace_path).resolve())
    mounts = [Mount(ws, writable=writable)]
    mounts += [Mount(str(Path(p).resolve())) for p in extra_ro_binds]
    mounts += [Mount(str(Path(p).resolve()), writable=True) for p in extra_rw_binds]
    return SandboxSpec(
        mounts=mounts,
        network=network,
        chdir=ws,
        env=dict(env or {}),
        python_prefixes=task_python_prefixes(),
    )


def is_secret_name(name: str) -> bool:
    """True for variable names that look like credentials (KEY, TOKEN, SECRET)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def sandbox_env(explicit: Mapping[str, str] | None = None, home: str = SANDBOX_HOME) -> dict:
    """The environment of a sandboxed command: the policy's base, HOME, then `explicit`.

    PATH starts with the stdlib-only Python's bin. Host variables are not inherited (only
    locale and terminal settings); passing a variable in `explicit` is the only way to get
    a credential into a command.
    """
    env = sandbox_environment(SandboxSpec(env={"PATH": sandbox_path()}, home=home))
    env.update(explicit or {})
    return env


def wrap_command(
    spec: SandboxSpec, argv: list[str], *, status_fd: bool = False
) -> tuple[list[str], dict[str, str], bool]:
    """(argv, env, sandboxed) for running `argv` under `spec`; `status_fd` puts bwrap's
    `--json-status-fd` placeholder in (`process.StatusPipe` fills it and tells a sandbox that
    never started).

    With a usable bwrap the argv gets the policy's prefix; without one (or with
    METAEVAL_NO_BWRAP set) the command runs as a plain subprocess, warned once, but its
    environment is still the policy's, so no host variable leaks either way. A spec with
    `services` or `published` runs the command behind the relay (in the fallback too, where
    its ports are the host's).
    """
    env = sandbox_environment(spec)
    relay = relay_argv(spec)
    if use_bwrap():
        return [*bwrap_argv(spec, status_fd=status_fd), *relay, *argv], env, True
    return [*relay, *argv], env, False
