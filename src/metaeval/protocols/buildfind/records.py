"""Every record kind a build-and-find run writes, and the files they go to.

A run directory holds one JSON-lines file per record kind (`RunDir.records(kind)`):

* ``builds.jsonl`` -- one `BuildRecord` per build attempt (task, builder, build trial);
* ``finds.jsonl`` -- one `FindRecord` per find attempt (slice, task, builder, build trial,
  finder, find trial), controls included;
* ``view_finds.jsonl`` -- `FindRecord` with ``view`` and ``view_info``: a formal find run
  again under a restricted view (its own evidence layer);
* in any of them, a `FailedCell` where the cell raised or its job failed before the cell wrote
  a record.

`RunDir` adds ``created_at`` and ``layer`` and writes every record with sorted keys, so a model
dumped with `as_record` (only the fields that were set) writes byte-for-byte what the plain
dicts of earlier versions wrote. The models refuse unknown fields, so a renamed field is an
error where it is written, not a silent ``None`` where it is read. Nested values the harness
copies from elsewhere (token usage, compile-probe output, leakage scan) stay plain mappings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from metaeval.records.record_model import Number, RunRecord
from metaeval.records.run import is_final

# record kinds (file stems under the run directory) and the fields that key a cell
BUILDS = "builds"
FINDS = "finds"
VIEW_FINDS = "view_finds"  # restricted-view find runs: a separate evidence layer
BUILD_KEY = ("task", "builder", "build_trial")
FIND_KEY = ("slice", "task", "builder", "build_trial", "finder", "find_trial")
VIEW_FIND_KEY = ("view", *FIND_KEY)

# files of a release (`release/write.py` writes them, `release/verify.py` checks them)
CHECKSUMS = "SHA256SUMS"
CLAIMS = "claims.json"
CROISSANT = "croissant.json"
RECORD_FILES = (
    "manifest.json",
    "layers.jsonl",
    "sessions.jsonl",
    "builds.jsonl",
    "finds.jsonl",
    "view_finds.jsonl",
    "summary.json",
)


class _Cell(RunRecord):
    task: str
    builder: str
    build_trial: int
    recovery: int
    status: str
    infra_error: bool
    error: str | None


class _FindKey(BaseModel):
    slice: str
    finder: str
    find_trial: int
    view: str | None = None  # only in view_finds records


class _AgentRun(_Cell):
    """What every build and find attempt records about its agent run."""

    attempt: str
    agent_id: str
    adapter_family: str
    model: str | None
    effort: str
    effort_setting: str | None = None
    seed: int
    prompt_hash: str
    spec_hash: str
    metaeval_version: str
    environment_hash: str
    stop_reason: str | None
    steps: int
    usage: dict[str, Any]
    cost_usd: Number | None
    novel_retrieval_bytes: int
    novel_tool_call_bytes: int
    wall_clock_seconds: Number
    time_limit_s: Number | None = None  # absent in records written before it was kept
    transcript_blob: str
    compile_pass: bool | None


class BuildRecord(_AgentRun):
    """One build attempt: the artifact, its compile probe and leakage scan."""

    artifact: str
    validation: dict[str, Any]
    leakage: dict[str, Any]


class Answer(BaseModel):
    """One graded answer of a find run (canonical letter after de-shuffling)."""

    model_config = ConfigDict(extra="forbid")

    shown: Any  # what the finder wrote, kept as written (may be any JSON value)
    answer: str | None
    gold: str
    correct: bool
    evidence_files: Any
    evidence_symbols: Any
    rationale: Any


class FindRecord(_AgentRun, _FindKey):
    """One find attempt (formal, control or restricted view): the graded answers."""

    permutation: dict[str, list[str]]
    find_answers_blob: str
    answers_problem: str | None
    answers_status: str | None = None
    answers: dict[str, Answer]
    build_attempt: str | None
    view_info: dict[str, Any] | None = None
    # with `retry_unparsable`: the first run's problem, blobs and agent fields
    unparsable_first_attempt: dict[str, Any] | None = None
    n_correct: int
    n_unanswered: int


class FailedCell(_Cell):
    """A cell that raised (final unless the cause was transient) or whose job failed."""

    status: Literal["error"]
    slice: str | None = None
    finder: str | None = None
    find_trial: int | None = None
    view: str | None = None


def failed_cell(
    key: Mapping[str, Any], recovery: int, infra_error: bool, error: str
) -> dict[str, Any]:
    """The record of a cell that produced none of its own."""
    return FailedCell(
        **key, recovery=recovery, status="error", infra_error=infra_error, error=error
    ).as_record()


def parse_record(kind: str, data: Mapping[str, Any]) -> BuildRecord | FindRecord | FailedCell:
    """A written record of `kind` (BUILDS, FINDS or VIEW_FINDS) as its model."""
    return parse_build(data) if kind == BUILDS else parse_find(data)


def _is_failed_cell(data: Mapping[str, Any]) -> bool:
    """A cell that wrote no record of its own (`failed_cell`) has no agent attempt."""
    return data.get("status") == "error" and "attempt" not in data


def parse_build(data: Mapping[str, Any]) -> BuildRecord | FailedCell:
    """A written record of builds.jsonl as its model."""
    if _is_failed_cell(data):
        return FailedCell.model_validate(data)
    return BuildRecord.model_validate(data)


def parse_find(data: Mapping[str, Any]) -> FindRecord | FailedCell:
    """A written record of finds.jsonl or view_finds.jsonl as its model."""
    if _is_failed_cell(data):
        return FailedCell.model_validate(data)
    return FindRecord.model_validate(data)


def logical_view(records: Iterable[dict], key_fields: tuple[str, ...]) -> dict[tuple, dict]:
    """The latest final record per cell (infrastructure failures never enter the view)."""
    view: dict[tuple, dict] = {}
    for record in records:
        if is_final(record):
            view[tuple(record.get(k) for k in key_fields)] = record
    return view


def final_builds(records: Iterable[dict]) -> dict[tuple, BuildRecord | FailedCell]:
    """The logical view of build records (`logical_view` on BUILD_KEY), as models."""
    return {key: parse_build(data) for key, data in logical_view(records, BUILD_KEY).items()}


def final_finds(
    records: Iterable[dict], key_fields: tuple[str, ...] = FIND_KEY
) -> dict[tuple, FindRecord | FailedCell]:
    """The logical view of find records (FIND_KEY, or VIEW_FIND_KEY for view finds), as
    models."""
    return {key: parse_find(data) for key, data in logical_view(records, key_fields).items()}
