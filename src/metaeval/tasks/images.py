"""The image a Harbor task runs in: built from its environment/ or named in task.toml.

The image is built from environment/Dockerfile with environment/ as the build context
(`--pull=never`: nothing is fetched implicitly; `--network=none` when task.toml denies the
environment a network, `allow_internet = false` or `network_mode = "no-network"`:
`build_network`), or taken from `[environment] docker_image`. `ImageOutcome.image_id` is the
image's id, resolved once when the image is found or built: every trial of the task runs that
id, so a tag moved meanwhile cannot put the oracle and the null agent in different images, and
the records name the id.
Built images are tagged `localhost/metaeval-env:<digest>`, the sha256 of every file under
environment/, so an unchanged environment is built once. `ImageOutcome.status` sorts a
failure by cause: "task" (the task's own build is broken; the build log is the evidence) or
"infra" (no engine, a base image this machine cannot get, a build that needs a network it
does not have): infrastructure is never a task defect.

`pull_image` fetches an image from its registry (`audit run --pull missing|always`; the
default `never` fetches nothing). A registry on the loopback address (127.0.0.1, ::1,
localhost) is reached over plain HTTP (`--tls-verify=false` for Podman; Docker does so for
127.0.0.0/8 by itself); any other registry keeps TLS verification.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from metaeval.sandbox.container import LOG_LIMIT, Engine, as_text
from metaeval.tasks.safe_files import walk_tree
from metaeval.tasks.toml_schema import network_setting

IMAGE_REPO = "localhost/metaeval-env"
DEFAULT_BUILD_TIMEOUT_S = 900.0
DEFAULT_PULL_TIMEOUT_S = 900.0
PULL_POLICIES: tuple[str, ...] = ("never", "missing", "always")

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


def _tail(text: str, limit: int = LOG_LIMIT) -> str:
    return text if len(text) <= limit else "[... build log cut ...]\n" + text[-limit:]


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
    image_id: str | None = None  # the id `image` named when it was found or built

    @property
    def run_ref(self) -> str | None:
        """What trials run: the resolved id (the name when the engine gave none)."""
        return self.image_id or self.image


def image_id(engine: Engine, ref: str) -> str | None:
    """The id of the image `ref` names now (None when the engine does not know it)."""
    done = subprocess.run(
        engine.command("image", "inspect", "--format", "{{.Id}}", "--", ref),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = done.stdout.strip() if done.returncode == 0 else ""
    return found.removeprefix("sha256:") or None


def _found(engine: Engine, ref: str, *, log: str = "", cached: bool = False) -> ImageOutcome:
    return ImageOutcome("ok", ref, log=log, cached=cached, image_id=image_id(engine, ref))


def image_exists(engine: Engine, image: str) -> bool:
    verb = ["image", "exists"] if engine.name == "podman" else ["image", "inspect"]
    args = [*verb, "--", image]  # a name starting with "-" is never read as an option
    done = subprocess.run(engine.command(*args), capture_output=True, timeout=60, check=False)
    return done.returncode == 0


STAND_IN_LABEL = "org.metaeval.stand-in-for"


def _image_name(ref: str, prefixes: tuple[str, ...]) -> str:
    """`ref` without each of `prefixes` it starts with (in order), `:latest` when it names
    neither a tag nor a digest."""
    for prefix in prefixes:
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
    last = ref.rsplit("/", 1)[-1]
    return ref if ":" in last or "@" in last else ref + ":latest"


def short_image_name(ref: str) -> str:
    """The name of the image `ref` names, as a stand-in's label spells it:
    `docker.io/library/python:3.11-slim`, `library/python:3.11-slim` and `python:3.11-slim`
    are one image, `python:3.11-slim`.

    `localhost/` is kept: it is part of a name a person chose for a local image (the offline
    `localhost/metaeval-base:bookworm` under its own name is the real thing, not a stand-in),
    so `FROM localhost/python:3.11-slim` is not matched against a label saying
    `python:3.11-slim`."""
    return _image_name(ref, ("docker.io/", "library/"))


def local_image_key(ref: str) -> str:
    """The key under which an image is looked up in an engine's list of local images:
    `short_image_name` without podman's `localhost/` prefix too (podman lists an image
    tagged `python:3.11-slim` on this machine as `localhost/python:3.11-slim`, Docker as
    `python:3.11-slim`). Lenient on purpose: an image is never taken for missing because of
    how it is spelt. It differs from `short_image_name` only in that prefix: availability
    asks "is some image of that name here", stand-in matching "is this the image the label
    names"."""
    return _image_name(ref, ("docker.io/", "library/", "localhost/"))


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
                "--",
                ref,
            ),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        label = done.stdout.strip() if done.returncode == 0 else ""
        names = {short_image_name(n.strip()) for n in label.split(",") if n.strip()}
        if short_image_name(ref) in names:
            found.append(ref)
    return found


