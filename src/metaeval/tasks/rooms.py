"""The two places a Harbor trial runs (`metaeval.tasks.trial.Backend`).

- `BwrapBackend`: the container-like bubblewrap root of `metaeval.tasks.harbor_root`. /app
  is a host copy of the task's environment/ files (Docker build files left out); each
  command is its own sandbox with the phase's network, the trial's memory as an address-space
  limit (RLIMIT_AS), its CPUs as an affinity to that many cores (a process could widen it),
  its storage as the size of /tmp and a cap on /app and /logs/verifier
  (`metaeval.sandbox.storage`), and /tests or /solution only when shown. The agent phase gets a scratch
  directory at /logs/verifier, the verifier phase the real one. Each command is its own PID
  namespace, so nothing it started outlives it: no process of the agent phase runs when the
  tests do.

In both, a command's `env` (task.toml's `[solution.env]` or `[verifier.env]`) reaches only
that command, through its stdin (`metaeval.sandbox.stdin_env`).
- `ContainerBackend`: one fresh container of the task's image per trial (`metaeval.sandbox.
  container`), with the trial's memory (a cgroup limit), CPUs and working directory; /tests
  and /solution are copied in when first shown; the network is attached only while a phase
  that may use it runs. Before the tests the container is restarted (every process the
  agent phase left is killed, its files stay) and /logs/verifier is made afresh by root;
  afterwards the reward files are taken out through the engine's tar stream
  (`Container.read_regular_files`). No host directory is mounted in the container.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path, PurePosixPath

from metaeval.sandbox.container import (
    Container,
    ContainerError,
    Engine,
    Limits,
    describe_engine,
)
from metaeval.sandbox.environment import MAX_READ_BYTES, WorkspaceError
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.app_paths import APP_DIR, app_file, app_relative, write_app_file
from metaeval.tasks.harbor_root import run_harbor_phase, seed_app
from metaeval.tasks.limits import Phase, TrialLimits
from metaeval.tasks.reward import MAX_REWARD_BYTES, REWARD_JSON, REWARD_TXT
from metaeval.tasks.safe_files import UnsafeFileError, read_regular
from metaeval.tasks.trial import Backend, Room
from metaeval.tasks.verifier_cases import MAX_REPORT_BYTES, REPORT_FILES

VERIFIER_LOGS = "/logs/verifier"
WRITE_TIMEOUT_S = 60.0
SNAPSHOT_BYTES = 64 * 1024 * 1024
FRESH_VERIFIER_LOGS = (
    "if [ -L /logs ] || { [ -e /logs ] && [ ! -d /logs ]; }; then rm -f /logs; fi; "
    f"rm -rf {VERIFIER_LOGS} && mkdir -p {VERIFIER_LOGS} && chmod 777 {VERIFIER_LOGS}"
)
"""Run as root after the restart: a root-owned /logs/verifier nothing of the agent made (it
is 0777 because the tests may run as the image's non-root user)."""


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

    def read_file(self, path: str) -> bytes:
        target, shown = app_file(self.app, path, make_dirs=False)
        try:
            return read_regular(
                target, self.app, max_bytes=MAX_READ_BYTES, follow_inside_links=False
            )
        except UnsafeFileError as exc:
            raise WorkspaceError(f"{shown}: {exc}") from None

    def write_file(self, path: str, data: bytes) -> str:
        """Written on the host, refusing any symlink on the way (one made inside the sandbox
        may point anywhere on the host)."""
        return write_app_file(self.app, path, data)

    def app_snapshot(self, dest: Path) -> Path:
        return self.app

    def end_agent_phase(self) -> None:
        """Nothing to kill: each agent command ran in its own PID namespace, which ended
        with it; the tests get `verifier_logs`, which no agent command had bound."""


class BwrapBackend(Backend[BwrapRoom]):
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
        self.shown: set[str] = set()
        self.box = Container(
            engine,
            image,
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

    def end_agent_phase(self) -> None:
        """Restart the container (killing whatever the agent left running), then make
        /logs/verifier afresh as root, and check from outside, the way the reward is read
        later, that no reward file is left (the agent may have replaced `rm` or `mkdir`)."""
        self.box.restart()
        fresh = self.box.exec(FRESH_VERIFIER_LOGS, timeout_s=60, user="0")
        if not fresh.ok:
            raise ContainerError(f"cannot make {VERIFIER_LOGS}: {fresh.stderr.strip()[-300:]}")
        left = self.box.read_regular_files(VERIFIER_LOGS, (REWARD_TXT, REWARD_JSON), 1)
        if left:
            raise ContainerError(
                f"{VERIFIER_LOGS} still holds {', '.join(sorted(left))} after it was made "
                "afresh (the container's own tools were changed): the tests are not run"
            )

    def collect_verifier_logs(self) -> None:
        """Copy the tests' reward files and per-test reports to `verifier_logs`, one byte
        past their size cap at most (so an oversized file is still refused as one)."""
        names = (REWARD_TXT, REWARD_JSON, *REPORT_FILES)
        cap = max(MAX_REWARD_BYTES, MAX_REPORT_BYTES) + 1  # each reader refuses past its own
        found = self.box.read_regular_files(VERIFIER_LOGS, names, cap)
        for name, data in found.items():
            (self.verifier_logs / name).write_bytes(data)

    def read_file(self, path: str) -> bytes:
        """Read through the engine's tar stream (nothing runs in the container)."""
        shown = PurePosixPath(APP_DIR) / app_relative(path)
        found = self.box.read_regular_files(str(shown.parent), (shown.name,), MAX_READ_BYTES + 1)
        if shown.name not in found:
            raise WorkspaceError(f"{shown}: no such regular file")
        if len(found[shown.name]) > MAX_READ_BYTES:
            raise WorkspaceError(f"{shown} is larger than {MAX_READ_BYTES} bytes, not read")
        return found[shown.name]

    def app_snapshot(self, dest: Path) -> Path:
        """Copied out through the engine's tar stream: regular files only, at most
        SNAPSHOT_BYTES in all (links, FIFOs and devices, and files past the cap, left out)."""
        files = self.box.read_regular_files(APP_DIR, None, SNAPSHOT_BYTES)
        dest.mkdir(parents=True)
        for rel, data in files.items():
            target = dest / rel
            with contextlib.suppress(OSError):  # a name both file and directory: left out
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        return dest

    def write_file(self, path: str, data: bytes) -> str:
        """Written inside, as the image's user (what the agent's own commands could write),
        where a symlink reaches only the container; OSError when the write fails."""
        shown = f"{APP_DIR}/{app_relative(path).as_posix()}"
        self.box.set_network(self.limits.agent.network)
        quoted = shlex.quote(shown)
        script = (
            f"if [ -d {quoted} ]; then exit 3; fi; "
            f'mkdir -p -- "$(dirname -- {quoted})" && cat > {quoted}'
        )
        done = self.box.exec(script, timeout_s=WRITE_TIMEOUT_S, data=data)
        if done.returncode == 3:
            raise WorkspaceError(f"{shown} is a directory")
        if not done.ok:
            raise OSError(0, (done.stderr or done.stdout).strip()[-300:] or "timed out")
        return shown

    def close(self) -> None:
        self.box.remove()


class ContainerBackend(Backend[ContainerRoom]):
    """Trials in containers of one image through Docker or Podman (`ContainerError` on an
    engine failure: infrastructure, not the task)."""

    def __init__(self, engine: Engine, image: str, *, tag: str | None = None) -> None:
        self.engine = engine
        self.image = image  # what runs: an id, or a name
        self.tag = tag if tag and tag != image else None  # the name `image` was resolved from

    @property
    def shown_image(self) -> str:
        """The image for people: `<tag> (id <image>)`, or the image alone."""
        return f"{self.tag} (id {self.image})" if self.tag else self.image

    @cached_property
    def description(self) -> str:
        return describe_engine(self.engine)

    def open(self, task_root: Path, scratch: Path, limits: TrialLimits) -> ContainerRoom:
        room = ContainerRoom(self.engine, self.image, task_root, scratch, limits)
        room.header = f"[{self.description}, image {self.shown_image}]"
        return room
