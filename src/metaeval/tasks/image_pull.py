"""Pulling the images tasks name, by policy: `--pull never|missing|always`, one meaning for
`audit run` and `improve run`.

"never" (the default) fetches nothing; "missing" pulls the wanted images the engine does not
hold; "always" pulls every wanted image again except those the engine holds under its own
local name (`localhost/NAME`, no port: built here, in no registry). Which images a task
wants is the caller's business (audit: a task's `docker_image` or its Dockerfile's base
images; improve: `docker_image`).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence

from metaeval.sandbox.container import Engine
from metaeval.tasks.images import image_exists, local_image_key, pull_image

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


def held(engine: Engine, ref: str, have: frozenset[str] | None) -> bool:
    """Whether `engine` holds `ref`: by its name in the listing `have`, or asked of the engine
    for a digest reference (the listing names tags, not digests) or without a listing."""
    if have is None or "@" in ref:
        return image_exists(engine, ref)
    return local_image_key(ref) in have


def pull_wanted(
    engine: Engine, wanted: Sequence[str], pull: str, *, timeout_s: float
) -> tuple[str, str] | None:
    """Pull what the policy asks for of `wanted` (see the module docstring). Returns
    (image, error) of the first failed pull, None when every pull worked."""
    if pull == "never" or not wanted:
        return None
    have = local_images(engine)
    if pull == "missing":
        todo = [w for w in wanted if not held(engine, w, have)]
    else:
        todo = [w for w in wanted if not (w.startswith("localhost/") and held(engine, w, have))]
    for image in todo:
        error = pull_image(engine, image, timeout_s=timeout_s)
        if error is not None:
            return image, error
        _local_images.pop(engine.binary, None)  # the engine holds one more image now
    return None