def build_network(config: dict[str, Any]) -> bool:
    """Whether the build of a task's image may use a network: not when its task.toml denies
    the environment one (a task silent about it keeps the engine's default)."""
    return network_setting(config, "environment") is not False


def ensure_image(
    engine: Engine,
    task_root: Path,
    docker_image: str | None,
    *,
    timeout_s: float = DEFAULT_BUILD_TIMEOUT_S,
    network: bool = True,
) -> ImageOutcome:
    """Build (or find) the image of one task; see the module docstring for the outcomes."""
    environment = Path(task_root) / "environment"
    dockerfile = environment / "Dockerfile"
    if not dockerfile.is_file():
        if docker_image:
            if image_exists(engine, docker_image):
                return _found(engine, docker_image, cached=True)
            return ImageOutcome(
                "infra",
                reason=f"image {docker_image} is not present locally and no registry is used",
            )
        return ImageOutcome("infra", reason="the task has no environment/Dockerfile")
    tag = f"{IMAGE_REPO}:{environment_digest(environment)[:20]}"
    if image_exists(engine, tag):
        return _found(engine, tag, cached=True)
    offline = [] if network else ["--network=none"]
    argv = engine.command(
        "build", "--pull=never", *offline, "-t", tag, "-f", str(dockerfile), str(environment)
    )
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        log = as_text(exc.stdout) + as_text(exc.stderr)
        return ImageOutcome(
            "task",
            log=_tail(log + f"\n[build killed after {timeout_s:g} s]"),
            reason=f"the build did not finish within {timeout_s:g} s",
        )
    log = _tail((done.stdout or "") + (done.stderr or ""))
    if done.returncode == 0:
        return _found(engine, tag, log=log)
    infra = _INFRA_BUILD.search(log)
    if infra:
        return ImageOutcome(
            "infra",
            log=log,
            reason=f"the image cannot be built on this machine ({infra.group(0)})",
        )
    return ImageOutcome("task", log=log, reason="the build failed")


def registry_host(ref: str) -> str | None:
    """The registry host (without port) an image reference names, or None for a Docker Hub
    short name (`python:3.11`, `library/python`): the first component counts as a host only
    when it has a dot or a port, or is `localhost`."""
    first, slash, _ = ref.partition("/")
    if not slash or not (first == "localhost" or "." in first or ":" in first):
        return None
    if first.startswith("["):  # [::1]:5000
        return first[1:].partition("]")[0]
    return first.rpartition(":")[0] if first.count(":") == 1 else first


def is_loopback_registry(ref: str) -> bool:
    """True when `ref`'s registry is on this machine's loopback address."""
    host = registry_host(ref)
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def pull_image(
    engine: Engine, ref: str, *, timeout_s: float = DEFAULT_PULL_TIMEOUT_S
) -> str | None:
    """Pull `ref` with `engine`; None when it worked, else the pull's error (one line)."""
    args = ["pull"]
    if engine.name == "podman" and is_loopback_registry(ref):
        args.append("--tls-verify=false")  # a loopback registry only: never for others
    try:
        done = subprocess.run(
            engine.command(*args, "--", ref),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"the pull did not finish within {timeout_s:g} s"
    except OSError as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = [
        line.strip() for line in (done.stderr or done.stdout or "").splitlines() if line.strip()
    ]
    error = lines[-1] if lines else f"exit {done.returncode}"
    return error if len(error) <= 300 else error[:297] + "..."
