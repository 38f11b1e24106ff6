"""Released tables against recomputed ones: column by column, floats to `TOLERANCE`, at most
`MAX_CELLS_PER_TABLE` differing cells reported per table (Parquet frames and CSV text)."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

TOLERANCE = 1e-9
MAX_CELLS_PER_TABLE = 5


def _key_text(df: pl.DataFrame, index: int) -> str:
    keys = [c for c, t in df.schema.items() if t == pl.String][:4]
    row = df.row(index, named=True)
    return ", ".join(f"{k}={row[k]}" for k in keys)


def _float_mismatch(a: pl.Series, b: pl.Series) -> pl.Series:
    """True where two float columns differ: by more than TOLERANCE, in nullness, or where one
    is NaN or infinite and the other is not the same."""
    pair = pl.DataFrame({"a": a.cast(pl.Float64), "b": b.cast(pl.Float64)})
    x, y = pl.col("a"), pl.col("b")
    same = ((x - y).abs() <= TOLERANCE) | (x == y) | (x.is_nan() & y.is_nan())
    ok = (x.is_null() & y.is_null()) | same.fill_null(False)
    return pair.select(~ok).to_series()


def _plain(value: object) -> object:
    return value.to_list() if isinstance(value, pl.Series) else value


def _report(label: str, column: str, bad: pl.Series, a: pl.Series, b: pl.Series, keys) -> list:
    """One line per differing cell (the first few), naming the row by its key columns."""
    rows = bad.arg_true().to_list()
    lines = [
        f"{label}: row {i + 1} ({_key_text(keys, i)}) column {column}: "
        f"released {_plain(a[i])!r}, recomputed {_plain(b[i])!r}"
        for i in rows[:MAX_CELLS_PER_TABLE]
    ]
    if len(rows) > MAX_CELLS_PER_TABLE:
        lines.append(f"{label}: column {column}: {len(rows)} cells differ in all")
    return lines


def compare_frames(label: str, released: pl.DataFrame, recomputed: pl.DataFrame) -> list[str]:
    """Differences between a released and a recomputed table (columns, types, rows, cells)."""
    if released.columns != recomputed.columns:
        return [f"{label}: columns {released.columns} differ from recomputed {recomputed.columns}"]
    if released.height != recomputed.height:
        return [f"{label}: {released.height} rows, recomputed {recomputed.height}"]
    problems = []
    for column in recomputed.columns:
        a, b = released.get_column(column), recomputed.get_column(column)
        if a.dtype != b.dtype:
            problems.append(f"{label}: column {column} has type {a.dtype}, recomputed {b.dtype}")
            continue
        bad = _float_mismatch(a, b) if a.dtype.is_float() else a.ne_missing(b)
        problems += _report(label, column, bad, a, b, recomputed)
    return problems


def _as_strings(df: pl.DataFrame) -> pl.DataFrame:
    from metaeval.protocols.buildfind.tables.write import csv_ready

    return pl.read_csv(io.StringIO(csv_ready(df).write_csv()), infer_schema_length=0)


def compare_csv(label: str, path: Path, recomputed: pl.DataFrame) -> list[str]:
    """A released CSV table against the recomputed table written as CSV (floats to 1e-9)."""
    try:
        released = pl.read_csv(path, infer_schema_length=0)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        return [f"{label}: unreadable CSV ({exc})"]
    if released.columns != recomputed.columns:
        return [f"{label}: columns {released.columns} differ from recomputed {recomputed.columns}"]
    if released.height != recomputed.height:
        return [f"{label}: {released.height} rows, recomputed {recomputed.height}"]
    if recomputed.height == 0:
        return []
    expected = _as_strings(recomputed)
    problems = []
    for column in recomputed.columns:
        a, b = released.get_column(column), expected.get_column(column)
        bad = a.ne_missing(b)
        if recomputed.schema[column].is_float() and bad.any():
            x, y = a.cast(pl.Float64, strict=False), b.cast(pl.Float64, strict=False)
            parsed = (x.is_not_null() & y.is_not_null()) | (a.is_null() & b.is_null())
            bad = bad & ~(parsed & ~_float_mismatch(x, y))
        problems += _report(label, column, bad, a, b, recomputed)
    return problems
