"""Croissant 1.0 metadata (JSON-LD) for a build-and-find release, and its validation.

The metadata lists the released rows tables and record files as FileObjects (with SHA-256)
and describes them as RecordSets: the canonical question rows (every column, its type and its
meaning from `rows.COLUMNS`), the view rows, the builds table and the build, find and
view-find records (their scalar fields). Validation uses the `mlcroissant` library (extra
``release``): it parses the JSON-LD and checks it against the Croissant schema, every
described file's SHA-256 is checked, and the first records of every record set are read
through mlcroissant and compared with the files' own rows. It needs no network: every
contentUrl is a path inside the release.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from metaeval import __version__
from metaeval.errors import ConfigError
from metaeval.tasks.safe_files import open_checked, sha256_fd
from metaeval.tasks.safe_json import read_json

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

CROISSANT = "croissant.json"
CONFORMS_TO = "http://mlcommons.org/croissant/1.0"

# The standard Croissant 1.0 JSON-LD context (vocabulary mappings).
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}

_TYPES: dict[PolarsDataType, str] = {
    pl.Utf8: "sc:Text",
    pl.Boolean: "sc:Boolean",
    pl.Int32: "sc:Integer",
    pl.Int64: "sc:Integer",
    pl.Float64: "sc:Float",
}

# Scalar fields of the build / find record files: name -> (type, meaning).
_RECORD_COMMON = {
    "task": ("sc:Text", "task id within the pack"),
    "builder": ("sc:Text", "builder name ('' for the question-only and spec-only controls)"),
    "build_trial": ("sc:Integer", "build trial index; -1 for the controls"),
    "status": ("sc:Text", "agent outcome: ok, timeout or error"),
    "infra_error": ("sc:Boolean", "the harness, not the agent, failed (the cell is retried)"),
    "agent_id": ("sc:Text", "registry agent id (toolloop, a CLI adapter, a reference agent)"),
    "seed": ("sc:Integer", "seed of the invocation, derived from seed0 and the cell key"),
    "prompt_hash": ("sc:Text", "sha256 of the prompt the agent received"),
    "spec_hash": ("sc:Text", "sha256 of the task specification"),
    "metaeval_version": ("sc:Text", "metaeval version that ran the cell"),
    "environment_hash": ("sc:Text", "hash of the software environment"),
    "steps": ("sc:Integer", "agent steps taken"),
    "novel_retrieval_bytes": ("sc:Integer", "novel tool-result bytes delivered to the agent"),
    "novel_tool_call_bytes": ("sc:Integer", "argument bytes of read and search calls"),
    "wall_clock_seconds": ("sc:Float", "wall-clock duration of the agent run"),
    "transcript_blob": ("sc:Text", "sha256 reference of the transcript under records/blobs"),
    "layer": ("sc:Text", "evidence layer the record belongs to"),
    "created_at": ("sc:DateTime", "UTC time the record was written"),
}
_FIND_FIELDS = {
    "slice": ("sc:Text", "formal (artifact present), question_only or spec_only"),
    "finder": ("sc:Text", "finder name from the run config"),
    "find_trial": ("sc:Integer", "find trial index"),
    "n_correct": ("sc:Integer", "questions answered correctly in the run"),
    "n_unanswered": ("sc:Integer", "questions left unanswered"),
    "find_answers_blob": ("sc:Text", "sha256 reference of the submitted find_answers.json"),
}
_BUILD_FIELDS = {
    "compile_pass": ("sc:Boolean", "the artifact passed the task's compile probe"),
    "artifact": ("sc:Text", "artifact directory, relative to the run (artifacts/ here)"),
}
_BUILDS_TABLE = {
    "builder": "builder name",
    "task": "task id",
    "build_trial": "build trial index",
    "input_tokens": "builder input tokens as reported",
    "output_tokens": "builder output tokens as reported",
    "compile_pass": "the artifact passed the compile probe",
    "status": "builder outcome: ok, timeout or error",
}


def _sha256(path: Path) -> str:
    """Hex SHA-256 of a regular file (never through a symlink), read in chunks."""
    fd = open_checked(path, follow_links=False)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def _file(root: Path, rel: str, fmt: str, description: str) -> dict[str, Any]:
    return {
        "@type": "cr:FileObject",
        "@id": rel,
        "name": rel,
        "description": description,
        "contentUrl": rel,
        "encodingFormat": fmt,
        "sha256": _sha256(root / rel),
    }


def _field(record_set: str, name: str, dtype: str, text: str, file_id: str) -> dict[str, Any]:
    return {
        "@type": "cr:Field",
        "@id": f"{record_set}/{name}",
        "name": name,
        "description": text,
        "dataType": dtype,
        "source": {"fileObject": {"@id": file_id}, "extract": {"column": name}},
    }


def _record_set(
    name: str, description: str, file_id: str, fields: dict[str, tuple[str, str]]
) -> dict[str, Any]:
    return {
        "@type": "cr:RecordSet",
        "@id": name,
        "name": name,
        "description": description,
        "field": [_field(name, f, t, d, file_id) for f, (t, d) in fields.items()],
    }


def _present(root: Path, rel: str, fields: dict[str, tuple[str, str]]) -> dict:
    """The record fields the file can fill: text fields present in some record, other types
    present and non-null in every record (an infrastructure-failure record lacks most fields,
    and mlcroissant cannot read a missing integer)."""
    records = [
        json.loads(line) for line in (root / rel).read_text(encoding="utf-8").splitlines() if line
    ]
    keep = {}
    for name, (dtype, text) in fields.items():
        if dtype == "sc:Text":
            ok = any(name in r for r in records)
        else:
            ok = bool(records) and all(r.get(name) is not None for r in records)
        if ok:
            keep[name] = (dtype, text)
    return keep


def croissant_metadata(root: Path, manifest: dict[str, Any], license: str) -> dict[str, Any]:
    """The JSON-LD document describing a release directory."""
    from metaeval.protocols.buildfind.rows import COLUMNS
    from metaeval.protocols.buildfind.view_evidence import VIEW_SCHEMA

    rows_fields = {c: (_TYPES[t], text) for c, (t, text) in COLUMNS.items()}
    files = [
        _file(root, "data/question_rows.csv", "text/csv", "canonical question rows (CSV)"),
        _file(root, "data/question_rows.parquet", "application/x-parquet", "the same rows"),
        _file(root, "data/builds.csv", "text/csv", "one row per build run"),
    ]
    sets = [
        _record_set(
            "question_rows",
            "One row per (slice, artifact, find run, question): the table every published "
            "number is computed from.",
            "data/question_rows.csv",
            rows_fields,
        ),
        _record_set(
            "builds",
            "One row per build run (builder tokens for the token-usage table).",
            "data/builds.csv",
            {
                k: (
                    _TYPES[pl.Int64]
                    if "tokens" in k or k == "build_trial"
                    else "sc:Boolean"
                    if k == "compile_pass"
                    else "sc:Text",
                    v,
                )
                for k, v in _BUILDS_TABLE.items()
            },
        ),
    ]
    if (root / "data/view_rows.csv").is_file():
        files += [
            _file(root, "data/view_rows.csv", "text/csv", "restricted-view question rows (CSV)"),
            _file(root, "data/view_rows.parquet", "application/x-parquet", "the same rows"),
        ]
        view_fields = {"view": ("sc:Text", "restricted finder view of the run")}
        view_fields.update(rows_fields)
        assert list(view_fields) == list(VIEW_SCHEMA)
        sets.append(
            _record_set(
                "view_rows",
                "Question rows of the restricted-view find runs (a separate evidence layer).",
                "data/view_rows.csv",
                view_fields,
            )
        )
    for name, extra, text in (
        ("builds", _BUILD_FIELDS, "build records, one per build attempt"),
        ("finds", _FIND_FIELDS, "find records, one per find attempt (formal and controls)"),
        (
            "view_finds",
            {"view": ("sc:Text", "restricted view"), **_FIND_FIELDS},
            "restricted-view find records",
        ),
    ):
        rel = f"records/{name}.jsonl"
        if not (root / rel).is_file():
            continue
        files.append(_file(root, rel, "application/jsonlines", text))
        fields = _present(root, rel, {**_RECORD_COMMON, **extra})
        sets.append(_record_set(f"{name}_records", text, rel, fields))
    config = manifest.get("config", {})
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CONFORMS_TO,
        "name": "build-and-find-release",
        "description": (
            "A BUILD-AND-FIND run released by metaeval: builders made repositories from hidden "
            "specifications, finders answered specification-traced questions from the "
            f"repositories alone. {len(config.get('builders', []))} builders, "
            f"{len(config.get('finders', []))} finders."
        ),
        "license": license,
        "version": "1.0.0",
        "datePublished": str(manifest.get("created_at", ""))[:10] or None,
        "citeAs": "BUILD-AND-FIND release produced with metaeval " + __version__,
        "creator": {"@type": "sc:Organization", "name": "metaeval"},
        "distribution": files,
        "recordSet": sets,
    }


def write_croissant(root: Path, manifest: dict[str, Any], license: str) -> Path:
    """Write croissant.json into the release directory."""
    doc = croissant_metadata(root, manifest, license)
    doc = {k: v for k, v in doc.items() if v is not None}
    path = root / CROISSANT
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


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
        elif entry.get("sha256") != _sha256(target):
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
