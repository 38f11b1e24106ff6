"""A run directory: manifest, evidence layers, append-only records, blobs, resume.

Layout of ``<run>/``::

    manifest.json     written once at creation, never rewritten (for a new run with deferred
                      input hashes, by a background thread before the first record)
    layers.jsonl      one entry per evidence layer added after the first
    sessions.jsonl    one entry per `RunDir.open` (command, config, environment)
    <name>.jsonl      append-only records, each tagged with its layer
    blobs/            content-addressed blobs (see BlobStore)
    summary.json      derived summary, atomically replaced
    .lock             flock'd while a process has the run open

Cell record convention (the basis of resume): a cell record carries its key fields
at top level (for example ``task``, ``model``, ``seed``) plus

* ``status``: the agent-level outcome, one of ``"ok"``, ``"timeout"``, ``"error"``
  (all final), or ``"started"`` (a progress marker, not final). Grading results
  (pass/fail, scores) go in other fields, never in ``status``.
* ``infra_error``: ``true`` when the harness, not the agent, failed (provider
  unreachable after retries, sandbox crash, harness exception). Such a record
  never completes its cell, whatever its status; a re-run retries the cell.
* ``attempt``: an attempt number or id, set by the caller (informational).
* ``layer`` and ``created_at``: stamped by the writer `RunDir.records` returns.

A cell is complete when its latest record in the current layer is final. Records
are only ever appended; a retry adds a new record and the latest one wins.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from metaeval.errors import MetaevalError
from metaeval.records.blobs import BlobStore
from metaeval.records.commit import GroupCommitter
from metaeval.records.durable import atomic_write
from metaeval.records.envinfo import metaeval_git_revision
from metaeval.records.jsonl import JsonlWriter, iter_jsonl
from metaeval.records.layers import LAYERS_FILE, DeferredHash, LayerWriter
from metaeval.records.manifest import MANIFEST_NAME
from metaeval.records.new_run import PendingManifest, check_fresh
from metaeval.records.redact import redact, redact_text
from metaeval.records.run_lock import acquire_lock, release_lock
from metaeval.records.run_open import (
    SESSIONS_FILE,
    OpenRequest,
    check_run_name,
    log_session,
    recorded_inputs,
)

log = logging.getLogger(__name__)

FINAL_STATUSES = frozenset({"ok", "timeout", "error"})
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".lock"
_RESERVED = frozenset({"layers", "sessions"})


def is_final(record: Mapping[str, Any], final_statuses: Iterable[str] = FINAL_STATUSES) -> bool:
    """True when a cell record is a final outcome: a final status and no infra_error."""
    return record.get("infra_error") is not True and record.get("status") in set(final_statuses)


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def cell_key(record: Mapping[str, Any], key_fields: Sequence[str]) -> tuple | None:
    """The record's key tuple, or None when a key field is missing (not a cell record)."""
    if any(f not in record for f in key_fields):
        return None
    return tuple(_freeze(record[f]) for f in key_fields)


