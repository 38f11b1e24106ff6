"""The image each container task of an improve run is pinned to.

A task's image is built or found once (`metaeval.tasks.images.ensure_image`) and its id is
what every later trial of that task runs, for the baseline and every candidate alike: a tag
moved meanwhile (a rebuild, a pull) cannot put two evaluations in different images. One
`ImagePins` lives as long as the run's evaluator (an experiment; a suite evaluation when none
is given); a resumed run resolves afresh. Only successful resolutions are kept, so an image
that could not be built is tried again by the next evaluation.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from metaeval.sandbox.container import Engine
from metaeval.tasks.images import ImageOutcome, ensure_image


class ImagePins:
    """Resolved images by engine and task root (thread-safe; picklable for remote workers,
    which receive the images resolved so far)."""

    def __init__(self) -> None:
        self._found: dict[str, ImageOutcome] = {}
        self._lock = threading.Lock()

    def resolve(
        self,
        engine: Engine,
        root: Path,
        docker_image: str | None,
        *,
        timeout_s: float,
        network: bool,
    ) -> ImageOutcome:
        """The image of the task at `root`: the pinned one, else `ensure_image`'s answer
        (pinned when it is ok)."""
        key = f"{engine.name}\0{Path(root).resolve()}"
        with self._lock:  # one resolution per task, even when its episodes start together
            found = self._found.get(key)
            if found is None:
                found = ensure_image(
                    engine, root, docker_image, timeout_s=timeout_s, network=network
                )
                if found.status == "ok":
                    self._found[key] = found
            return found

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"found": dict(self._found)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._found = dict(state["found"])
        self._lock = threading.Lock()
