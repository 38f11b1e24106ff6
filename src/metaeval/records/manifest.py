"""The run manifest: what produced a run directory, written once and never rewritten.

Hash names are free-form strings; by convention ``"<kind>:<name>"`` (for example
``"prompt:toolloop_system"``, ``"spec:calc"``, ``"question_bank:audit_v1"``,
``"price_table:default"``), which integrity messages render as ``prompt 'toolloop_system'``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from metaeval import __version__
from metaeval.errors import ConfigError, RecordIntegrityError, with_filename
from metaeval.records.durable import fsync_dir
from metaeval.records.envinfo import environment_hash, metaeval_git_revision
from metaeval.records.redact import redact, redact_argv
from metaeval.tasks.safe_json import read_json

SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"
_HASH_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_BARE_HEX_RE = re.compile(r"^[0-9a-f]{64}$")


def utc_now() -> str:
    """Current UTC time as ISO 8601 with milliseconds, e.g. ``2025-01-02T03:04:05.678Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sha256_text(s: str | bytes) -> str:
    """``sha256:<hex>`` of a string (UTF-8) or bytes."""
    data = s.encode("utf-8") if isinstance(s, str) else s
    return "sha256:" + hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def is_hash(value: object) -> TypeGuard[str]:
    """True for a precomputed ``sha256:<64 lowercase hex>`` string."""
    return isinstance(value, str) and _HASH_RE.match(value) is not None


def hash_inputs(items: Mapping[str, str | bytes | os.PathLike[str]]) -> dict[str, str]:
    """Normalise name -> content into name -> ``sha256:<hex>``.

    A value that already is a digest is kept (``sha256:<hex>``, or 64 bare lowercase
    hex digits, which get the ``sha256:`` prefix); a path is hashed by content; any
    other str or bytes is hashed as content.
    """
    out: dict[str, str] = {}
    for name, value in items.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"hash names must be non-empty strings, got {name!r}")
        if is_hash(value):
            out[name] = value
        elif isinstance(value, str) and _BARE_HEX_RE.match(value):
            out[name] = "sha256:" + value
        elif isinstance(value, os.PathLike):
            out[name] = sha256_file(value)
        elif isinstance(value, str | bytes):
            out[name] = sha256_text(value)
        else:
            raise TypeError(f"hash input {name!r}: expected str, bytes or path, got {value!r}")
    return dict(sorted(out.items()))


