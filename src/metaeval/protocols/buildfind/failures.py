"""Cells of a build-and-find run that stayed failed, with their reasons.

A build cell fails when its final record is not `ok` (its artifact is never inspected) or
when it has no final record at all: every attempt was an infrastructure failure and the
recovery budget is spent. A find cell fails when its final record is an error or a timeout
(its questions are unanswered or absent), when its answer could not be parsed
(`unparsable`: scored neither right nor wrong) or when it has no final record. Such cells
contribute no rows (or only unanswered ones), so the run summary, the report and the CLI
count them instead of letting them disappear. Records are read as their models
(`records.BuildRecord`, `FindRecord`, `FailedCell`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from metaeval.exit_codes import one_line
from metaeval.protocols.buildfind.records import (
    BUILD_KEY,
    BUILDS,
    FIND_KEY,
    FINDS,
    BuildRecord,
    FailedCell,
    FindRecord,
    parse_build,
    parse_find,
)
from metaeval.records import is_final

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

    from metaeval.protocols.buildfind.record_files import RecordReader

Record = BuildRecord | FindRecord | FailedCell
TABLE = "failed_cells"
UNPARSABLE = "unparsable"  # the finder finished but its answer held no JSON object
SCHEMA: dict[str, PolarsDataType] = {
    "phase": pl.Utf8,
    "slice": pl.Utf8,
    "task": pl.Utf8,
    "builder": pl.Utf8,
    "build_trial": pl.Int32,
    "finder": pl.Utf8,
    "find_trial": pl.Int32,
    "kind": pl.Utf8,
    "attempts": pl.Int32,
    "reason": pl.Utf8,
}


def failed_cells(run: RecordReader) -> pl.DataFrame:
    """One row per failed build or find cell (see the module docstring), in key order."""
    rows: list[dict[str, Any]] = []
    phases = ((BUILDS, BUILD_KEY, "build", parse_build), (FINDS, FIND_KEY, "find", parse_find))
    for name, key_fields, phase, parse in phases:
        history: dict[tuple, list[tuple[bool, Record]]] = {}
        for data in run.read(name):
            key = tuple(data.get(k) for k in key_fields)
            history.setdefault(key, []).append((is_final(data), parse(data)))
        for key, records in sorted(history.items(), key=lambda item: _sort_key(item[0])):
            finals = [record for final, record in records if final]
            if finals:
                last = finals[-1]
                failed = last.status != "ok" if phase == "build" else _find_failed(last)
                if not failed:
                    continue
                kind = _kind(last)
            else:
                last, kind = records[-1][1], "infra_error"
            fields = dict(zip(key_fields, key, strict=True))
            rows.append(
                {
                    "phase": phase,
                    "slice": fields.get("slice", "build"),
                    "task": fields.get("task"),
                    "builder": fields.get("builder"),
                    "build_trial": fields.get("build_trial"),
                    "finder": fields.get("finder", ""),
                    "find_trial": fields.get("find_trial", -1),
                    "kind": kind,
                    "attempts": len(records),
                    "reason": _reason(last),
                }
            )
    return pl.DataFrame(rows, schema=SCHEMA) if rows else pl.DataFrame(schema=SCHEMA)


def failure_counts(failed: pl.DataFrame) -> dict[str, Any]:
    """{"builds": n, "finds": n, "by_kind": {kind: n}} for summary.json and the CLI."""
    by_kind = failed.group_by("kind").len().sort("kind") if failed.height else None
    return {
        "builds": failed.filter(pl.col("phase") == "build").height,
        "finds": failed.filter(pl.col("phase") == "find").height,
        "by_kind": dict(by_kind.iter_rows()) if by_kind is not None else {},
    }


def _find_failed(record: Record) -> bool:
    if not isinstance(record, FindRecord):
        return True  # a cell that wrote no record of its own
    return (
        record.status in ("error", "timeout")
        or not record.answers
        or record.answers_status == UNPARSABLE
    )


def _kind(record: Record) -> str:
    if _unparsable(record):
        return UNPARSABLE
    return str(record.status)


def _unparsable(record: Record) -> bool:
    """The finder finished but its answer could not be read."""
    return (
        isinstance(record, FindRecord)
        and record.status == "ok"
        and record.answers_status == UNPARSABLE
    )


def _reason(record: Record) -> str:
    stop_reason = record.stop_reason if not isinstance(record, FailedCell) else None
    if record.status == "timeout" and not record.error:
        return f"timed out ({stop_reason or 'time limit'})"
    if isinstance(record, FindRecord) and _unparsable(record):
        return one_line(str(record.answers_problem))
    return one_line(record.error or stop_reason or record.status)


def _sort_key(key: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, int) else (1, str(v)) for v in key)
