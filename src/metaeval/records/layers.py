"""Evidence layers of a run directory: which layer a reopened run writes, and what changed.

A run's first layer is in its manifest; each later one is a line of ``layers.jsonl`` with
the input and setting hashes it was started with. Reopening a run compares the current
layer's hashes with the rerun's: a change is refused, naming each difference, unless a new
layer is named (see `metaeval.records.run.RunDir.open`). `LayerWriter` stamps the layer a
run writes on each of its records.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from metaeval.errors import RecordIntegrityError
from metaeval.records.commit import GroupCommitter
from metaeval.records.jsonl import JsonlWriter, iter_jsonl
from metaeval.records.manifest import (
    MANIFEST_NAME,
    diff_hashes,
    is_hash,
    read_manifest,
    setting_hashes,
    utc_now,
)

log = logging.getLogger(__name__)

LAYERS_FILE = "layers.jsonl"
WAYS_OUT = (
    "; use a new run directory (-o NEW_DIR), or re-run with --new-layer NAME to start a new "
    "evidence layer in this one"
)
"""How a refusal of changed inputs or settings ends: the two ways out."""

DeferredHash = Callable[[], str]


def recorded_layers(path: Path, manifest: Mapping[str, Any]) -> list[dict]:
    """The run's evidence layers, oldest first: the manifest's, then those of layers.jsonl."""
    layers = [dict(entry) for entry in manifest.get("layers", [])]
    layers += [
        entry
        for entry in iter_jsonl(path / LAYERS_FILE, lambda p: log.warning("%s", p))
        if isinstance(entry.get("name"), str) and isinstance(entry.get("hashes"), dict)
    ]
    return layers


def layer_changes(
    layer: Mapping[str, Any],
    base: Mapping[str, Any],
    manifest: Mapping[str, Any],
    digests: Mapping[str, str],
    settings: Mapping[str, Any],
) -> list[str]:
    """What differs between a recorded layer and a rerun's inputs and settings, readably.

    A layer recorded before its settings were (an older metaeval) takes a setting's value
    from the manifest's config when it is the first layer; a setting it cannot know is not
    compared."""
    old = dict(layer["hashes"])
    old_settings = dict(layer.get("settings") or {})
    config = manifest.get("config") if layer is base else None
    for name in settings:
        key = "setting:" + name
        if key in old:
            continue
        if isinstance(config, dict) and name in config:
            old_settings[name] = config[name]
            old[key] = setting_hashes({name: config[name]})[key]
        else:
            old[key] = digests[key]
    return diff_hashes(old, digests, old_settings, settings)


def compute_deferred(deferred: Mapping[str, DeferredHash]) -> dict[str, str]:
    """Run each deferred hash; each must return a ``sha256:<hex>`` digest."""
    digests = {}
    for name, compute in deferred.items():
        value = compute()
        if not is_hash(value):
            raise ValueError(f"deferred hash {name!r} returned {value!r}, not 'sha256:<hex>'")
        digests[name] = value
    return digests


def select_layer(
    path: Path,
    manifest: dict[str, Any],
    protocol: str,
    digests: dict[str, str],
    new_layer: str | None,
    settings: dict[str, Any],
) -> tuple[list[dict], str]:
    """(the run's layers, the layer to write) for a reopened run: the current layer when its
    inputs and settings match, else `new_layer` (started, or resumed when its inputs match);
    RecordIntegrityError naming every change otherwise."""
    if manifest.get("protocol") != protocol:
        raise RecordIntegrityError(
            f"{path} holds a run of protocol {manifest.get('protocol')!r}, not {protocol!r}; "
            "use a new run directory"
        )
    layers = recorded_layers(path, manifest)
    if not layers:
        raise RecordIntegrityError(f"{path / MANIFEST_NAME}: no evidence layers recorded")
    current = layers[-1]
    if new_layer is None:
        changes = layer_changes(current, layers[0], manifest, digests, settings)
        if changes:
            raise RecordIntegrityError(
                f"{path}: inputs differ from layer '{current['name']}' of this run: "
                + "; ".join(changes)
                + WAYS_OUT
            )
        return layers, current["name"]
    same_name = [entry for entry in layers if entry["name"] == new_layer]
    if same_name:
        changes = layer_changes(same_name[-1], layers[0], manifest, digests, settings)
        if changes:
            raise RecordIntegrityError(
                f"{path}: layer '{new_layer}' already exists with different inputs: "
                + "; ".join(changes)
                + "; choose another --new-layer name"
            )
        return layers, new_layer  # resuming that layer
    entry = {"name": new_layer, "hashes": digests, "created_at": utc_now()}
    if settings:
        entry["settings"] = settings
    with JsonlWriter(path / LAYERS_FILE) as writer:
        writer.append(entry)
    return [*layers, entry], new_layer


def recorded_setting(run_dir: Path, name: str) -> Any:
    """The value the run in `run_dir` recorded for setting `name` (its latest layer's, else
    its manifest config's), or None when there is no such run or setting.

    A command whose default changed between versions resumes an existing run with the value
    that run was started with, so a rerun with the same flags is still the same run."""
    if not (Path(run_dir) / MANIFEST_NAME).is_file():
        return None
    manifest = read_manifest(run_dir)
    for layer in reversed(recorded_layers(Path(run_dir), manifest)):
        settings = layer.get("settings")
        if isinstance(settings, dict) and name in settings:
            return settings[name]
    config = manifest.get("config")
    return config.get(name) if isinstance(config, dict) else None


class LayerWriter(JsonlWriter):
    """A JsonlWriter that stamps ``layer`` (enforced) and ``created_at`` (if absent)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        layer: str,
        *,
        committer: GroupCommitter | None = None,
    ):
        super().__init__(path, committer=committer)
        self.layer = layer

    def _prepare(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        record = dict(obj)
        if record.setdefault("layer", self.layer) != self.layer:
            raise ValueError(
                f"{self.path}: record is for layer {record['layer']!r}, "
                f"but this run is writing layer {self.layer!r}"
            )
        record.setdefault("created_at", utc_now())
        return record
