"""`improve run --pull never|missing|always`: fetch the images the suites' tasks name before
the run, with audit's rule (`metaeval.tasks.image_pull`).

A Harbor task (Terminal-Bench 2.0's layout) names its image in task.toml,
`[environment] docker_image`; under `--sandbox podman|docker|auto` such a task runs in a
container of that image, which must be on the machine (`episode_room`). With `--pull
missing` or `always` every such image of the optimize and held-out suites is pulled once,
before the baseline. A task with an `environment/Dockerfile` is built here from base images
already present (as without `--pull`). A pull that fails is reported and the run goes on: the
tasks that need that image then end as infrastructure errors (an evaluation-framework
failure, never a task failure), naming the image. Under `--sandbox bwrap` no image is used and
nothing is pulled.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

from metaeval.errors import ConfigError
from metaeval.sandbox.container import find_engine
from metaeval.tasks.image_pull import pull_wanted
from metaeval.tasks.images import DEFAULT_PULL_TIMEOUT_S, PULL_POLICIES


def check_pull(pull: str) -> str:
    """`pull` when it is a known policy; ConfigError naming `pull` otherwise."""
    if pull not in PULL_POLICIES:
        raise ConfigError(
            f"unknown pull policy '{pull}' ({', '.join(PULL_POLICIES)})", field="pull"
        )
    return pull


def task_image(task: Path) -> str | None:
    """The `docker_image` a task runs in when it has no Dockerfile of its own."""
    if (task / "environment" / "Dockerfile").is_file():
        return None
    try:
        config = tomllib.loads((task / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # the suite loader refuses such a task before a run starts
    environment = config.get("environment")
    image = environment.get("docker_image") if isinstance(environment, dict) else None
    return image if isinstance(image, str) and image else None


def suite_images(tasks: Sequence[Path]) -> list[str]:
    """The distinct images the tasks name, in task order."""
    return list(dict.fromkeys(i for i in map(task_image, tasks) if i is not None))


def pull_suite_images(
    tasks: Sequence[Path],
    sandbox: str,
    pull: str,
    *,
    timeout_s: float = DEFAULT_PULL_TIMEOUT_S,
) -> list[str]:
    """Pull the suites' images as `pull` says; returns one line per image that could not be
    pulled (empty when all could, or nothing was to pull)."""
    check_pull(pull)
    images = suite_images(tasks)
    if pull == "never" or sandbox == "bwrap" or not images:
        return []
    engine, why = find_engine(sandbox)
    if engine is None:
        return [f"no image pulled: {why}"]
    problems = []
    for image in images:
        failed = pull_wanted(engine, [image], pull, timeout_s=timeout_s)
        if failed is not None:
            problems.append(f"image {failed[0]} could not be pulled: {failed[1]}")
    return problems
