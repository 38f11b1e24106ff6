"""Which images a task needs, which of them the engine holds, and pulling them (`--pull`).

A task needs `[environment] docker_image` (without a Dockerfile) or the base images its
environment/Dockerfile starts from. `missing_image` names one the engine does not hold (said
before any engine call: no time spent); `pull_images` fetches them first as the policy says:
"never" (the default), "missing" or "always", with the one rule audit and improve share
(`metaeval.tasks.image_pull`).
"""

from __future__ import annotations

from metaeval.protocols.audit.execution_findings import MENTION_SCAN_BYTES
from metaeval.protocols.audit.static.dockerfile import parse_dockerfile
from metaeval.protocols.audit.task_view import LoadedTask
from metaeval.sandbox.container import Engine
from metaeval.tasks.image_pull import held, local_images, pull_wanted
from metaeval.tasks.safe_files import UnsafeFileError, read_regular


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
    """Pull the task's `wanted_images` as the policy says (`tasks.image_pull.pull_wanted`).
    Returns (image, error) of the first failed pull."""
    return pull_wanted(engine, wanted_images(task, env), pull, timeout_s=timeout_s)


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