def build_manifest(
    *,
    protocol: str,
    config: Mapping[str, Any],
    hashes: Mapping[str, str],
    seeds: Any,
    command: Sequence[str] | None = None,
    layer: str = "base",
    created_at: str | None = None,
    git_revision: str | None | object = ...,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a manifest dict (redacted, JSON-checked) without touching the disk.

    `git_revision` defaults to `metaeval_git_revision()` (pass it, even None, when known).
    `settings` (the values behind the ``setting:<name>`` hashes) go into the first layer's
    entry, so that a rerun with other values can say what they were.
    """
    created = created_at or utc_now()
    layer_entry: dict[str, Any] = {
        "name": layer,
        "hashes": dict(sorted(hashes.items())),
        "created_at": created,
    }
    if settings:
        layer_entry["settings"] = redact(dict(settings))
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "protocol": protocol,
        "command": redact_argv(list(sys.argv if command is None else command)),
        "config": redact(dict(config)),
        "hashes": dict(sorted(hashes.items())),
        "seeds": redact(seeds),
        "metaeval_version": __version__,
        "git_revision": metaeval_git_revision() if git_revision is ... else git_revision,
        "environment_hash": environment_hash(),
        "python_version": sys.version.split()[0],
        "platform": sys.platform,
        "created_at": created,
        "layers": [layer_entry],
    }
    json.dumps(manifest)  # fail here, before anything is written, if not serialisable
    return manifest


def write_manifest(run_dir: str | os.PathLike[str], manifest: Mapping[str, Any]) -> Path:
    """Create ``manifest.json`` atomically; RecordIntegrityError if one already exists.

    The file is written to a temporary name, fsync'd and hard-linked into place, so
    it either appears complete or not at all, and an existing manifest is never replaced.
    """
    run_dir = Path(run_dir)
    final = run_dir / MANIFEST_NAME
    text = json.dumps(redact(manifest), indent=2, sort_keys=True, ensure_ascii=False)
    data = (text + "\n").encode("utf-8")
    try:
        _write_once(run_dir, final, data)
    except OSError as exc:  # a full disk or a read-only output: the error names the manifest
        raise with_filename(exc, final) from exc
    return final


def _write_once(run_dir: Path, final: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".manifest-", suffix=".tmp", dir=run_dir)
    os.fchmod(fd, 0o644)  # mkstemp creates 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, final)
        except FileExistsError:
            raise RecordIntegrityError(
                f"{final} already exists; a manifest is written once and never replaced"
            ) from None
        except OSError:
            # Filesystem without hard links: fall back to an exclusive create.
            with open(final, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    finally:
        Path(tmp).unlink(missing_ok=True)
    fsync_dir(run_dir)


def read_manifest(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Load ``manifest.json``; RecordIntegrityError if it is unreadable or not a manifest."""
    path = Path(run_dir) / MANIFEST_NAME
    try:
        # a regular file (never a symlink or FIFO), size and nesting capped
        manifest = read_json(path, Path(run_dir), expect=None)
    except ConfigError as exc:
        reason = str(exc).removeprefix(f"{path}: ")
        raise RecordIntegrityError(f"{path}: cannot read manifest: {reason}") from None
    if not isinstance(manifest, dict) or "schema_version" not in manifest:
        raise RecordIntegrityError(f"{path}: not a metaeval manifest")
    if manifest["schema_version"] != SCHEMA_VERSION:
        raise RecordIntegrityError(
            f"{path}: schema_version {manifest['schema_version']!r} is not supported "
            f"(this metaeval writes {SCHEMA_VERSION}); use a new run directory"
        )
    return manifest


SETTING_PREFIX = "setting:"


def setting_hashes(settings: Mapping[str, Any]) -> dict[str, str]:
    """``setting:<name>`` -> digest of the value's canonical JSON, for the settings that
    change what a run's cells mean (a flag such as execution checks on or off)."""
    return {
        SETTING_PREFIX + name: sha256_text(json.dumps(value, sort_keys=True, ensure_ascii=False))
        for name, value in settings.items()
    }


def show_setting(value: Any) -> str:
    """A setting's value as a person reads it: on/off, none, text, or compact JSON."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= 200 else text[:197] + "..."


def describe_hash_name(name: str) -> str:
    """Render ``"prompt:toolloop_system"`` as ``prompt 'toolloop_system'``."""
    kind, sep, rest = name.partition(":")
    return f"{kind} '{rest}'" if sep and kind and rest else f"'{name}'"


def diff_hashes(
    old: Mapping[str, str],
    new: Mapping[str, str],
    old_settings: Mapping[str, Any] | None = None,
    new_settings: Mapping[str, Any] | None = None,
) -> list[str]:
    """Human-readable differences between two hash maps, one entry per changed name.

    A changed ``setting:<name>`` whose values both sides know is shown by value
    (``setting 'execution_checks' changed: off -> on``)."""
    old_settings, new_settings = old_settings or {}, new_settings or {}
    changes: list[str] = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        what = describe_hash_name(name)
        setting = name.removeprefix(SETTING_PREFIX)
        if name.startswith(SETTING_PREFIX) and setting in old_settings and setting in new_settings:
            old_value, new_value = old_settings[setting], new_settings[setting]
            changes.append(
                f"{what} changed: {show_setting(old_value)} -> {show_setting(new_value)}"
            )
        elif before is None:
            changes.append(f"{what} added: {after}")
        elif after is None:
            changes.append(f"{what} removed (was {before})")
        else:
            changes.append(f"{what} changed: {before} -> {after}")
    return changes
