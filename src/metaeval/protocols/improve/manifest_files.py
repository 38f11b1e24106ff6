"""The files an experiment manifest reaches: each read as one JSON object (duplicate keys,
NaN and Infinity refused), validated strictly against its model, and hashed as read.

A relative reference is resolved against the directory of the file that contains it, never
the current directory; a missing file is reported against the file that names it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from metaeval.config_files import parse_json, read_text, validation_error
from metaeval.errors import ConfigError
from metaeval.protocols.improve.config import SutConfig
from metaeval.protocols.improve.contract import FileRecord
from metaeval.protocols.improve.profiles import SystemProfile


@dataclass(frozen=True)
class LoadedFile:
    """One file as read: its path, bytes, text and top-level JSON object."""

    path: Path
    raw: bytes
    text: str
    data: dict[str, Any]

    @property
    def record(self) -> FileRecord:
        return FileRecord(self.path, hashlib.sha256(self.raw).hexdigest())


def shown_path(path: Path) -> str:
    """A path for messages: relative to the current directory when below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except (ValueError, OSError):  # not below the cwd, or the cwd is gone
        return str(path)


def resolve_ref(ref: Path, base_file: Path) -> Path:
    """`ref` made absolute against the directory of the file that contains it."""
    return (base_file.parent / ref).resolve()  # an absolute `ref` replaces the base


def read_json_object(
    path: Path,
    *,
    referenced_by: Path | None = None,
    ref_field: str | None = None,
    ref: Path | None = None,
) -> LoadedFile:
    """Read a JSON object; a missing file is reported against the file that names it."""
    if not path.is_file():
        problem = "not a file" if path.exists() else "file not found"
        if referenced_by is None:
            raise ConfigError(f"{problem}: {path}")
        shown = f"{ref} (resolved to {path})" if ref is not None and str(ref) != str(path) else path
        raise ConfigError(f"{problem}: {shown}", file=shown_path(referenced_by), field=ref_field)
    text = read_text(path)  # a regular file, UTF-8, size-capped
    raw = text.encode("utf-8")  # the bytes as read: decoding valid UTF-8 is lossless
    data = parse_json(text, shown_path(path))  # duplicate keys, NaN and Infinity refused
    if not isinstance(data, dict):
        raise ConfigError(
            f"expected a JSON object at the top level, got {type(data).__name__}",
            file=shown_path(path),
        )
    return LoadedFile(path, raw, text, data)


def validate_strict(model: type[BaseModel], loaded: LoadedFile) -> Any:
    """Validate strictly against `model`; the first problem names this file and its field."""
    try:
        return model.model_validate_json(loaded.text, strict=True)
    except ValidationError as exc:
        raise validation_error(exc, file=shown_path(loaded.path)) from None


def load_sut_config(path: Path) -> SutConfig:
    """Parse and validate one SUT config; its profile paths are made absolute (not loaded)."""
    path = Path(path).resolve()
    loaded = read_json_object(path)
    sut: SutConfig = validate_strict(SutConfig, loaded)
    return absolute_sut(sut, path)


def load_system_profile(path: Path) -> SystemProfile:
    """Parse and validate one SystemProfile JSON file."""
    path = Path(path).resolve()
    return validate_strict(SystemProfile, read_json_object(path))


def absolute_sut(sut: SutConfig, sut_path: Path) -> SutConfig:
    """`sut` with its profile paths made absolute against the file that holds it."""

    def absolute(ref: Path | SystemProfile | None) -> Path | SystemProfile | None:
        return resolve_ref(ref, sut_path) if isinstance(ref, Path) else ref

    return sut.model_copy(
        update={
            "launch_profile": absolute(sut.launch_profile),
            "sum_profile": absolute(sut.sum_profile),
        }
    )
