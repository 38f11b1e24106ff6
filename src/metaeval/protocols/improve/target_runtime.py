"""Where a candidate target runs: its sandbox (worktree and metaeval read-only, no network,
answer keys covered) and the clients through which the harness drives its PACT server."""

from __future__ import annotations

import os
import queue
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from metaeval.protocols.improve.pact.launcher import launch
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.sandbox.policy import (
    Mount,
    SandboxSpec,
    metaeval_source_dirs,
    running_python_prefixes,
)
from metaeval.tasks.safe_files import is_inside


def sealed_paths(tasks: list[Path], visible: list[str]) -> list[str]:
    """Directories holding answer keys that lie inside a path the target's sandbox mounts
    (`visible`): the run's suites (solutions and tests included) and every copy of the
    examples bundled with metaeval (`metaeval/_examples` in an installed package, on any
    `sys.path` entry). The sandbox covers each, so no candidate can read an answer key."""
    roots = {os.path.realpath(t) for t in tasks} | {os.path.realpath(t.parent) for t in tasks}
    for entry in sys.path:
        bundled = os.path.join(entry or ".", "metaeval", "_examples")
        if os.path.isdir(bundled):
            roots.add(os.path.realpath(bundled))
    sealed = {r for r in roots if any(is_inside(v, r) for v in visible)}
    # cover a suite root once rather than each of its tasks
    return sorted(r for r in sealed if not any(r.startswith(o + "/") for o in sealed))


def target_sandbox(
    worktree: Path, sealed: Sequence[str] = (), services: tuple[tuple[int, str], ...] = ()
) -> SandboxSpec:
    """The sandbox a target's PACT server runs in: the candidate's worktree and metaeval's
    source read-only, the running Python, a private /tmp as HOME, no host variables but the
    declared ones, and no network: the harness reaches the server through a Unix socket the
    launcher publishes, and the server reaches its model through `services` (the harness's
    model socket on a loopback port, `TargetModelService.services`)."""
    worktree = worktree.resolve()
    mounts = [Mount(str(worktree)), *(Mount(d) for d in metaeval_source_dirs())]
    return SandboxSpec(
        mounts=mounts,
        network=False,
        chdir=str(worktree),
        python_prefixes=running_python_prefixes(),
        hidden=list(sealed),
        services=services,
    )


def target_visible_roots() -> list[str]:
    """Host directories the target's sandbox mounts besides the worktree."""
    return [*metaeval_source_dirs(), *running_python_prefixes()]


class LeasedClient:
    """A PACT client bound to a server taken from `pool`; `release()` gives the server back."""

    def __init__(self, pool: queue.SimpleQueue, timeout_s: float):
        self._pool = pool
        self._server = pool.get()
        self._client = self._server.client(timeout_s=timeout_s)

    def reset(self, request: Any) -> Any:
        return self._client.reset(request)

    def act(self, request: Any) -> Any:
        return self._client.act(request)

    def release(self) -> None:
        if self._server is not None:
            self._pool.put(self._server)
            self._server = None


class EpisodeServer:
    """A client factory for remote workers: each call launches the candidate's PACT server
    for one episode (log under `log_dir`); the returned client's `release()` stops it."""

    def __init__(
        self,
        profile: SystemProfile,
        env: dict[str, str],
        worktree: Path,
        log_dir: Path,
        timeout_s: float,
        sealed: Sequence[str] = (),
        services: tuple[tuple[int, str], ...] = (),
    ):
        self.profile, self.env, self.worktree = profile, env, worktree
        self.log_dir, self.timeout_s, self.sealed = log_dir, timeout_s, list(sealed)
        self.services = services

    def __call__(self) -> _OwnedClient:
        name = f"server-{os.getpid()}-{time.monotonic_ns()}.log"
        server = launch(
            self.profile,
            log_path=self.log_dir / name,
            extra_env=self.env,
            sandbox=target_sandbox(self.worktree, self.sealed, self.services),
        )
        return _OwnedClient(server, self.timeout_s)


class _OwnedClient:
    """A PACT client that owns its server: `release()` stops it."""

    def __init__(self, server: Any, timeout_s: float):
        self._server = server
        self._client = server.client(timeout_s=timeout_s)

    def reset(self, request: Any) -> Any:
        return self._client.reset(request)

    def act(self, request: Any) -> Any:
        return self._client.act(request)

    def release(self) -> None:
        self._server.stop()
