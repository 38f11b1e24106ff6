"""A container engine for Harbor tasks: Docker or Podman through their command lines.

Each trial runs in a fresh container of its task's image (`metaeval.tasks.images` builds or
finds it): `sleep infinity` under an init as PID 1, commands through `exec`, the CPUs and
memory the trial grants, and the default network attached only while a phase that may use
it runs (`set_network`); `metaeval.tasks.rooms` copies /tests or /solution in for the phase
that may see them. No host directory is mounted: `restart` ends every process (the PID
namespace dies with its init) and keeps the filesystem, and `read_regular_files` takes
files out through the engine's tar stream, regular files only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from metaeval.sandbox.process import ExecResult
from metaeval.sandbox.stdin_env import shell_with_env

SandboxKind = Literal["auto", "docker", "podman", "bwrap"]
SANDBOX_KINDS: tuple[str, ...] = ("auto", "docker", "podman", "bwrap")
LOG_LIMIT = 64_000


@dataclass(frozen=True)
class Engine:
    """A container engine command line (`docker` or `podman`)."""

    name: str
    binary: str

    def command(self, *args: str) -> list[str]:
        return [self.binary, *args]


@lru_cache(maxsize=8)
def engine_problem(name: str) -> str | None:
    """Why the engine `name` cannot run containers here, or None when it can."""
    binary = shutil.which(name)
    if binary is None:
        return f"{name} is not installed"
    probe = ["info", "--format", "json"] if name == "podman" else ["info", "--format", "{{json .}}"]
    try:
        done = subprocess.run(
            [binary, *probe], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{name} info failed: {exc}"
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        return f"{name} cannot run containers: {detail[-1] if detail else 'exit ' + str(done.returncode)}"
    return None


def find_engine(kind: str) -> tuple[Engine | None, str | None]:
    """The engine for `--sandbox kind` ("auto": a working Docker, else Podman), or the reason
    there is none."""
    names = ["docker", "podman"] if kind == "auto" else [kind]
    reasons = []
    for name in names:
        problem = engine_problem(name)
        if problem is None:
            return Engine(name, shutil.which(name) or name), None
        reasons.append(problem)
    return None, "no container engine: " + "; ".join(reasons)


def as_text(value: str | bytes | None) -> str:
    """Captured output as text (bytes decoded, invalid UTF-8 replaced; None is empty)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


@dataclass
class Limits:
    """What task.toml grants a trial."""

    cpus: float | None = None
    memory_mb: int | None = None
    network: bool = True
    workdir: str | None = None


DEFAULT_NETWORKS = {"podman": "podman", "docker": "bridge"}
"""The network a container joins by default, per engine (what `set_network` detaches)."""


