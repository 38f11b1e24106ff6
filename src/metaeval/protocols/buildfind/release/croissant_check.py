"""Validation of a release's Croissant metadata (`croissant.json`): mlcroissant parses it and
checks it against the Croissant 1.0 schema, every described file's SHA-256 is checked, and the
first records of every record set are read through mlcroissant and compared with the files'
own rows. It needs no network: every contentUrl is a path inside the release."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.release.croissant import CROISSANT, file_sha256
from metaeval.tasks.safe_json import read_json


def _plain_file(path: Path) -> bool:
    """A regular file, not a symlink (the release was checked for links; this one is not
    followed even if it appeared since)."""
    return path.is_file() and not path.is_symlink()


def validate_croissant(root: Path) -> list[str]:
    """Problems with croissant.json: mlcroissant errors and warnings, checksums of its files,
    and record sets whose row count differs from the released file's."""
    path = root / CROISSANT
    if not path.is_file():
        return [f"{CROISSANT}: missing"]
    try:
        import mlcroissant as mlc
    except ImportError:
        return [
            f"{CROISSANT}: cannot validate: mlcroissant is not installed "
            "(pip install 'metaeval[release]')"
        ]
    try:
        doc = read_json(path, root)
    except ConfigError as exc:
        return [f"{CROISSANT}: unreadable ({str(exc).removeprefix(f'{path}: ')})"]
    distribution = doc.get("distribution", [])
    if not isinstance(distribution, list) or not all(isinstance(e, dict) for e in distribution):
        return [f"{CROISSANT}: 'distribution' is not a list of objects"]
    problems = []
    for entry in distribution:
        rel = entry.get("contentUrl", "")
        rel = rel if isinstance(rel, str) else ""
        target = root / rel
        if rel.startswith("/") or ".." in rel.split("/") or not _plain_file(target):
            problems.append(f"{CROISSANT}: file {rel!r} is not in the release")
        elif entry.get("sha256") != file_sha256(target):
            problems.append(f"{CROISSANT}: sha256 of {rel} differs from the file")
    if problems:
        return problems
    logging.getLogger("absl").setLevel(logging.ERROR)
    try:
        dataset = mlc.Dataset(jsonld=str(path))
    except mlc.ValidationError as exc:
        return [f"{CROISSANT}: {line}" for line in str(exc).splitlines() if line.strip()]
    problems += [f"{CROISSANT}: warning: {w}" for w in sorted(dataset.metadata.ctx.issues.warnings)]
    record_sets = doc.get("recordSet", [])
    if not isinstance(record_sets, list) or not all(isinstance(r, dict) for r in record_sets):
        return [*problems, f"{CROISSANT}: 'recordSet' is not a list of objects"]
    described = {entry.get("contentUrl") for entry in distribution}
    for record_set in record_sets:
        problems += _check_sample(root, dataset, record_set, described)
    return problems


def _check_sample(
    root: Path, dataset: Any, record_set: dict[str, Any], described: set[Any]
) -> list[str]:
    """Read the first SAMPLE records of a record set with mlcroissant and compare each text,
    integer and boolean field with the file's own rows (null cells are left out: mlcroissant
    reads a missing boolean as true). mlcroissant takes milliseconds per record, so a release
    of millions of rows is sampled rather than read whole; the rows files themselves are
    checked in full by verify-release. `described` are the contentUrls of the distribution,
    checked to be regular files of the release."""
    name = record_set["@id"]
    source = record_set["field"][0]["source"]["fileObject"]["@id"]
    if source not in described:  # only files checked above are read
        return [f"{CROISSANT}: record set {name} reads {source!r}, not a described file"]
    expected = _first_rows(root / source, SAMPLE)
    got = []
    try:
        for record in dataset.records(record_set=name):
            got.append(record)
            if len(got) == SAMPLE:
                break
    except Exception as exc:  # mlcroissant raises many kinds; each is a finding here
        return [f"{CROISSANT}: record set {name} cannot be read: {exc}"]
    if len(got) != len(expected):
        return [f"{CROISSANT}: record set {name} yields {len(got)} records, {source} holds more"]
    problems = []
    for field in record_set["field"]:
        if field["dataType"] not in ("sc:Text", "sc:Integer", "sc:Boolean"):
            continue
        column = field["name"]  # each field is named after the column it describes
        for index, (record, row) in enumerate(zip(got, expected, strict=True)):
            want = _text(row.get(column))
            if want is not None and _text(record.get(field["@id"])) != want:
                problems.append(
                    f"{CROISSANT}: record set {name} record {index + 1} field {column}: "
                    f"{record.get(field['@id'])!r} differs from {source}'s {want!r}"
                )
                break
    return problems


SAMPLE = 200


def _first_rows(path: Path, n: int) -> list[dict[str, Any]]:
    if path.suffix == ".csv":
        return pl.read_csv(path, infer_schema_length=0, n_rows=n).to_dicts()
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rows.append(json.loads(line))
                if len(rows) == n:
                    break
    return rows


def _text(value: Any) -> str | None:
    """A cell as comparable text: bytes decoded, booleans lower-case, NaN, null and the empty
    string as None (a CSV cell cannot tell an empty string from a missing value, and
    mlcroissant reads both as null)."""
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
