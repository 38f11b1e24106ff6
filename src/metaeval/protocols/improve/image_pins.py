"""The image each container task of an improve run is pinned to.

A task's image is built or found once (`metaeval.tasks.images.ensure_image`) and its id is
what every later trial of that task runs, for the baseline and every candidate alike: a tag
moved meanwhile (a rebuild, a pull) cannot put two evaluations in different images. One
`ImagePins` lives as long as the run's evaluator (a suite evaluation when none is given).
Only successful resolutions are kept, so an image that could not be built is tried again by
the next evaluation.

With a `record` file (the bundle's `image_pins.jsonl`, one line per task: engine, task, tag
and id, appended once the id is known) the pins outlive the process: every later evaluation of
the run, and a run resumed after a kill, runs the ids written there. `check_recorded` refuses a
resume whose tags now name other ids (naming image, tag and both ids) before anything runs;
a tag moved during the run makes that task an infrastructure error with the same words.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from metaeval.errors import ConfigError
from metaeval.records.jsonl import JsonlWriter, read_jsonl
from metaeval.sandbox.container import Engine, find_engine
from metaeval.tasks.images import ImageOutcome, ensure_image, image_id

IMAGE_PINS = "image_pins.jsonl"  # in the bundle: the image id each container task ran


class ImagePin(BaseModel):
    """One line of `IMAGE_PINS`: the id `image` (the tag) named when the task first ran."""

    engine: str
    task: str
    image: str
    image_id: str


def moved(pin: ImagePin, now: str | None) -> str:
    """The words for a tag that no longer names the id the run used (`now`: its id today)."""
    where = f"now names {now}" if now else "now names no image"
    return (
        f"image of task {pin.task}: tag {pin.image} ran as image id {pin.image_id} in this run "
        f"and {where}; restore it (`{pin.engine} tag {pin.image_id} {pin.image}`) or start "
        "a new run directory"
    )


class ImagePins:
    """Resolved images by engine and task root (thread-safe; picklable for remote workers,
    which receive the images resolved so far)."""

    def __init__(self, record: Path | None = None) -> None:
        self._found: dict[str, ImageOutcome] = {}
        self._lock = threading.Lock()
        self.record = record
        self.recorded: dict[str, ImagePin] = {}
        if record is not None and record.exists():
            lines, _ = read_jsonl(record)  # a line torn by a kill is skipped
            for line in lines:
                try:
                    pin = ImagePin.model_validate(line)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    field = ".".join(str(part) for part in first["loc"]) or "image pin"
                    raise ConfigError(
                        f"not an image pin: {first['msg']}", file=str(record), field=field
                    ) from exc
                self.recorded[_key(pin.engine, Path(pin.task))] = pin

    def check_recorded(self) -> None:
        """ConfigError when a recorded tag names another id now (or none): the resumed run
        would not run the image its earlier evaluations ran."""
        engines: dict[str, Engine | None] = {}
        for pin in self.recorded.values():
            if pin.engine not in engines:
                engines[pin.engine] = find_engine(pin.engine)[0]
            engine = engines[pin.engine]
            if engine is None:
                continue  # no engine: its tasks end as infrastructure errors, naming why
            now = image_id(engine, pin.image)
            if now != pin.image_id:
                raise ConfigError(moved(pin, now), file=str(self.record), field="image_id")

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
        key = _key(engine.name, root)
        with self._lock:  # one resolution per task, even when its episodes start together
            found = self._found.get(key)
            if found is None:
                found = ensure_image(
                    engine, root, docker_image, timeout_s=timeout_s, network=network
                )
                found = self._checked(engine, root, key, found)
                if found.status == "ok":
                    self._found[key] = found
            return found

    def _checked(self, engine: Engine, root: Path, key: str, found: ImageOutcome) -> ImageOutcome:
        """`found`, written to the record when it is the task's first; an infrastructure
        outcome naming both ids when the record holds another id for the task."""
        if found.status != "ok" or found.image is None or found.image_id is None:
            return found
        pin = self.recorded.get(key)
        if pin is not None and pin.image_id != found.image_id:
            return ImageOutcome("infra", found.image, reason=moved(pin, found.image_id))
        if pin is None and self.record is not None:
            pin = ImagePin(
                engine=engine.name,
                task=str(Path(root).resolve()),
                image=found.image,
                image_id=found.image_id,
            )
            with JsonlWriter(self.record, scrub=False) as writer:
                writer.append(pin.model_dump())  # on disk before the first trial runs it
            self.recorded[key] = pin
        return found

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"found": dict(self._found), "record": self.record, "recorded": self.recorded}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._found = dict(state["found"])
        self.record = state.get("record")
        self.recorded = dict(state.get("recorded", {}))
        self._lock = threading.Lock()


def _key(engine: str, root: Path) -> str:
    return f"{engine}\0{Path(root).resolve()}"
