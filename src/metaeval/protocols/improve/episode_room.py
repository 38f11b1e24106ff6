"""Where an improve episode and its tests run.

`--sandbox` (`improve run`) picks the room of each task's trial (`metaeval.tasks.rooms`):

- `bwrap` (the default, as before): every task in bubblewrap; a task's Dockerfile or image
  is not used (its environment/ files are copied into /app).
- `auto`: a task with an environment (environment/Dockerfile or `[environment]
  docker_image`) runs in a fresh container of its own image when Docker or Podman works
  here, else in bubblewrap as with `bwrap`; a task without one runs in bubblewrap.
- `docker` / `podman`: a task with an environment runs in that engine's container; when the
  engine does not work, or the image cannot be built or found, the task is not run (an
  infra_error, so the evaluation is an evaluation-framework failure, never a task failure).

In a container, as in bubblewrap, the target never sees the task's tests or solution:
/tests is copied in only for the verifier phase, /solution never. The episode works through
the room's agent phase (`Room.agent_env`, an `Environment`): a write_file action is written
on the host refusing any symlink in bubblewrap, inside the container as the image's user. Multi-container (compose)
environments are not supported, and a task with a symlink leading outside it is not built or
copied from (its files would carry host files into the container).

A container runs its image's id, not its tag: the id is resolved once per `ImagePins`
(`metaeval.protocols.improve.image_pins`: one per experiment, or per suite evaluation) and
recorded in each outcome (`TaskOutcome.image_id`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metaeval.protocols.improve.image_pins import ImagePins
from metaeval.sandbox.container import SANDBOX_KINDS, find_engine
from metaeval.tasks.harbor_root import harbor_sandbox_unavailable
from metaeval.tasks.images import DEFAULT_BUILD_TIMEOUT_S, build_network
from metaeval.tasks.rooms import BwrapBackend, ContainerBackend
from metaeval.tasks.safe_files import walk_tree
from metaeval.tasks.trial import Backend

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
DEFAULT_SANDBOX = "bwrap"


class RoomUnavailable(Exception):
    """The task cannot run where `--sandbox` asks (infrastructure, never the task's fault)."""


def check_sandbox(kind: str) -> str:
    """`kind` when it is a known `--sandbox` value; ValueError naming the choices otherwise."""
    if kind not in SANDBOX_KINDS:
        raise ValueError(f"unknown sandbox '{kind}' ({', '.join(SANDBOX_KINDS)})")
    return kind


def _docker_image(config: dict[str, Any]) -> str | None:
    environment = config.get("environment")
    image = environment.get("docker_image") if isinstance(environment, dict) else None
    return image if isinstance(image, str) and image else None


def _build_timeout(config: dict[str, Any]) -> float:
    environment = config.get("environment")
    value = environment.get("build_timeout_sec") if isinstance(environment, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return DEFAULT_BUILD_TIMEOUT_S
    return float(value)


def has_environment(root: Path, config: dict[str, Any]) -> bool:
    """True when the task names its own environment: a Dockerfile, compose file or image."""
    names = ("Dockerfile", *COMPOSE_FILES)
    return any((root / "environment" / n).is_file() for n in names) or bool(_docker_image(config))


def _bwrap() -> Backend:
    unavailable = harbor_sandbox_unavailable()
    if unavailable is not None:
        raise RoomUnavailable(f"sandbox unavailable: {unavailable}")
    return BwrapBackend()


def choose_backend(
    root: Path, config: dict[str, Any], sandbox: str, pins: ImagePins | None = None
) -> Backend:
    """The backend the task at `root` (parsed task.toml `config`) runs on under `sandbox`,
    its image taken from `pins` (a fresh resolution when None); RoomUnavailable with the
    reason when it cannot run there (see the module docstring)."""
    if sandbox == "bwrap" or not has_environment(root, config):
        return _bwrap()
    engine, why = find_engine(check_sandbox(sandbox))
    if engine is None:
        if sandbox == "auto":
            return _bwrap()
        raise RoomUnavailable(why or f"{sandbox} is not available")
    compose = [n for n in COMPOSE_FILES if (root / "environment" / n).is_file()]
    if compose:
        raise RoomUnavailable(
            f"multi-container environment (environment/{compose[0]}): only single-image "
            "tasks run in a container"
        )
    for entry in walk_tree(root, ignore_dirs=(".git",)):
        if entry.kind == "outside_link":
            raise RoomUnavailable(f"{entry.rel} is a symlink leading outside the task")
    image = (pins or ImagePins()).resolve(
        engine,
        root,
        _docker_image(config),
        timeout_s=_build_timeout(config),
        network=build_network(config),
    )
    if image.status != "ok" or image.run_ref is None:
        tail = "\n".join(image.log.strip().splitlines()[-5:])
        raise RoomUnavailable(
            f"{engine.name}: {image.reason or 'no image'}" + (f"\n{tail}" if tail else "")
        )
    return ContainerBackend(engine, image.run_ref, tag=image.image)
