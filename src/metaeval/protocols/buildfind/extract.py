"""Build the canonical question-rows table from a run's logical view of records."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from metaeval.protocols.buildfind.records import BUILD_KEY, BUILDS, FIND_KEY, FINDS, logical_view
from metaeval.protocols.buildfind.rows import SCHEMA, conform, empty_rows
from metaeval.records import RunDir

if TYPE_CHECKING:
    from metaeval.protocols.buildfind.record_files import RecordReader


def rows_from_records(run: RunDir) -> pl.DataFrame:
    """One row per (final find record, question), unlabeled; tokens and bytes are per run."""
    builds = logical_view(run.read(BUILDS), BUILD_KEY)
    finds = logical_view(run.read(FINDS), FIND_KEY)
    return rows_from_finds(run.manifest.get("config", {}), builds, finds)


def rows_from_finds(
    config: dict[str, Any], builds: dict[tuple, dict], finds: dict[tuple, dict]
) -> pl.DataFrame:
    """The rows of logical views of build and find records (keys BUILD_KEY and FIND_KEY)."""
    builders = {b["name"]: b for b in config.get("builders", [])}
    finders = {f["name"]: f for f in config.get("finders", [])}
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA}
    for key, record in sorted(finds.items()):
        slice_name, task, builder, build_trial, finder, find_trial = key
        if slice_name == "formal" and (task, builder, build_trial) not in builds:
            continue  # the build was superseded (new layer): its finds leave the view too
        if not scorable(record):
            continue  # a failed cell (failures.py counts it), not a run of wrong answers
        finder_spec = finders.get(finder, {})
        builder_spec = builders.get(builder, {})
        usage = record.get("usage") or {}
        panel = builder_spec.get("effort") if slice_name == "formal" else finder_spec.get("effort")
        build = builds.get((task, builder, build_trial), {}) if slice_name == "formal" else {}
        manifest_fields = run_metadata(build, record)
        for question_id, answer in sorted((record.get("answers") or {}).items()):
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
            columns["gold"].append(answer["gold"])
            columns["answer"].append(answer["answer"])
            columns["correct"].append(bool(answer["correct"]))
            columns["compile_pass"].append(record.get("compile_pass"))
            columns["label"].append("unlabeled")
            columns["label_source"].append("none")
            columns["novel_retrieval_bytes"].append(record.get("novel_retrieval_bytes", 0))
            columns["novel_tool_call_bytes"].append(record.get("novel_tool_call_bytes", 0))
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


def run_metadata(build: dict[str, Any], find: dict[str, Any]) -> dict[str, Any]:
    """The manifest fields of Appendix D a question row copies from its build record (empty
    for the controls) and its find record; a field the record lacks is null."""
    return {
        "build_seed": build.get("seed"),
        "find_seed": find.get("seed"),
        "builder_prompt_hash": build.get("prompt_hash"),
        "finder_prompt_hash": find.get("prompt_hash"),
        "spec_hash": find.get("spec_hash"),
        "environment_hash": find.get("environment_hash"),
        "metaeval_version": find.get("metaeval_version"),
        "find_created_at": find.get("created_at"),
    }


def scorable(record: dict[str, Any]) -> bool:
    """A final find record whose answers are scored: the finder finished (not a timeout or an
    error) and its answer was readable (`unparsable` answers are a failed cell)."""
    finished = record.get("status") not in ("timeout", "error")
    return finished and record.get("answers_status") != "unparsable"


def builds_table(run: RecordReader) -> pl.DataFrame:
    """Builder runs (for token usage by role): builder, task, build_trial, tokens, compile_pass."""
    builds = logical_view(run.read(BUILDS), BUILD_KEY)
    rows = [
        {
            "builder": builder,
            "task": task,
            "build_trial": trial,
            "input_tokens": (rec.get("usage") or {}).get("input_tokens", 0),
            "output_tokens": (rec.get("usage") or {}).get("output_tokens", 0),
            "compile_pass": rec.get("compile_pass"),
            "status": rec.get("status"),
        }
        for (task, builder, trial), rec in sorted(builds.items())
    ]
    schema = {
        "builder": pl.Utf8,
        "task": pl.Utf8,
        "build_trial": pl.Int32,
        "input_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        "compile_pass": pl.Boolean,
        "status": pl.Utf8,
    }
    return pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
