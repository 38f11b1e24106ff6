"""A new run directory: made with its parents (or found empty), and its first manifest written
at once or, with deferred input hashes, by a background thread (records and documents wait
for it)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from metaeval.errors import MetaevalError, operator_fault
from metaeval.records.manifest import MANIFEST_NAME, read_manifest, write_manifest


def make_run_dir(path: Path) -> Path:
    """Make `path` and its missing parents; returns the topmost directory made (removed
    again when the first manifest cannot be written)."""
    created = path
    while not created.parent.exists():
        created = created.parent
    path.mkdir(parents=True, exist_ok=True)
    return created


def check_fresh(path: Path, lock_name: str) -> None:
    """Refuse a directory without a manifest that holds more than an interrupted `open` may
    leave: the lock (`lock_name`), a manifest's temporary file, and blobs of a run killed
    before its deferred manifest was written (no record is ever written before the manifest)."""
    for entry in path.iterdir():
        if entry.name == lock_name or (entry.name.startswith(".manifest-") and entry.is_file()):
            continue
        if entry.name == "blobs" and entry.is_dir() and not entry.is_symlink():
            continue
        raise MetaevalError(
            f"{path} is not empty and has no {MANIFEST_NAME}; "
            "it is not a metaeval run directory (use a new or empty directory)"
        )


def write_first_manifest(
    path: Path, manifest: dict[str, Any], created: Path | None
) -> dict[str, Any]:
    """Write a new run's manifest and read it back; on failure the directories this run made
    are removed again."""
    try:
        write_manifest(path, manifest)
    except BaseException:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    return read_manifest(path)


class PendingManifest:
    """A new run's manifest, written by a background thread once its deferred hashes are
    computed; `wait` returns (manifest, layers) or raises what went wrong."""

    def __init__(self, write: Callable[[], tuple[dict[str, Any], list[dict]]]):
        self._done = threading.Event()
        self._result: tuple[dict[str, Any], list[dict]] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(write,), name="manifest-writer", daemon=True
        )
        self._thread.start()

    def _run(self, write: Callable[[], tuple[dict[str, Any], list[dict]]]) -> None:
        try:
            self._result = write()
        except BaseException as exc:  # noqa: BLE001 - raised to every waiter
            self._error = exc
        finally:
            self._done.set()

    def wait(self, path: Path) -> tuple[dict[str, Any], list[dict]]:
        self._done.wait()
        if self._error is not None:
            detail = operator_fault(self._error) or f"{type(self._error).__name__}: {self._error}"
            raise MetaevalError(
                f"{path}: the run's manifest could not be written, so no record was: {detail}"
            ) from self._error
        assert self._result is not None
        return self._result
