"""Cells of a build-and-find run that stayed failed, with their reasons.

A build cell fails when its final record is not `ok` (its artifact is never inspected) or
when it has no final record at all: every attempt was an infrastructure failure and the
recovery budget is spent. A find cell fails when its final record is an error or a timeout
(its questions are unanswered or absent), when its answer could not be parsed
(`unparsable`: scored neither right nor wrong) or when it has no final record. Such cells
contribute no rows (or only unanswered ones), so the run summary, the report and the CLI
count them instead of letting them disappear.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from metaeval.exit_codes import one_line
from metaeval.protocols.buildfind.records import BUILD_KEY, BUILDS, FIND_KEY, FINDS
from metaeval.records import is_final

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

    from metaeval.protocols.buildfind.record_files import RecordReader

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
    for name, key_fields, phase in ((BUILDS, BUILD_KEY, "build"), (FINDS, FIND_KEY, "find")):
        history: dict[tuple, list[dict]] = {}
        for record in run.read(name):
            history.setdefault(tuple(record.get(k) for k in key_fields), []).append(record)
        for key, records in sorted(history.items(), key=lambda item: _sort_key(item[0])):
            finals = [r for r in records if is_final(r)]
            if finals:
                last = finals[-1]
                failed = last.get("status") != "ok" if phase == "build" else _find_failed(last)
                if not failed:
                    continue
                kind = _kind(last)
            else:
                last, kind = records[-1], "infra_error"
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


def _find_failed(record: dict[str, Any]) -> bool:
    return (
        record.get("status") in ("error", "timeout")
        or not record.get("answers")
        or record.get("answers_status") == UNPARSABLE
    )


def _kind(record: dict[str, Any]) -> str:
    if record.get("status") == "ok" and record.get("answers_status") == UNPARSABLE:
        return UNPARSABLE
    return str(record.get("status"))


def _reason(record: dict[str, Any]) -> str:
    if record.get("status") == "timeout" and not record.get("error"):
        return f"timed out ({record.get('stop_reason') or 'time limit'})"
    if _kind(record) == UNPARSABLE:
        return one_line(str(record.get("answers_problem")))
    return one_line(record.get("error") or record.get("stop_reason") or record.get("status"))


def _sort_key(key: tuple) -> tuple:
    return tuple((0, v) if isinstance(v, int) else (1, str(v)) for v in key)
