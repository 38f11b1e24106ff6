"""Find run directories and read them without opening them.

A run is read, never opened: `RunDir.open_existing` takes the run's lock and appends to its
session log, which the viewer must not do (a run may be in progress, and a viewer writes
nothing). Records are read with `RecordFiles` (the reader `buildfind release` uses: the
manifest, then the current layer's records through `iter_jsonl`), blobs through
`metaeval.tasks.safe_files` and checked against their hash.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from metaeval.errors import MetaevalError
from metaeval.protocols.buildfind.record_files import RecordFiles
from metaeval.records import BlobStore, iter_jsonl
from metaeval.records.manifest import MANIFEST_NAME, read_manifest
from metaeval.records.run import LOCK_FILE, SUMMARY_FILE, cell_key
from metaeval.tasks.safe_files import irregular_entries
from metaeval.tasks.safe_json import read_json

log = logging.getLogger(__name__)

PROTOCOLS = ("audit", "buildfind", "improve")
MAX_DEPTH = 4
"""How deep below a given path runs are looked for."""
SKIP_DIRS = frozenset({"blobs", "work", "artifacts", "trials", "node_modules", "__pycache__"})
MAX_BLOB_BYTES = 32 << 20
"""A blob longer than this is shown cut (the viewer never holds more of one in memory)."""


class RunRecords(RecordFiles):
    """The records of one run folder, read-only: `read` (current layer), `read_all`,
    `latest_records` (what `RunDir.latest_records` returns), and `blob` (checked text)."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.blobs = BlobStore(self.path / "blobs")

    def read_all(self, name: str) -> list[dict]:
        """Every record of ``<name>.jsonl``, all layers, in file order (plain record files)."""
        return list(iter_jsonl(self.path / f"{name}.jsonl", lambda p: log.warning("%s", p)))

    def latest_records(self, name: str, key_fields: Sequence[str]) -> dict[tuple, dict]:
        """The latest record of each cell in the current layer, by key tuple."""
        latest: dict[tuple, dict] = {}
        for rec in self.read(name):
            key = cell_key(rec, key_fields)
            if key is not None:
                latest[key] = rec
        return latest

    def blob(self, ref: Any, max_bytes: int = MAX_BLOB_BYTES) -> tuple[str | None, str]:
        """(text, problem) of a blob, read by `BlobStore.head` (no link followed, the whole
        blob hashed): text None and a reason when it is missing, not a regular file, or does
        not match its hash; a cut text says so in `problem`."""
        if not isinstance(ref, str):
            return None, "no blob recorded"
        try:
            data, longer = self.blobs.head(ref, max_bytes)
        except (MetaevalError, ValueError) as exc:
            return None, str(exc)
        except OSError as exc:
            return None, f"blob {ref} not read: {exc}"
        text = data.decode("utf-8", "replace")
        return text, f"only the first {max_bytes} bytes shown" if longer else ""


@dataclass
class Run:
    """One run found on disk. `path` is what the user gave (a run, bundle or release root),
    `records` the folder holding its manifest and record files."""

    id: str
    path: Path
    records: Path
    protocol: str
    kind: str  # run | bundle | release
    manifest: dict[str, Any] = field(repr=False)

    @cached_property
    def reader(self) -> RunRecords:
        return RunRecords(self.records)

    @property
    def config(self) -> dict[str, Any]:
        config = self.manifest.get("config")
        return config if isinstance(config, dict) else {}

    @property
    def created_at(self) -> str:
        return str(self.manifest.get("created_at") or "")

    def json_file(self, name: str, base: Path | None = None) -> dict[str, Any] | None:
        """A JSON object file of the run (capped, no symlink or FIFO); None when absent or
        unreadable."""
        base = self.path if base is None else base
        path = base / name
        if not os.path.lexists(path):
            return None
        try:
            value = read_json(path, base)
        except MetaevalError as exc:
            log.warning("%s", exc)
            return None
        return value if isinstance(value, dict) else None

    def summary(self) -> dict[str, Any]:
        return self.json_file(SUMMARY_FILE, self.records) or {}

    def in_use(self) -> bool:
        """True while a process holds the run's lock (read from /proc/locks, so the viewer
        never takes the lock itself and cannot make a starting run fail)."""
        return lock_held(self.records / LOCK_FILE)


def lock_held(path: Path) -> bool:
    try:
        st = os.stat(path, follow_symlinks=False)
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            locks = handle.read()
    except OSError:
        return False
    # "1: FLOCK  ADVISORY  WRITE 627 00:2e:1234 0 EOF": device major:minor (hex) and inode
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return any("FLOCK" in line and ident in line.split() for line in locks.splitlines())


def _slug(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.name)[:40].strip("-.") or "run"
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:6]
    return f"{name}-{digest}"


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        if not (folder / MANIFEST_NAME).is_file():
            return None
        manifest = read_manifest(folder)
    except (MetaevalError, OSError):
        return None
    return manifest if manifest.get("protocol") in PROTOCOLS else None


def as_run(folder: Path) -> Run | None:
    """The run at `folder` (a run directory, an improve bundle or a build-and-find release),
    or None."""
    folder = folder.absolute()
    manifest = _manifest(folder)
    if manifest is not None:
        kind = "bundle" if manifest["protocol"] == "improve" else "run"
        return Run(_slug(folder), folder, folder, manifest["protocol"], kind, manifest)
    records = folder / "records"
    if (folder / "SHA256SUMS").is_file() and not records.is_symlink():
        manifest = _manifest(records)
        if manifest is not None and manifest["protocol"] == "buildfind":
            odd = irregular_entries(records, recursive=False)
            if odd:
                log.warning("%s: %s, not shown", records, odd[0].describe())
                return None
            return Run(_slug(folder), folder, records, "buildfind", "release", manifest)
    return None


def discover(paths: Iterable[Path], max_depth: int = MAX_DEPTH) -> list[Run]:
    """Every run at or below the given paths (symlinked directories are not followed, a run's
    own folders are not searched), newest first."""
    found: dict[Path, Run] = {}
    for top in paths:
        stack = [(Path(top), 0)]
        while stack:
            folder, depth = stack.pop()
            run = as_run(folder)
            if run is not None:
                found.setdefault(run.path, run)
                continue
            if depth >= max_depth:
                continue
            try:
                with os.scandir(folder) as listing:
                    children = [
                        Path(e.path)
                        for e in listing
                        if e.is_dir(follow_symlinks=False)
                        and not e.name.startswith(".")
                        and e.name not in SKIP_DIRS
                    ]
            except OSError:
                continue
            stack.extend((child, depth + 1) for child in sorted(children, reverse=True))
    return sorted(found.values(), key=lambda r: (r.created_at, str(r.path)), reverse=True)
