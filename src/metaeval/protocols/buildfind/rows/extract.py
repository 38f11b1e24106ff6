"""Build the canonical question-rows table from a run's logical view of records.

Records are read through their models (`records.BuildRecord`, `FindRecord`, `FailedCell`), so
a field renamed there is a type error here, not a silent null in the rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from metaeval.protocols.buildfind.records import (
    BUILD_KEY,
    BUILDS,
    FIND_KEY,
    FINDS,
    BuildRecord,
    FailedCell,
    FindRecord,
    final_builds,
    logical_view,
    parse_build,
    parse_find,
)
from metaeval.protocols.buildfind.rows.table import SCHEMA, conform, empty_rows
from metaeval.records import RunDir

if TYPE_CHECKING:
    from metaeval.protocols.buildfind.record_files import RecordReader


def rows_from_records(run: RunDir) -> pl.DataFrame:
    """One row per (final find record, question), unlabeled; tokens and bytes are per run."""
    builds = logical_view(run.read(BUILDS), BUILD_KEY)
    finds = logical_view(run.read(FINDS), FIND_KEY)
    return rows_from_finds(run.manifest.get("config", {}), builds, finds)


def rows_from_finds(
    config: dict[str, Any], builds: Mapping[tuple, dict], finds: Mapping[tuple, dict]
) -> pl.DataFrame:
    """The rows of logical views of build and find records (keys BUILD_KEY and FIND_KEY, as
    `records.logical_view` gives them); each find record is read as its model."""
    builders = {b["name"]: b for b in config.get("builders", [])}
    finders = {f["name"]: f for f in config.get("finders", [])}
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA}
    for key, data in sorted(finds.items()):
        record = parse_find(data)
        slice_name, task, builder, build_trial, finder, find_trial = key
        if slice_name == "formal" and (task, builder, build_trial) not in builds:
            continue  # the build was superseded (new layer): its finds leave the view too
        if not isinstance(record, FindRecord) or not scorable(record):
            continue  # a failed cell (failures.py counts it), not a run of wrong answers
        finder_spec = finders.get(finder, {})
        builder_spec = builders.get(builder, {})
        usage = record.usage or {}
        panel = builder_spec.get("effort") if slice_name == "formal" else finder_spec.get("effort")
        build = builds.get((task, builder, build_trial)) if slice_name == "formal" else None
        build_record = parse_build(build) if build is not None else None
        manifest_fields = run_metadata(
            build_record if isinstance(build_record, BuildRecord) else None, record
        )
        for question_id, answer in sorted(record.answers.items()):
            columns["slice"].append(slice_name)
            columns["task"].append(task)
            columns["builder"].append(builder)
            columns["builder_family"].append(builder_spec.get("family", "") if builder else "")
            columns["finder"].append(finder)
            columns["finder_family"].append(finder_spec.get("family", ""))
            columns["effort_panel"].append(panel or "default")
            columns["build_trial"].append(build_trial)
            columns["find_trial"].append(find_trial)
            columns["question_id"].append(question_id)
            columns["gold"].append(answer.gold)
            columns["answer"].append(answer.answer)
            columns["correct"].append(bool(answer.correct))
            columns["compile_pass"].append(record.compile_pass)
            columns["label"].append("unlabeled")
            columns["label_source"].append("none")
            columns["novel_retrieval_bytes"].append(record.novel_retrieval_bytes)
            columns["novel_tool_call_bytes"].append(record.novel_tool_call_bytes)
            columns["input_tokens"].append(usage.get("input_tokens", 0))
            columns["output_tokens"].append(usage.get("output_tokens", 0))
            columns["finder_effort"].append(finder_spec.get("effort") or "default")
            columns["builder_agent"].append(builder_spec.get("agent") if builder else None)
            columns["builder_model"].append(builder_spec.get("model") if builder else None)
            columns["finder_agent"].append(finder_spec.get("agent"))
            columns["finder_model"].append(finder_spec.get("model"))
            for column, value in manifest_fields.items():
                columns[column].append(value)
    if not columns["slice"]:
        return empty_rows()
    return conform(pl.DataFrame(columns, schema=SCHEMA))


def run_metadata(build: BuildRecord | None, find: FindRecord) -> dict[str, Any]:
    """The manifest fields of Appendix D a question row copies from its build record (None
    for the controls) and its find record; a field the record lacks is null."""
    return {
        "build_seed": build.seed if build else None,
        "find_seed": find.seed,
        "builder_prompt_hash": build.prompt_hash if build else None,
        "finder_prompt_hash": find.prompt_hash,
        "spec_hash": find.spec_hash,
        "environment_hash": find.environment_hash,
        "metaeval_version": find.metaeval_version,
        "find_created_at": find.created_at,
    }


def scorable(record: FindRecord) -> bool:
    """A final find record whose answers are scored: the finder finished (not a timeout or an
    error) and its answer was readable (`unparsable` answers are a failed cell)."""
    finished = record.status not in ("timeout", "error")
    return finished and record.answers_status != "unparsable"


def builds_table(run: RecordReader) -> pl.DataFrame:
    """Builder runs (token usage by role, Table 10): builder, task, build_trial, tokens,
    compile_pass, status and the relaxed probe's outcome."""
    rows = [
        {
            "builder": builder,
            "task": task,
            "build_trial": trial,
            "input_tokens": _usage(rec).get("input_tokens", 0),
            "output_tokens": _usage(rec).get("output_tokens", 0),
            "compile_pass": rec.compile_pass if isinstance(rec, BuildRecord) else None,
            "status": rec.status,
            "relaxed_probe": _relaxed_outcome(rec),
        }
        for (task, builder, trial), rec in sorted(final_builds(run.read(BUILDS)).items())
    ]
    schema = {
        "builder": pl.Utf8,
        "task": pl.Utf8,
        "build_trial": pl.Int32,
        "input_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "compile_pass": pl.Boolean,
        "status": pl.Utf8,
        "relaxed_probe": pl.Utf8,
    }
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)


def _relaxed_outcome(record: BuildRecord | FailedCell) -> str | None:
    """The relaxed probe's outcome of a build (None when it did not run: compile pass, an
    older record, or a cell without a record of its own)."""
    if not isinstance(record, BuildRecord):
        return None
    relaxed = record.validation.get("relaxed_probe")
    return relaxed.get("outcome") if isinstance(relaxed, dict) else None


def _usage(record: BuildRecord | FailedCell) -> dict[str, Any]:
    """The token usage of a build record (none for a cell that wrote no record of its own)."""
    return (record.usage or {}) if isinstance(record, BuildRecord) else {}