class RunDir:
    """An open run directory, exclusively locked until `close` (or process exit)."""

    def __init__(
        self,
        path: Path,
        manifest: dict[str, Any] | None,
        layers: list[dict] | None,
        layer: str,
        lock_fd: int,
    ):
        self.path = path
        self._manifest = manifest
        self._layers = layers
        self._pending: PendingManifest | None = None  # a new run's manifest still being written
        self._manifest_mutex = threading.Lock()
        self.layer = layer
        self.blobs = BlobStore(path / "blobs")
        self._lock_fd: int | None = lock_fd
        self._writers: dict[str, LayerWriter] = {}
        self._mutex = threading.Lock()
        self._committer = GroupCommitter(f"run {path.name}", before_commit=self._before_writing)

    @property
    def manifest(self) -> dict[str, Any]:
        """The run's manifest (waits for a new run's deferred manifest to be written)."""
        self._settle_manifest()
        assert self._manifest is not None
        return self._manifest

    @property
    def layers(self) -> list[dict]:
        """The run's evidence layers, oldest first (waits like `manifest`)."""
        self._settle_manifest()
        assert self._layers is not None
        return self._layers

    def _settle_manifest(self) -> None:
        """Wait until the manifest is on disk; raises if it could not be written."""
        if self._pending is None:
            return
        with self._manifest_mutex:
            if self._pending is not None:
                self._manifest, self._layers = self._pending.wait(self.path)
                self._pending = None

    def _before_writing(self) -> None:
        # before a group of records (in the writer thread), the summary or a document: the
        # manifest first (nothing exists without it), then the blobs they may name
        self._settle_manifest()
        self.blobs.sync_pending()

    # ----------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        protocol: str,
        config: Mapping[str, Any],
        hashes: Mapping[str, str | bytes | os.PathLike[str]],
        seeds: Any,
        new_layer: str | None = None,
        command: Sequence[str] | None = None,
        deferred_hashes: Mapping[str, DeferredHash] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> RunDir:
        """Create a run directory, or resume one whose recorded inputs match.

        deferred_hashes maps more names to functions returning ``sha256:<hex>`` (slow ones,
        such as hashing a whole benchmark). When the run exists they are computed at once
        (resuming needs them); for a new run a background thread computes them and writes
        the manifest, so the caller can start working meanwhile. Records and documents are
        only written after the manifest; `manifest` and `layers` wait for it.

        hashes maps names (convention ``"<kind>:<name>"``) to content (str, bytes,
        path) or precomputed ``sha256:<hex>``. An existing run whose current layer
        has different hashes raises RecordIntegrityError naming each change, unless
        new_layer is given: then a new evidence layer is started (or resumed, if a
        layer of that name with the same hashes exists). A different protocol always
        raises. A new directory's first layer is named new_layer or "base".

        settings maps names to the (JSON) values of the settings that change what a cell
        means (execution checks on or off, a model's token limit); they are compared like
        hashes, as ``setting:<name>``, and a change is named with both values. Settings that
        only select cells (which tasks) belong in config, never here.
        """
        request = OpenRequest.checked(
            path,
            protocol=protocol,
            config=config,
            hashes=hashes,
            seeds=seeds,
            new_layer=new_layer,
            command=command,
            deferred_hashes=deferred_hashes,
            settings=settings,
        )
        return cls._open_checked(request)

    @classmethod
    def _open_checked(cls, request: OpenRequest) -> RunDir:
        """The run a checked request names: resumed, or created with its first manifest."""
        path = request.path
        # the git revision (3 git processes) is read once, for the manifest and the session
        # log; a new run with deferred hashes reads it in the background with them
        revision_later = bool(request.deferred) and not (path / MANIFEST_NAME).exists()
        revision = None if revision_later else metaeval_git_revision()
        created, manifest = request.make_directory(revision)
        lock_fd = acquire_lock(path, LOCK_FILE)
        try:
            if (path / MANIFEST_NAME).exists():
                if revision_later:  # another process wrote it meanwhile: a resume after all
                    revision = metaeval_git_revision()
                manifest, layers, layer = request.resume()
            else:
                check_fresh(path, LOCK_FILE)
                if request.deferred:
                    run = cls(path, None, None, request.first_layer, lock_fd)
                    run._pending = request.write_later()
                    return run
                manifest, layers, layer = request.write_first(revision, manifest, created)
            run = cls(path, manifest, layers, layer, lock_fd)
            log_session(path, layer, request.argv, request.config, revision)
        except BaseException:
            release_lock(lock_fd)
            raise
        return run

    # ----------------------------------------------------------------- records

    @property
    def base_layer(self) -> str:
        """Name of the first layer; records without a ``layer`` field belong to it."""
        if self._pending is not None:  # a new run: its only layer, known without waiting
            return self.layer
        return self.layers[0]["name"]

    def records(self, name: str) -> LayerWriter:
        """The writer of ``<name>.jsonl``, stamping the current layer on each record."""
        check_run_name(name, "record file name")
        if name in _RESERVED:
            raise ValueError(f"{name!r} is reserved for the run directory's own bookkeeping")
        with self._mutex:
            if self._lock_fd is None:
                raise ValueError(f"run directory {self.path} is closed")
            writer = self._writers.get(name)
            if writer is None:
                writer = self._writers[name] = LayerWriter(
                    self.path / f"{name}.jsonl", self.layer, committer=self._committer
                )
            return writer

    def submit(
        self, *stages: Sequence[tuple[str, Mapping[str, Any]]]
    ) -> concurrent.futures.Future[None]:
        """Append records without waiting, stage by stage; the future completes when all are
        durable. Each stage is a list of (record file name, record); every record of a stage
        is on disk before any record of the next stage is written (e.g. a cell's findings
        before the cell record that makes them count)."""
        # encoded (stamped, scrubbed, serialised) in the writer thread, from a shallow copy
        lazy = [
            [
                (self.records(name), functools.partial(self.records(name).encode, dict(record)))
                for name, record in stage
            ]
            for stage in stages
        ]
        return self._committer.submit(lazy)

    def flush(self) -> None:
        """Wait until every record appended or submitted so far is on disk."""
        self._committer.flush()

    def read(self, name: str, *, layer: str | None = None, all_layers: bool = False) -> list[dict]:
        """Records of ``<name>.jsonl`` in the current (or given) layer, in file order.

        Unparseable lines (a torn last line after a kill, corruption) are skipped and
        logged as warnings naming the file and line.
        """
        check_run_name(name, "record file name")
        self.flush()
        want = layer or self.layer
        out = []
        for rec in iter_jsonl(self.path / f"{name}.jsonl", lambda p: log.warning("%s", p)):
            if all_layers or rec.get("layer", self.base_layer) == want:
                out.append(rec)
        return out

    def latest_records(self, name: str, key_fields: Sequence[str]) -> dict[tuple, dict]:
        """The latest record of each cell in the current layer, by key tuple."""
        latest: dict[tuple, dict] = {}
        for rec in self.read(name):
            key = cell_key(rec, key_fields)
            if key is not None:
                latest[key] = rec
        return latest

    def completed_cells(
        self,
        name: str,
        key_fields: Sequence[str],
        *,
        final_statuses: Iterable[str] = FINAL_STATUSES,
    ) -> set[tuple]:
        """Key tuples of cells whose latest current-layer record is final (see `is_final`)."""
        finals = set(final_statuses)
        return {
            key
            for key, rec in self.latest_records(name, key_fields).items()
            if is_final(rec, finals)
        }

    def write_summary(self, obj: Mapping[str, Any]) -> Path:
        """Atomically (re)write ``summary.json``; it is derived, so replacing it is fine."""
        self._before_writing()
        data = json.dumps(redact(dict(obj)), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        final = self.path / SUMMARY_FILE
        atomic_write(final, data.encode("utf-8"))
        return final

    # ----------------------------------------------------------------- documents

    def document_path(self, relpath: str) -> Path:
        """The path of a document inside the run directory; refuses names that leave it or
        shadow the run's own bookkeeping files."""
        rel = Path(relpath)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            raise ValueError(f"document path {relpath!r} must be relative and stay in {self.path}")
        if rel.parts[0] in (MANIFEST_NAME, LAYERS_FILE, SESSIONS_FILE, LOCK_FILE, "blobs"):
            raise ValueError(f"{relpath!r} is reserved for the run directory's own bookkeeping")
        return self.path / rel

    def write_document(self, relpath: str, data: str | bytes, *, scrub: bool = True) -> Path:
        """Atomically (re)write a document whose layout a protocol fixes (a report, a
        per-trial file). Text passes through `redact_text` unless ``scrub=False``."""
        if self._lock_fd is None:
            raise ValueError(f"run directory {self.path} is closed")
        target = self.document_path(relpath)
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        text = redact_text(data) if scrub else data
        self._before_writing()
        atomic_write(target, text.encode("utf-8"), root=self.path, mkdir=True)
        return target

    def plain_records(self, name: str) -> JsonlWriter:
        """The writer of ``<name>.jsonl`` for a file whose record format a paper fixes: records
        are redacted but stored as given (no layer or time stamp). Read it with
        ``read(name, all_layers=True)``."""
        check_run_name(name, "record file name")
        if name in _RESERVED:
            raise ValueError(f"{name!r} is reserved for the run directory's own bookkeeping")
        self._settle_manifest()  # this writer writes in the caller's thread
        with self._mutex:
            if self._lock_fd is None:
                raise ValueError(f"run directory {self.path} is closed")
            key = f"plain:{name}"
            writer = self._writers.get(key)
            if writer is None:
                writer = self._writers[key] = JsonlWriter(self.path / f"{name}.jsonl")  # type: ignore[assignment]
            return writer  # type: ignore[return-value]

    # ----------------------------------------------------------------- lifetime

    @classmethod
    def open_existing(cls, path: Path, protocol: str) -> RunDir:
        """Reopen a run directory with the inputs it recorded (for scoring, labelling, reports).

        Errors name the directory: no manifest, or a run of another protocol.
        """
        return cls.open(path, protocol=protocol, **recorded_inputs(Path(path), protocol))

    def close(self) -> None:
        """Write what is pending, close all writers and release the directory lock. Idempotent.

        A new run's deferred manifest is waited for first; if it could not be written, that
        error is raised once the lock is released."""
        self._committer.close()
        error: MetaevalError | None = None
        try:
            self._settle_manifest()
        except MetaevalError as exc:
            error, self._pending = exc, None
        self.blobs.sync_pending()
        with self._mutex:
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()
            if self._lock_fd is not None:
                release_lock(self._lock_fd)
                self._lock_fd = None
        if error is not None:
            raise error

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r}, layer={self.layer!r})"
