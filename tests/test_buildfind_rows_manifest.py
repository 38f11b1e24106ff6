"""Question rows carry the manifest fields of the paper's Appendix D (seeds, prompt and spec
hashes, environment hash, metaeval version, creation time), copied from the build and find
records; rows files written before a group of columns existed still read, and a released
file that lacks only part of a group (a column removed) is refused by verification."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from metaeval.protocols.buildfind.rows.extract import rows_from_finds
from metaeval.protocols.buildfind.rows.table import (
    ADDED_COLUMNS,
    COLUMNS,
    file_columns,
    missing_generations,
    read_rows,
    without_lacking,
)

CONFIG = {
    "builders": [{"name": "b", "agent": "codex", "model": "gpt-5.5", "effort": "high"}],
    "finders": [{"name": "f", "agent": "claude-code", "model": "m", "effort": "high"}],
}
OLD_RECORDS = (
    Path(__file__).parent / "fixtures" / "old_format" / "buildfind" / "release" / "records"
)


def _first(name: str) -> dict:
    """The first record of an old-format records file (a complete record as written)."""
    return json.loads((OLD_RECORDS / name).read_text(encoding="utf-8").splitlines()[0])


_WRITTEN_FIND = _first("finds.jsonl")
ANSWERS = {
    "q1": _WRITTEN_FIND["answers"]["q01"] | {"gold": "A", "answer": "A", "correct": True},
    "q2": _WRITTEN_FIND["answers"]["q01"] | {"gold": "B", "answer": "C", "correct": False},
}
BUILD = _first("builds.jsonl") | {"status": "ok", "seed": 111, "prompt_hash": "sha256:build-prompt"}
FIND = _WRITTEN_FIND | {
    "status": "ok",
    "answers_status": "ok",
    "answers": ANSWERS,
    "compile_pass": True,
    "seed": 222,
    "prompt_hash": "sha256:find-prompt",
    "spec_hash": "sha256:spec",
    "environment_hash": "sha256:env",
    "metaeval_version": "9.8.7",
    "created_at": "2026-11-27T09:00:00.000Z",
}
CONTROL = {**FIND, "seed": 333, "prompt_hash": "sha256:control-prompt"}
NEW = ADDED_COLUMNS[-1]


def _rows() -> pl.DataFrame:
    finds = {
        ("formal", "t1", "b", 0, "f", 0): FIND,
        ("question_only", "t1", "", -1, "f", 0): CONTROL,
    }
    return rows_from_finds(CONFIG, {("t1", "b", 0): BUILD}, finds)


def test_rows_copy_the_manifest_fields_of_their_records() -> None:
    rows = _rows()
    formal = rows.filter(pl.col("slice") == "formal").select(NEW).rows()
    expected = (
        111,
        222,
        "sha256:build-prompt",
        "sha256:find-prompt",
        "sha256:spec",
        "sha256:env",
        "9.8.7",
        "2026-11-27T09:00:00.000Z",
    )
    assert formal == [expected, expected]  # one row per question, both from the same run
    control = rows.filter(pl.col("slice") == "question_only").select(NEW).row(0)
    # a control has no build: its build seed and builder prompt hash are null
    assert control[:4] == (None, 333, None, "sha256:control-prompt")
    assert rows.schema["build_seed"] == pl.Int64 and rows.schema["find_seed"] == pl.Int64


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_rows_written_before_a_column_group_read_as_null(tmp_path: Path, suffix: str) -> None:
    old = _rows().drop(*NEW)
    path = tmp_path / f"old{suffix}"
    old.write_csv(path) if suffix == ".csv" else old.write_parquet(path)
    rows = read_rows(path)
    assert list(rows.columns) == list(COLUMNS)
    assert rows.select(NEW).null_count().row(0) == (rows.height,) * len(NEW)
    # the older group too: a file from before both groups
    older = _rows().drop(*(c for group in ADDED_COLUMNS for c in group))
    older.write_parquet(tmp_path / "older.parquet")
    assert read_rows(tmp_path / "older.parquet").get_column("finder_effort").is_null().all()


def test_a_released_file_lacking_part_of_a_group_is_refused(tmp_path: Path) -> None:
    """`verify-release` (check_rows_columns) refuses a rows file with a column removed; reading
    the rows for analysis accepts it (a hand-made table may hold some optional columns)."""
    from metaeval.protocols.buildfind.release.verify import check_rows_columns

    data = tmp_path / "data"
    data.mkdir()
    _rows().drop("find_seed").write_parquet(data / "question_rows.parquet")
    _rows().drop("find_seed").write_csv(data / "question_rows.csv")
    assert read_rows(data / "question_rows.parquet").get_column("find_seed").is_null().all()
    assert check_rows_columns(tmp_path) == [
        "data/question_rows.parquet: lacks column(s) find_seed but holds build_seed, "
        "builder_prompt_hash, finder_prompt_hash, spec_hash, environment_hash, "
        "metaeval_version, find_created_at, which no rows format wrote without them"
    ]
    # the older group dropped while the newer is kept is no format either
    _rows().drop(*ADDED_COLUMNS[0]).write_parquet(data / "question_rows.parquet")
    _rows().drop(*ADDED_COLUMNS[0]).write_csv(data / "question_rows.csv")
    (problem,) = check_rows_columns(tmp_path)
    assert "lacks column(s) finder_effort" in problem
    # a file from before the newest group is a format metaeval wrote; the CSV must match it
    _rows().drop(*NEW).write_parquet(data / "question_rows.parquet")
    _rows().drop(*NEW).write_csv(data / "question_rows.csv")
    assert check_rows_columns(tmp_path) == []
    _rows().write_csv(data / "question_rows.csv")
    (problem,) = check_rows_columns(tmp_path)
    assert problem.startswith("data/question_rows.csv: columns ")


def test_verification_compares_only_the_columns_an_old_file_has(tmp_path: Path) -> None:
    derived = _rows()
    path = tmp_path / "old.parquet"
    derived.drop(*NEW).write_parquet(path)
    assert file_columns(path) == [c for c in COLUMNS if c not in NEW]
    assert missing_generations(file_columns(path)) == (list(NEW), None)
    compared = without_lacking(derived, file_columns(path))
    assert compared.equals(read_rows(path))
    # a current file: nothing is left out, every column is compared
    derived.write_parquet(path)
    assert without_lacking(derived, file_columns(path)).equals(derived)
