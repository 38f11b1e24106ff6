"""The container backend of a task's own image: its environment/Dockerfile built (or found
built), or the image its task.toml names in `[environment] docker_image`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaeval.sandbox.container import ContainerError, find_engine
from metaeval.tasks.images import DEFAULT_BUILD_TIMEOUT_S, ensure_image
from metaeval.tasks.rooms import ContainerBackend


def container_backend(root: Path, config: dict[str, Any], sandbox: str) -> ContainerBackend:
    """A backend on the task's own image (its Dockerfile built, or `docker_image`) in the
    engine `sandbox` names; ContainerError saying why there is none (infrastructure)."""
    engine, why = find_engine(sandbox)
    if engine is None:
        raise ContainerError(why or f"{sandbox} is not available")
    environment = config.get("environment")
    environment = environment if isinstance(environment, dict) else {}
    named = environment.get("docker_image")
    image = ensure_image(
        engine,
        root,
        named if isinstance(named, str) and named else None,
        timeout_s=DEFAULT_BUILD_TIMEOUT_S,
    )
    if image.status != "ok" or image.image is None:
        raise ContainerError(f"{engine.name}: {image.reason or 'no image'}")
    return ContainerBackend(engine, image.image)
