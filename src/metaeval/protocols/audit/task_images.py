"""Which images a task needs, which of them the engine holds, and pulling them (`--pull`).

A task needs `[environment] docker_image` (without a Dockerfile) or the base images its
environment/Dockerfile starts from. `missing_image` names one the engine does not hold (said
before any engine call: no time spent); `pull_images` fetches them first as the policy says:
"never" (the default), "missing" or "always" (`metaeval.tasks.images.pull_image`).
"""

from __future__ import annotations

import subprocess
import time

from metaeval.protocols.audit.execution_findings import MENTION_SCAN_BYTES
from metaeval.protocols.audit.static.dockerfile import parse_dockerfile
from metaeval.protocols.audit.task_view import LoadedTask
from metaeval.sandbox.container import Engine
from metaeval.tasks.images import image_exists, local_image_key, pull_image
from metaeval.tasks.safe_files import UnsafeFileError, read_regular

LOCAL_IMAGES_TTL_S = 60.0
_local_images: dict[str, tuple[float, frozenset[str] | None]] = {}


def local_images(engine: Engine) -> frozenset[str] | None:
    """The images `engine` holds (normalised names), listed at most once a minute per process;
    None when they cannot be listed."""
    now = time.monotonic()
    cached = _local_images.get(engine.binary)
    if cached is not None and now - cached[0] < LOCAL_IMAGES_TTL_S:
        return cached[1]
    try:
        done = subprocess.run(
            engine.command("images", "--format", "{{.Repository}}:{{.Tag}}"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        names = None
    else:
        names = (
            frozenset(
                local_image_key(line.strip())
                for line in done.stdout.splitlines()
                if line.strip() and "<none>" not in line
            )
            if done.returncode == 0
            else None
        )
    _local_images[engine.binary] = (now, names)
    return names


def wanted_images(task: LoadedTask, env: dict) -> list[str]:
    """The images the task needs from outside: `docker_image` without a Dockerfile, else the
    base images its Dockerfile starts from (not `scratch` or a `$VAR` reference; a reference
    pinned by digest, `name@sha256:...`, is wanted and pulled by that digest)."""
    if (task.root / "environment" / "Dockerfile").is_file():
        wanted = base_images(task, env)
    else:
        image = env.get("docker_image")
        wanted = [image] if isinstance(image, str) and image else []
    return [w for w in wanted if w != "scratch" and "$" not in w]


def held(engine: Engine, ref: str, have: frozenset[str] | None) -> bool:
    """Whether `engine` holds `ref`: by its name in the listing `have`, or asked of the engine
    for a digest reference (the listing names tags, not digests) or without a listing."""
    if have is None or "@" in ref:
        return image_exists(engine, ref)
    return local_image_key(ref) in have


def missing_image(engine: Engine, task: LoadedTask, env: dict) -> str | None:
    """The first of `wanted_images` that `engine` does not have, or None (also when that
    cannot be told: an engine that cannot list its images)."""
    wanted = wanted_images(task, env)
    have = local_images(engine) if wanted else None
    if have is None:
        return None
    return next((w for w in wanted if not held(engine, w, have)), None)


def pull_images(
    engine: Engine, task: LoadedTask, env: dict, pull: str, *, timeout_s: float
) -> tuple[str, str] | None:
    """Pull what the policy asks for: nothing ("never"), the wanted images the engine lacks
    ("missing"), or all of them ("always") but those the engine holds under its own local
    name (`localhost/NAME`, no port: built here, in no registry). Returns (image, error) of the
    first failed pull."""
    if pull == "never":
        return None
    wanted = wanted_images(task, env)
    have = local_images(engine) if wanted else None
    if pull == "missing":
        wanted = [w for w in wanted if not held(engine, w, have)]
    else:
        wanted = [w for w in wanted if not (w.startswith("localhost/") and held(engine, w, have))]
    for image in wanted:
        error = pull_image(engine, image, timeout_s=timeout_s)
        if error is not None:
            return image, error
        _local_images.pop(engine.binary, None)  # the engine holds one more image now
    return None


def base_images(task: LoadedTask, env: dict) -> list[str]:
    """The images the task's environment starts from (FROM lines, or docker_image)."""
    dockerfile = task.root / "environment" / "Dockerfile"
    if dockerfile.is_file():
        try:
            data = read_regular(dockerfile, task.root, max_bytes=MENTION_SCAN_BYTES)
        except (OSError, UnsafeFileError):
            return []
        text = data.decode("utf-8", "replace")
        return parse_dockerfile("environment/Dockerfile", text).base_images
    image = env.get("docker_image")
    return [image] if isinstance(image, str) and image else []
