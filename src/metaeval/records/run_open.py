"""Opening a run directory: the inputs an open records, a new run's manifest, the session log.

`OpenRequest` holds the inputs of one `RunDir.open`, checked before the disk is touched (a
valid layer name, config and settings that are JSON, the input digests, the command line).
From them it makes a new run's directory and manifest (at once, or with deferred input
hashes by a background thread), or finds the layer a reopened run writes. `recorded_inputs`
are the inputs to reopen a run with as it is. Every open is one line of ``sessions.jsonl``
(`log_session`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metaeval import __version__
from metaeval.errors import ConfigError, MetaevalError
from metaeval.records.envinfo import environment_hash, metaeval_git_revision
from metaeval.records.jsonl import JsonlWriter
from metaeval.records.layers import (
    DeferredHash,
    compute_deferred,
    recorded_layers,
    select_layer,
)
from metaeval.records.manifest import (
    MANIFEST_NAME,
    build_manifest,
    hash_inputs,
    read_manifest,
    setting_hashes,
    utc_now,
    write_manifest,
)
from metaeval.records.new_run import PendingManifest, make_run_dir, write_first_manifest
from metaeval.records.redact import redact_argv

SESSIONS_FILE = "sessions.jsonl"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

Opened = tuple[dict[str, Any], list[dict], str]
"""(manifest, layers oldest first, the layer this open writes)."""


def check_run_name(value: str, what: str) -> None:
    """Refuse a record file or layer name that is not 1-64 letters, digits, `_`, `.` or `-`."""
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ConfigError(
            f"invalid {what} {value!r}: use 1-64 letters, digits, '_', '.' or '-'", field=what
        )


@dataclass
class OpenRequest:
    """The checked inputs of one `RunDir.open` (see there for what each means)."""

    path: Path
    protocol: str
    config: dict[str, Any]
    digests: dict[str, str]  # grows by the deferred hashes once they are computed
    settings: dict[str, Any]
    seeds: Any
    argv: list[str]
    new_layer: str | None
    deferred: dict[str, DeferredHash]

    @classmethod
    def checked(
        cls,
        path: str | os.PathLike[str],
        *,
        protocol: str,
        config: Mapping[str, Any],
        hashes: Mapping[str, str | bytes | os.PathLike[str]],
        seeds: Any,
        new_layer: str | None,
        command: Sequence[str] | None,
        deferred_hashes: Mapping[str, DeferredHash] | None,
        settings: Mapping[str, Any] | None,
    ) -> OpenRequest:
        """The inputs of an open; raises before anything is written when one is invalid."""
        if new_layer is not None:
            check_run_name(new_layer, "new_layer")
        settings = dict(settings or {})
        json.dumps(settings)
        digests = hash_inputs({**setting_hashes(settings), **hashes})  # a recorded digest wins
        argv = list(sys.argv if command is None else command)
        config = dict(config)
        json.dumps(config)  # reject unserialisable config before touching the disk
        return cls(
            Path(path),
            protocol,
            config,
            digests,
            settings,
            seeds,
            argv,
            new_layer,
            dict(deferred_hashes or {}),
        )

    @property
    def first_layer(self) -> str:
        """The name of a new run's first layer."""
        return self.new_layer or "base"

    def fresh_manifest(self, git_revision: str | None) -> dict[str, Any]:
        """The manifest of a new run with these inputs."""
        return build_manifest(
            protocol=self.protocol,
            config=self.config,
            hashes=self.digests,
            seeds=self.seeds,
            command=self.argv,
            layer=self.first_layer,
            settings=self.settings,
            git_revision=git_revision,
        )

    def make_directory(self, revision: str | None) -> tuple[Path | None, dict[str, Any] | None]:
        """Make a new run's directory once its manifest is known to build; returns the topmost
        directory made and the manifest to write (None when deferred or the directory exists)."""
        if not self.path.exists():
            checked = self.fresh_manifest(revision)  # checks inputs before the disk
            return make_run_dir(self.path), None if self.deferred else checked
        if not self.path.is_dir():
            raise MetaevalError(f"run directory {self.path} exists and is not a directory")
        return None, None

    def resume(self) -> Opened:
        """An existing run: its manifest and the layer to write, given matching inputs (the
        deferred hashes are computed now: resuming compares them all)."""
        manifest = read_manifest(self.path)
        self.digests.update(compute_deferred(self.deferred))
        layers, layer = select_layer(
            self.path, manifest, self.protocol, self.digests, self.new_layer, self.settings
        )
        return manifest, layers, layer

    def write_first(
        self, revision: str | None, manifest: dict[str, Any] | None, created: Path | None
    ) -> Opened:
        """A new run's manifest written now (the directories made are removed on failure)."""
        written = write_first_manifest(
            self.path, manifest or self.fresh_manifest(revision), created
        )
        layers = [dict(entry) for entry in written["layers"]]
        return written, layers, layers[-1]["name"]

    def write_later(self) -> PendingManifest:
        """A new run's manifest, written by a background thread once the deferred hashes
        are computed (records and documents wait for it)."""

        def write_deferred() -> tuple[dict[str, Any], list[dict]]:
            self.digests.update(compute_deferred(self.deferred))
            revision = metaeval_git_revision()
            write_manifest(self.path, self.fresh_manifest(revision))
            written = read_manifest(self.path)
            log_session(self.path, self.first_layer, self.argv, self.config, revision)
            return written, [dict(entry) for entry in written["layers"]]

        return PendingManifest(write_deferred)


def recorded_inputs(path: Path, protocol: str) -> dict[str, Any]:
    """The inputs a run recorded (config, seeds, its current layer's hashes and settings), to
    reopen it as it is; ConfigError naming the directory when it is no run of `protocol`."""
    if not (path / MANIFEST_NAME).is_file():
        raise ConfigError(
            f"not a run directory of the {protocol} protocol (no manifest.json)", file=str(path)
        )
    manifest = read_manifest(path)
    if manifest.get("protocol") != protocol:
        raise ConfigError(
            f"run directory holds protocol '{manifest.get('protocol')}', not '{protocol}'",
            file=str(path),
        )
    # the current (latest) layer: a later one may have other inputs or settings
    layers = recorded_layers(path, manifest)
    layer = layers[-1] if layers else {}
    return {
        "config": manifest.get("config", {}),
        "hashes": layer.get("hashes", manifest.get("hashes", {})),
        "settings": layer.get("settings"),
        "seeds": manifest.get("seeds", {}),
    }


def log_session(
    path: Path, layer: str, argv: list[str], config: dict[str, Any], revision: str | None
) -> None:
    """Append one open of the run to ``sessions.jsonl`` (command, config, environment)."""
    with JsonlWriter(path / SESSIONS_FILE) as writer:
        writer.append(
            {
                "event": "open",
                "layer": layer,
                "command": redact_argv(argv),
                "config": config,
                "pid": os.getpid(),
                "metaeval_version": __version__,
                "git_revision": revision,
                "environment_hash": environment_hash(),
                "created_at": utc_now(),
            }
        )
