"""Run records: append-only JSONL, content-addressed blobs, manifest, resume, redaction."""

from metaeval.records.blobs import BlobStore, omission_marker
from metaeval.records.envinfo import environment_hash, git_revision, metaeval_git_revision
from metaeval.records.jsonl import JsonlProblem, JsonlWriter, iter_jsonl, read_jsonl
from metaeval.records.layers import LayerWriter
from metaeval.records.manifest import (
    SCHEMA_VERSION,
    build_manifest,
    hash_inputs,
    read_manifest,
    sha256_file,
    sha256_text,
    utc_now,
    write_manifest,
)
from metaeval.records.redact import REDACTED, is_secret_field, redact, redact_argv, redact_text
from metaeval.records.run import FINAL_STATUSES, RunDir, cell_key, is_final

__all__ = [
    "FINAL_STATUSES",
    "REDACTED",
    "SCHEMA_VERSION",
    "BlobStore",
    "JsonlProblem",
    "JsonlWriter",
    "LayerWriter",
    "RunDir",
    "build_manifest",
    "cell_key",
    "environment_hash",
    "git_revision",
    "hash_inputs",
    "is_final",
    "is_secret_field",
    "iter_jsonl",
    "metaeval_git_revision",
    "omission_marker",
    "read_jsonl",
    "read_manifest",
    "redact",
    "redact_argv",
    "redact_text",
    "sha256_file",
    "sha256_text",
    "utc_now",
    "write_manifest",
]
