"""Reading an improve bundle's trial files for its report. A bundle handed to
`metaeval improve report` may come from anyone: files are read through
`metaeval.tasks.safe_files` / `safe_json` (no symlink, FIFO or device, sizes and JSON
nesting capped) and through their record models (`records`); a file that is refused is not
used, and a note naming it and saying why goes into the trial's evidence."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from metaeval.config_files import validation_error
from metaeval.errors import ConfigError
from metaeval.tasks.safe_files import read_head
from metaeval.tasks.safe_json import read_json

R = TypeVar("R", bound=BaseModel)


def read_json_or_note(path: Path, bundle: Path, notes: list[str]) -> dict[str, Any] | None:
    """A JSON object of the bundle, None when absent; a file that is not one (a symlink, a
    FIFO, too large or deep, not an object) is not read and gets a note saying why."""
    if not os.path.lexists(path):
        return None
    try:
        return read_json(path, bundle)
    except ConfigError as exc:
        notes.append(note_not_read(path, bundle, str(exc).removeprefix(f"{path}: ")))
        return None


def read_record(path: Path, model: type[R], bundle: Path, notes: list[str]) -> R | None:
    """A record of the bundle read through its model (`records`), None when absent; a file
    that is refused, or is not that record (a field missing or of the wrong type), is not
    used and gets a note saying why."""
    data = read_json_or_note(path, bundle, notes)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = validation_error(exc, file=path)
        notes.append(note_not_read(path, bundle, str(error).removeprefix(f"{path}: ")))
        return None


def read_patch_head(
    path: Path, bundle: Path, notes: list[str], *, max_bytes: int
) -> tuple[str, bool]:
    """(the head of a patch of the bundle, whether the file holds more); ("", False) when
    absent or refused (with a note)."""
    if not os.path.lexists(path):
        return "", False
    try:
        data, longer = read_head(path, bundle, max_bytes=max_bytes, follow_inside_links=False)
    except OSError as exc:
        notes.append(note_not_read(path, bundle, str(exc)))
        return "", False
    return data.decode("utf-8", errors="replace"), longer


def note_not_read(path: Path, bundle: Path, reason: str) -> str:
    """ "<file> not read: <reason>", the file named relative to the bundle."""
    return f"{path.relative_to(bundle).as_posix()} not read: {reason}"
