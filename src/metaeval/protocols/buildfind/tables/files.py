"""Tables written as files (Parquet, CSV) and CSV read back, for run and output directories.

Files are written atomically and never through a link (`metaeval.records.durable.atomic_write`
from the directory the user named). Text cells of a CSV follow the CSV-injection rule of
`metaeval.safe_text`: a cell a spreadsheet would run as a formula gets a leading ``'``, which
`csv_unescaped` removes again when the file is read; numeric columns are written as they are.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import polars as pl

from metaeval.records.durable import atomic_write
from metaeval.safe_text import CSV_FORMULA_START

# the rules of safe_text.csv_cell / csv_value, as polars expressions
_QUOTED = "^[" + re.escape("".join(CSV_FORMULA_START) + "'") + "]"
_WRITTEN_QUOTED = "^'" + _QUOTED[1:]


def _text_columns(df: pl.DataFrame) -> list[str]:
    return [name for name, dtype in df.schema.items() if dtype == pl.String]


def csv_escaped(df: pl.DataFrame) -> pl.DataFrame:
    """`df` with each text cell as `safe_text.csv_cell` writes it."""
    return df.with_columns(
        pl.when(pl.col(c).str.contains(_QUOTED))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in _text_columns(df)
    )


def csv_unescaped(df: pl.DataFrame) -> pl.DataFrame:
    """`df` (read from a CSV) with each text cell as `safe_text.csv_value` reads it."""
    return df.with_columns(
        pl.when(pl.col(c).str.contains(_WRITTEN_QUOTED))
        .then(pl.col(c).str.slice(1))
        .otherwise(pl.col(c))
        .alias(c)
        for c in _text_columns(df)
    )


def write_csv(df: pl.DataFrame, path: Path, root: Path) -> Path:
    """Write `df` as CSV (text cells escaped) to `path`, a file below directory `root`."""
    atomic_write(path, csv_escaped(df).write_csv().encode("utf-8"), root=root, mkdir=True)
    return path


def write_parquet(df: pl.DataFrame, path: Path, root: Path) -> Path:
    """Write `df` as Parquet to `path`, a file below directory `root`."""
    buf = io.BytesIO()
    df.write_parquet(buf)
    atomic_write(path, buf.getvalue(), root=root, mkdir=True)
    return path
