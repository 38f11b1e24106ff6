"""The manual-review CSV of implementation labels (`labels.review_queue` makes its rows).

A person fills in the ``label`` column (one of `labels.FILLABLE_LABELS`), and optionally
``reviewer`` and ``notes``; an empty label means the pair is not reviewed yet.
`write_review_csv` writes the queue safely for a spreadsheet, `read_review_csv` reads a filled
file back with every problem named by file, row and field.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.labels import FILLABLE_LABELS, PAIR_KEY
from metaeval.records.durable import atomic_write
from metaeval.records.nofollow import read_capped
from metaeval.safe_text import csv_cell, csv_value

REVIEW_REQUIRED = (*PAIR_KEY, "label")
MAX_REVIEW_BYTES = 64 * 1024 * 1024


def write_review_csv(df: pl.DataFrame, path: Path, root: Path | None = None) -> Path:
    """Write a review queue as UTF-8 CSV (nulls as empty fields); returns the path.

    Text cells a spreadsheet would run as a formula get a leading ``'`` (`safe_text.csv_cell`,
    removed again by `read_review_csv`). The file is written atomically and not through a link
    below `root` (default: its own directory)."""
    missing = [c for c in REVIEW_REQUIRED if c not in df.columns]
    if missing:
        raise ConfigError(f"review table lacks column(s): {', '.join(missing)}", file=str(path))
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(df.columns)
    for row in df.iter_rows():
        writer.writerow(
            ["" if v is None else csv_cell(v) if isinstance(v, str) else v for v in row]
        )
    atomic_write(path, out.getvalue().encode("utf-8"), root=root, mkdir=True)
    return path


def read_review_csv(path: Path) -> pl.DataFrame:
    """Load a filled review CSV and validate it.

    Rows are numbered from 1 for the first row after the header. A filled ``label`` must be one
    of ``FILLABLE_LABELS`` (surrounding spaces are ignored); an empty label means "not reviewed
    yet" and is returned as null. Raises ConfigError naming the file, the row and the field for
    a bad label, a non-integer ``build_trial``, an empty key field or a pair listed twice.
    """
    source = str(path)
    # a regular file only (never a FIFO or a device), at most MAX_REVIEW_BYTES
    data = read_capped(path, MAX_REVIEW_BYTES, follow_link=True)
    if data is None:
        raise ConfigError("review file not found", file=source)
    try:
        return _read_review_rows(data.decode("utf-8"), source)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason})", file=source) from exc
    except csv.Error as exc:
        raise ConfigError(f"malformed CSV: {exc}", file=source) from exc


def _read_review_rows(text: str, source: str) -> pl.DataFrame:
    with io.StringIO(text, newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in REVIEW_REQUIRED if c not in header]
        if missing:
            raise ConfigError(f"missing column(s): {', '.join(missing)}", file=source)
        records: list[dict[str, object]] = []
        seen: dict[tuple, int] = {}
        for number, raw in enumerate(reader, start=1):
            if None in raw:
                raise ConfigError(f"row {number}: more fields than header columns", file=source)
            rec: dict[str, object] = {c: csv_value(raw.get(c) or "") for c in header}
            for column in ("task", "question_id"):
                if not str(rec[column]).strip():
                    raise ConfigError(f"row {number}: empty value", file=source, field=column)
            try:
                rec["build_trial"] = trial = int(str(rec["build_trial"]).strip())
                if not -(2**31) <= trial < 2**31:  # an Int32 column
                    raise ValueError("out of range")
            except ValueError:
                raise ConfigError(
                    f"row {number}: build_trial {rec['build_trial']!r} is not an integer",
                    file=source,
                    field="build_trial",
                ) from None
            label = str(rec["label"]).strip()
            if label and label not in FILLABLE_LABELS:
                raise ConfigError(
                    f"row {number}: label {label!r} is not one of {', '.join(FILLABLE_LABELS)} "
                    "(leave it empty for a pair not reviewed yet)",
                    file=source,
                    field="label",
                )
            rec["label"] = label or None
            key = tuple(rec[k] for k in PAIR_KEY)
            if key in seen:
                raise ConfigError(
                    f"row {number}: pair already listed in row {seen[key]}",
                    file=source,
                    field="question_id",
                )
            seen[key] = number
            records.append(rec)
    schema = {c: pl.Utf8 for c in header} | {"build_trial": pl.Int32}
    if not records:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(records, schema=schema)
