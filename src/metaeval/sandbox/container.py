"""A container backend for Harbor tasks: Docker or Podman through their command lines.

What Harbor does with a task's environment, done here with `docker`/`podman`:

- the image is built from environment/Dockerfile with environment/ as the build context
  (`--pull=never`: nothing is fetched implicitly), or taken from `[environment]
  docker_image`. Built images are tagged `localhost/metaeval-env:<digest>`, the sha256 of
  every file under environment/, so an unchanged environment is built once;
- each trial runs in a fresh container of that image (`sleep infinity` as PID 1, commands
  through `exec`), with the CPUs and memory the trial grants, the host's verifier log
  directory mounted at /logs/verifier, and the default network attached only while a phase
  that may use it runs (`set_network`); `metaeval.tasks.rooms` copies /tests or /solution
  in for the phase that may see them.

Failures are sorted by cause. `ImageOutcome.status` is "ok", "task" (the task's own build
is broken: a COPY source that is not there, a Dockerfile syntax error, a RUN step that
fails; the build log is the evidence) or "infra" (no engine, a base image this machine
cannot get, a build that needs a network it does not have): infrastructure is never a task
defect.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from metaeval.sandbox.process import ExecResult
from metaeval.sandbox.stdin_env import shell_with_env
from metaeval.tasks.safe_files import walk_tree

SandboxKind = Literal["auto", "docker", "podman", "bwrap"]
SANDBOX_KINDS: tuple[str, ...] = ("auto", "docker", "podman", "bwrap")
IMAGE_REPO = "localhost/metaeval-env"
DEFAULT_BUILD_TIMEOUT_S = 900.0
LOG_LIMIT = 64_000

# A base image or registry the build could not reach: the machine's problem, not the task's.
_INFRA_BUILD = re.compile(
    r"image not known|manifest unknown|pull access denied|repository does not exist|"
    r"failed to resolve|no such image|requested access to the resource is denied|"
    r"unable to pull|error pulling image|toomanyrequests|"
    r"Temporary failure in name resolution|Could not resolve host|Network is unreachable|"
    r"Failed to establish a new connection|Could not connect to|connection refused|"
    r"no space left on device|cannot allocate memory|permission denied while trying to connect",
    re.I,
)


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


def environment_digest(environment: Path) -> str:
    """sha256 over the relative path and bytes of every file under environment/ (links by
    their text, never followed; walked iteratively, so any depth is fine)."""
    digest = hashlib.sha256()
    for entry in walk_tree(environment):
        if entry.kind == "dir":
            continue
        digest.update(entry.rel.encode() + b"\0" + entry.kind.encode() + b"\0")
        if entry.kind == "file":
            with open(entry.path, "rb") as handle:
                for block in iter(functools.partial(handle.read, 1 << 20), b""):
                    digest.update(block)
        else:
            digest.update(entry.detail.encode())
        digest.update(b"\0")
    return digest.hexdigest()


@dataclass
class ImageOutcome:
    """The image a task runs in, or why there is none."""

    status: Literal["ok", "task", "infra"]
    image: str | None = None
    log: str = ""
    reason: str = ""
    cached: bool = False


def image_exists(engine: Engine, image: str) -> bool:
    args = ["image", "exists", image] if engine.name == "podman" else ["image", "inspect", image]
    done = subprocess.run(engine.command(*args), capture_output=True, timeout=60, check=False)
    return done.returncode == 0


STAND_IN_LABEL = "org.metaeval.stand-in-for"


def _short_name(ref: str) -> str:
    """`docker.io/library/python:3.11-slim` and `python:3.11-slim` name the same image."""
    for prefix in ("docker.io/library/", "docker.io/", "library/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    last = ref.rsplit("/", 1)[-1]
    return ref if ":" in last or "@" in last else ref + ":latest"


def stand_in_images(engine: Engine, refs: list[str]) -> list[str]:
    """Those of `refs` that are local stand-ins for another image (not the image itself).

    An image made offline to play `python:3.11-slim` (scripts/container-base-image.sh) says
    so in its `org.metaeval.stand-in-for` label; what runs in it only approximates the task's
    environment. The same image under its own name is not a stand-in."""
    found: list[str] = []
    for ref in refs:
        done = subprocess.run(
            engine.command(
                "image",
                "inspect",
                "--format",
                f'{{{{index .Config.Labels "{STAND_IN_LABEL}"}}}}',
                ref,
            ),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        label = done.stdout.strip() if done.returncode == 0 else ""
        names = {_short_name(n.strip()) for n in label.split(",") if n.strip()}
        if _short_name(ref) in names:
            found.append(ref)
    return found


def ensure_image(
    engine: Engine,
    task_root: Path,
    docker_image: str | None,
    *,
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
) -> ImageOutcome:
    """Build (or find) the image of one task; see the module docstring for the outcomes."""
    environment = Path(task_root) / "environment"
    dockerfile = environment / "Dockerfile"
    if not dockerfile.is_file():
        if docker_image:
            if image_exists(engine, docker_image):
                return ImageOutcome("ok", docker_image, cached=True)
            return ImageOutcome(
                "infra",
                reason=f"image {docker_image} is not present locally and no registry is used",
            )
        return ImageOutcome("infra", reason="the task has no environment/Dockerfile")
    tag = f"{IMAGE_REPO}:{environment_digest(environment)[:20]}"
    if image_exists(engine, tag):
        return ImageOutcome("ok", tag, cached=True)
    argv = engine.command(
        "build", "--pull=never", "-t", tag, "-f", str(dockerfile), str(environment)
    )
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        log = _text(exc.stdout) + _text(exc.stderr)
        return ImageOutcome(
            "task",
            log=_tail(log + f"\n[build killed after {timeout_s:g} s]"),
            reason=f"the build did not finish within {timeout_s:g} s",
        )
    log = _tail((done.stdout or "") + (done.stderr or ""))
    if done.returncode == 0:
        return ImageOutcome("ok", tag, log=log)
    infra = _INFRA_BUILD.search(log)
    if infra:
        return ImageOutcome(
            "infra",
            log=log,
            reason=f"the image cannot be built on this machine ({infra.group(0)})",
        )
    return ImageOutcome("task", log=log, reason="the build failed")


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def _tail(text: str, limit: int = LOG_LIMIT) -> str:
    return text if len(text) <= limit else "[... build log cut ...]\n" + text[-limit:]


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

    def __init__(self, engine: Engine, image: str, logs: Path, limits: Limits):
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
        argv += ["-v", f"{Path(logs).resolve()}:/logs/verifier", image, "sleep", "infinity"]
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
        done = subprocess.run(
            self.engine.command("network", verb, network, self.name),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise ContainerError(
                f"{self.engine.name} network {verb} failed: {(done.stderr or '').strip()[-300:]}"
            )
        self.connected = on

    def copy_in(self, source: Path, target: str) -> None:
        """Copy a host directory's contents to `target` in the container."""
        prepared = self.exec(f"rm -rf {target} && mkdir -p {target}", timeout_s=60, user="0")
        if not prepared.ok:
            raise ContainerError(f"cannot prepare {target}: {prepared.stderr.strip()[-300:]}")
        done = subprocess.run(
            self.engine.command("cp", f"{Path(source)}/.", f"{self.name}:{target}"),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise ContainerError(f"{self.engine.name} cp failed: {done.stderr.strip()[-500:]}")

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
                stdout=_text(exc.stdout)[-LOG_LIMIT:],
                stderr=_text(exc.stderr)[-LOG_LIMIT:],
                timed_out=True,
                duration_s=time.monotonic() - start,
                sandboxed=True,
            )
        out, err = _text(done.stdout), _text(done.stderr)
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