class Container:
    """One running container of a task image (a fresh one per trial)."""

    def __init__(self, engine: Engine, image: str, limits: Limits):
        self.engine = engine
        self.name = f"metaeval-{uuid.uuid4().hex[:12]}"
        self.networked = limits.network  # started with a network it may be detached from
        self.connected = limits.network
        argv = ["run", "-d", "--name", self.name, "--init"]
        if not limits.network:
            argv += ["--network", "none"]
        if limits.cpus:
            argv += ["--cpus", f"{limits.cpus:g}"]
        if limits.memory_mb:
            argv += ["--memory", f"{int(limits.memory_mb)}m"]
        if limits.workdir:
            argv += ["-w", limits.workdir]
        # `--`: an image name that starts with "-" is a name, never an option of the engine
        argv += ["--", image, "sleep", "infinity"]
        done = subprocess.run(
            engine.command(*argv), capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            self.remove()
            raise ContainerError(f"{engine.name} run failed: {(done.stderr or '').strip()[-500:]}")
        self.exec(
            "mkdir -p /logs/agent /logs/verifier && chmod 777 /logs/agent", timeout_s=60, user="0"
        )

    def set_network(self, on: bool) -> None:
        """Attach or detach the engine's default network (a container started without a
        network stays without one)."""
        if on == self.connected or (on and not self.networked):
            return
        network = DEFAULT_NETWORKS.get(self.engine.name, "bridge")
        verb = "connect" if on else "disconnect"
        self._engine_call(f"network {verb}", "network", verb, network, self.name)
        self.connected = on

    def _engine_call(self, what: str, *args: str, tail: int = 300) -> None:
        """Run one engine command on this container; a failure is a ContainerError naming
        `what` with the end of the engine's stderr."""
        done = subprocess.run(
            self.engine.command(*args), capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise ContainerError(
                f"{self.engine.name} {what} failed: {(done.stderr or '').strip()[-tail:]}"
            )

    def copy_in(self, source: Path, target: str) -> None:
        """Copy a host directory's contents to `target` in the container."""
        prepared = self.exec(f"rm -rf {target} && mkdir -p {target}", timeout_s=60, user="0")
        if not prepared.ok:
            raise ContainerError(f"cannot prepare {target}: {prepared.stderr.strip()[-300:]}")
        self._engine_call("cp", "cp", f"{Path(source)}/.", f"{self.name}:{target}", tail=500)

    def exec(
        self,
        script: str,
        *,
        timeout_s: float,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
        data: bytes | None = None,
    ) -> ExecResult:
        """Run `script` with bash -c in the container's working directory (as the image's
        user, or `user`), with `env` exported first (passed on stdin, never on the engine's
        command line or in its environment: `metaeval.sandbox.stdin_env`), or with `data`
        as its stdin (not both)."""
        start = time.monotonic()
        as_user = ["-u", user] if user else []
        if data is not None and env:
            raise ValueError("a command gets either variables or data on its stdin")
        command, stdin = shell_with_env("bash", script, env)
        stdin = data if data is not None else stdin
        keep_stdin = ["-i"] if stdin is not None else []
        argv = self.engine.command("exec", *keep_stdin, *as_user, self.name, *command)
        try:
            done = subprocess.run(
                argv,
                input=stdin,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            # The engine client is gone; what it started stays until the container is removed.
            return ExecResult(
                returncode=None,
                stdout=as_text(exc.stdout)[-LOG_LIMIT:],
                stderr=as_text(exc.stderr)[-LOG_LIMIT:],
                timed_out=True,
                duration_s=time.monotonic() - start,
                sandboxed=True,
            )
        out, err = as_text(done.stdout), as_text(done.stderr)
        return ExecResult(
            returncode=done.returncode,
            stdout=out[-LOG_LIMIT:],
            stderr=err[-LOG_LIMIT:],
            duration_s=time.monotonic() - start,
            sandboxed=True,
            stdout_bytes=len(out.encode()),
            stderr_bytes=len(err.encode()),
            stdout_truncated=len(out) > LOG_LIMIT,
            stderr_truncated=len(err) > LOG_LIMIT,
        )

    def restart(self) -> None:
        """Kill every process in the container and start it again with its filesystem kept.

        SIGKILL goes to the init at once (`-t 0`); the kernel then kills everything else in
        the container's PID namespace, however it was detached (`setsid`, `nohup`, a double
        fork, an `exec` whose client timed out). The network stays as `set_network` left it.
        """
        self._engine_call("restart", "restart", "-t", "0", self.name)

    def read_regular_files(
        self,
        directory: str,
        names: Collection[str] | None,
        max_bytes: int,
        timeout_s: float = 120,
    ) -> dict[str, bytes]:
        """The first `max_bytes` of each regular file of `names` directly in `directory`
        (`names` None: of every regular file below it, by its relative path, as long as
        their sum stays within `max_bytes`).

        Read from the engine's tar stream of the directory (`cp NAME:DIR -`), so nothing in
        the container runs and no entry is ever created on the host: a link, FIFO, device or
        directory of that name counts as absent. A missing directory gives {};
        ContainerError when the engine fails otherwise or the stream outlasts `timeout_s`.
        """
        argv = self.engine.command("cp", f"{self.name}:{directory}", "-")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        watchdog = threading.Timer(timeout_s, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None and proc.stderr is not None
            wanted = None if names is None else set(names)
            found = _regular_members(proc.stdout, wanted, max_bytes)
            while proc.stdout.read(1 << 16):  # the rest, so the engine ends on its own
                pass
            stderr = proc.stderr.read().decode("utf-8", "replace")
            code = proc.wait()
        finally:
            watchdog.cancel()
            proc.kill()
            proc.wait()
        if code < 0:
            raise ContainerError(f"{self.engine.name} cp of {directory} took over {timeout_s:g} s")
        if code != 0:
            if "no such file or directory" in stderr.lower():
                return {}
            raise ContainerError(f"{self.engine.name} cp failed: {stderr.strip()[-300:]}")
        return found

    def remove(self) -> None:
        subprocess.run(
            self.engine.command("rm", "-f", "-t", "0", self.name)
            if self.engine.name == "podman"
            else self.engine.command("rm", "-f", self.name),
            capture_output=True,
            timeout=120,
            check=False,
        )

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class ContainerError(RuntimeError):
    """The engine failed to start, copy into or run a container (infrastructure)."""


def _regular_members(stream: IO[bytes], names: set[str] | None, max_bytes: int) -> dict[str, bytes]:
    """Regular files named in `names` at the top of a tar stream's one directory (None:
    every regular file below it, while their sum stays within `max_bytes`)."""
    found: dict[str, bytes] = {}
    budget = max_bytes
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                parts = [p for p in PurePosixPath(member.name).parts if p not in (".", "/")]
                if len(parts) < 2 or not member.isreg() or ".." in parts:
                    continue
                if names is None and member.size <= budget:
                    handle = archive.extractfile(member)
                    if handle is not None:
                        found["/".join(parts[1:])] = handle.read(member.size)
                        budget -= member.size
                elif names is not None and len(parts) == 2 and parts[1] in names:
                    handle = archive.extractfile(member)
                    if handle is not None:
                        found[parts[1]] = handle.read(max_bytes)
    except tarfile.TarError:
        pass  # an empty or cut stream: the caller reads the engine's exit and message
    return found


def describe_engine(engine: Engine) -> str:
    """`podman 4.3.1` for reports."""
    try:
        done = subprocess.run(
            engine.command("version", "--format", "json"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        data = json.loads(done.stdout or "{}")
        version = (data.get("Client") or {}).get("Version") or ""
    except (OSError, ValueError, subprocess.TimeoutExpired):
        version = ""
    return f"{engine.name} {version}".strip()
