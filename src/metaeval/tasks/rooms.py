"""The two places a Harbor trial runs (`metaeval.tasks.trial.Backend`).

- `BwrapBackend`: the container-like bubblewrap root of `metaeval.tasks.harbor_root`. /app
  is a host copy of the task's environment/ files (Docker build files left out); each
  command is its own sandbox with the phase's network, the trial's memory as an address-space
  limit (RLIMIT_AS), its CPUs as an affinity to that many cores (a process could widen it),
  its storage as the size of /tmp and a cap on /app and /logs/verifier
  (`metaeval.sandbox.storage`), and /tests or /solution only when shown. The agent phase gets a scratch
  directory at /logs/verifier, the verifier phase the real one.

In both, a command's `env` (task.toml's `[solution.env]` or `[verifier.env]`) reaches only
that command, through its stdin (`metaeval.sandbox.stdin_env`).
- `ContainerBackend`: one fresh container of the task's image per trial (`metaeval.sandbox.
  container`), with the trial's memory (a cgroup limit), CPUs and working directory; /tests
  and /solution are copied in when first shown; the network is attached only while a phase
  that may use it runs.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path

from metaeval.sandbox.container import Container, Engine, Limits, describe_engine
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.harbor_root import run_harbor_phase, seed_app
from metaeval.tasks.limits import Phase, TrialLimits
from metaeval.tasks.trial import Backend, Room


def _phase_timeout(limits: TrialLimits, phase: Phase, timeout_s: float | None) -> float:
    limit = limits.phase(phase).timeout_s
    return limit if timeout_s is None else min(limit, timeout_s)


class BwrapRoom(Room):
    """A trial in the bubblewrap root: host directories for /app and the logs."""

    def __init__(self, task_root: Path, scratch: Path, limits: TrialLimits) -> None:
        super().__init__(limits, scratch / "verifier")
        self.task_root = task_root
        self.app = scratch / "app"
        self.agent_logs = scratch / "agent-logs"
        self.notes = seed_app(task_root, self.app)
        self.verifier_logs.mkdir()
        self.agent_logs.mkdir()

    def exec(
        self,
        command: str,
        phase: Phase,
        *,
        timeout_s: float | None = None,
        show: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        return run_harbor_phase(
            self.task_root,
            self.app,
            self.verifier_logs if phase == "verifier" else self.agent_logs,
            command,
            _phase_timeout(self.limits, phase, timeout_s),
            self.limits.phase(phase).network,
            mounts=tuple(show),
            memory_mb=self.limits.memory_mb,
            cpus=self.limits.cpus,
            task_env=self.limits.with_environment(env),
            storage_mb=self.limits.storage_mb,
        )


class BwrapBackend(Backend):
    """Trials in bubblewrap (callers check `harbor_sandbox_unavailable` first)."""

    description = "bubblewrap"

    def open(self, task_root: Path, scratch: Path, limits: TrialLimits) -> BwrapRoom:
        return BwrapRoom(task_root, scratch, limits)


class ContainerRoom(Room):
    """A trial in one container of the task's image."""

    def __init__(
        self, engine: Engine, image: str, task_root: Path, scratch: Path, limits: TrialLimits
    ) -> None:
        super().__init__(limits, scratch / "verifier")
        self.task_root = task_root
        self.verifier_logs.mkdir()
        self.verifier_logs.chmod(0o777)  # the image may run as a non-root user
        self.shown: set[str] = set()
        self.box = Container(
            engine,
            image,
            self.verifier_logs,
            Limits(
                cpus=limits.cpus,
                memory_mb=limits.memory_mb,
                network=limits.agent.network or limits.verifier.network,
                workdir=limits.workdir,
            ),
        )

    def exec(
        self,
        command: str,
        phase: Phase,
        *,
        timeout_s: float | None = None,
        show: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        for name in show:
            if name not in self.shown and (self.task_root / name).is_dir():
                self.box.copy_in(self.task_root / name, f"/{name}")
                self.shown.add(name)
        self.box.set_network(self.limits.phase(phase).network)
        return self.box.exec(
            command,
            timeout_s=_phase_timeout(self.limits, phase, timeout_s),
            env=self.limits.with_environment(env),
        )

    def write_file(self, path: str, data: bytes, timeout_s: float) -> ExecResult:
        """Write `data` to the absolute container path `path` in the agent phase, as the
        image's user (what the agent's own commands could write), creating its directory."""
        self.box.set_network(self.limits.agent.network)
        quoted = shlex.quote(path)
        script = f'mkdir -p -- "$(dirname -- {quoted})" && cat > {quoted}'
        return self.box.exec(script, timeout_s=timeout_s, data=data)

    def close(self) -> None:
        self.box.remove()


class ContainerBackend(Backend):
    """Trials in containers of one image through Docker or Podman (`ContainerError` on an
    engine failure: infrastructure, not the task)."""

    def __init__(self, engine: Engine, image: str) -> None:
        self.engine = engine
        self.image = image

    @cached_property
    def description(self) -> str:
        return describe_engine(self.engine)

    def open(self, task_root: Path, scratch: Path, limits: TrialLimits) -> ContainerRoom:
        room = ContainerRoom(self.engine, self.image, task_root, scratch, limits)
        room.header = f"[{self.description}, image {self.image}]"
        return room
