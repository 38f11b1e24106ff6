"""Croissant 1.0 metadata (JSON-LD) for a build-and-find release, and its validation.

The metadata lists the released rows tables and record files as FileObjects (with SHA-256)
and describes them as RecordSets: the canonical question rows (every column the released file
holds, its type and its meaning from `rows.COLUMNS`), the view rows, the builds table and the
build, find and view-find records (their scalar fields). `croissant_check` validates it with
the `mlcroissant` library (extra ``release``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from metaeval import __version__
from metaeval.tasks.safe_files import open_checked, sha256_fd

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


def file_sha256(path: Path) -> str:
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
        "sha256": file_sha256(root / rel),
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
    files, sets = _table_sets(root)
    record_files, record_sets = _record_sets(root)
    files += record_files
    sets += record_sets
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


def _rows_fields(path: Path) -> dict[str, tuple[str, str]]:
    """The canonical columns a released rows file holds (a release of a run made before a
    column existed lacks it), with their Croissant types and meanings."""
    from metaeval.protocols.buildfind.rows.table import COLUMNS, file_columns

    held = set(file_columns(path))
    return {c: (_TYPES[t], text) for c, (t, text) in COLUMNS.items() if c in held}


def _builds_fields() -> dict[str, tuple[str, str]]:
    def kind(column: str) -> str:
        if "tokens" in column or column == "build_trial":
            return _TYPES[pl.Int64]
        return "sc:Boolean" if column == "compile_pass" else "sc:Text"

    return {k: (kind(k), v) for k, v in _BUILDS_TABLE.items()}


def _table_sets(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """FileObjects and RecordSets of the question rows, the builds table and the view rows."""
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
            _rows_fields(root / "data/question_rows.csv"),
        ),
        _record_set(
            "builds",
            "One row per build run (builder tokens for the token-usage table).",
            "data/builds.csv",
            _builds_fields(),
        ),
    ]
    if (root / "data/view_rows.csv").is_file():
        files += [
            _file(root, "data/view_rows.csv", "text/csv", "restricted-view question rows (CSV)"),
            _file(root, "data/view_rows.parquet", "application/x-parquet", "the same rows"),
        ]
        view_fields = {"view": ("sc:Text", "restricted finder view of the run")}
        view_fields.update(_rows_fields(root / "data/view_rows.csv"))
        sets.append(
            _record_set(
                "view_rows",
                "Question rows of the restricted-view find runs (a separate evidence layer).",
                "data/view_rows.csv",
                view_fields,
            )
        )
    return files, sets


def _record_sets(root: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """FileObjects and RecordSets of the build, find and view-find record files."""
    files, sets = [], []
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
    return files, sets


def write_croissant(root: Path, manifest: dict[str, Any], license: str) -> Path:
    """Write croissant.json into the release directory."""
    doc = croissant_metadata(root, manifest, license)
    doc = {k: v for k, v in doc.items() if v is not None}
    path = root / CROISSANT
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
