"""The canonical question-rows table: one row per (slice, build, find run, question).

Every published build-and-find number is computed from this table alone, so it is written
with the run (Parquet and CSV) and `metaeval buildfind analyze --rows FILE` recomputes the
analysis from it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.tables.files import csv_unescaped, write_csv, write_parquet

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

SLICES = ("formal", "question_only", "spec_only")
LABELS = ("implemented_gold", "implemented_non_gold", "absent_ambiguous", "unlabeled")
LABEL_SOURCES = ("consensus_prelabel", "manual_review", "none")

# column -> (polars dtype, meaning). Order is the canonical column order.
COLUMNS: dict[str, tuple[PolarsDataType, str]] = {
    "slice": (pl.Utf8, "formal (artifact present), question_only or spec_only control"),
    "task": (pl.Utf8, "task id within the pack"),
    "builder": (pl.Utf8, "builder name from the run config; '' for question_only/spec_only"),
    "builder_family": (pl.Utf8, "builder's adapter family (e.g. anthropic, openai, local)"),
    "finder": (pl.Utf8, "finder name from the run config"),
    "finder_family": (pl.Utf8, "finder's adapter family"),
    "effort_panel": (
        pl.Utf8,
        "builder's effort (formal rows) or finder's effort (controls), as configured; the "
        "analysis forms panels from it and finder_effort",
    ),
    "build_trial": (pl.Int32, "build trial index (0-based); -1 for the controls"),
    "find_trial": (pl.Int32, "find trial index (0-based)"),
    "question_id": (pl.Utf8, "question id from questions.yaml"),
    "gold": (pl.Utf8, "canonical gold option key (A-D)"),
    "answer": (pl.Utf8, "canonical (de-shuffled) answer key; null when unanswered"),
    "correct": (pl.Boolean, "answer == gold (unanswered counts as not correct)"),
    "compile_pass": (pl.Boolean, "compile probe passed for the artifact; null for controls"),
    "label": (pl.Utf8, "implementation label of the (artifact, question) pair"),
    "label_source": (pl.Utf8, "consensus_prelabel, manual_review or none"),
    "novel_retrieval_bytes": (pl.Int64, "novel tool-result bytes delivered to the finder"),
    "novel_tool_call_bytes": (pl.Int64, "argument bytes of the finder's read and search calls"),
    "input_tokens": (pl.Int64, "finder input tokens as the provider reported them"),
    "output_tokens": (pl.Int64, "finder output tokens as the provider reported them"),
    # run metadata (Appendix D); optional on read: rows written before they existed read null
    "finder_effort": (pl.Utf8, "finder's configured effort; null in rows that predate it"),
    "builder_agent": (pl.Utf8, "builder's agent id (e.g. codex); null for controls"),
    "builder_model": (pl.Utf8, "builder's model as configured; null if none or a control"),
    "finder_agent": (pl.Utf8, "finder's agent id (e.g. claude-code)"),
    "finder_model": (pl.Utf8, "finder's model as configured; null if none"),
    # the rest of the manifest fields Appendix D lists, copied from the build and find records
    "build_seed": (pl.Int64, "seed of the build invocation (build record); null for controls"),
    "find_seed": (pl.Int64, "seed of the find invocation, also its option-shuffle seed"),
    "builder_prompt_hash": (pl.Utf8, "sha256 of the builder's prompt; null for controls"),
    "finder_prompt_hash": (pl.Utf8, "sha256 of the finder's prompt"),
    "spec_hash": (pl.Utf8, "sha256 of the task specification the find run recorded"),
    "environment_hash": (pl.Utf8, "hash of the software environment of the find run"),
    "metaeval_version": (pl.Utf8, "metaeval version that ran the find cell"),
    "find_created_at": (pl.Utf8, "UTC time the find record was written (ISO 8601)"),
}
ADDED_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("finder_effort", "builder_agent", "builder_model", "finder_agent", "finder_model"),
    (
        "build_seed",
        "find_seed",
        "builder_prompt_hash",
        "finder_prompt_hash",
        "spec_hash",
        "environment_hash",
        "metaeval_version",
        "find_created_at",
    ),
)
"""Columns added after the first rows format, one group per format change, oldest first.
A rows file written before a group existed lacks that group and every later one."""
OPTIONAL = tuple(column for group in ADDED_COLUMNS for column in group)
"""Columns a rows file may lack (older runs): they read as null."""
SCHEMA: dict[str, PolarsDataType] = {name: dtype for name, (dtype, _) in COLUMNS.items()}


def empty_rows() -> pl.DataFrame:
    """A rows table with the canonical schema and no rows."""
    return pl.DataFrame(schema=SCHEMA)


# null means: unanswered; no artifact (controls); not measured or not reported by the provider
NULLABLE = (
    "answer",
    "compile_pass",
    "novel_retrieval_bytes",
    "novel_tool_call_bytes",
    "input_tokens",
    "output_tokens",
    *OPTIONAL,
)
NON_EMPTY = ("task", "finder", "question_id")  # key columns; builder is '' for the controls
TRUE_WORDS = ("true", "1", "yes")
FALSE_WORDS = ("false", "0", "no")
OPTION_KEYS = ("A", "B", "C", "D")


def missing_generations(columns: list[str]) -> tuple[list[str], str | None]:
    """(optional columns a rows file with `columns` lacks, a problem or None).

    A file metaeval wrote lacks only whole groups of `ADDED_COLUMNS`, the newest ones: it was
    written before them. Lacking part of a group, or a group while holding a later one, is no
    format any version wrote (a column was removed), and the problem says which. Reading rows
    allows any optional column to be absent (a hand-made table may hold some); verifying a
    release does not.
    """
    present = set(columns)
    missing: list[str] = []
    for index, group in enumerate(ADDED_COLUMNS):
        lacking = [c for c in group if c not in present]
        if not lacking:
            continue
        later = [c for g in ADDED_COLUMNS[index + 1 :] for c in g if c in present]
        if len(lacking) < len(group) or later:
            held = [c for c in group if c in present] + later
            return missing, (
                f"lacks column(s) {', '.join(lacking)} but holds {', '.join(held)}, "
                "which no rows format wrote without them"
            )
        missing += lacking
    return missing, None


def conform(df: pl.DataFrame, source: str = "<rows>", *, line_offset: int = 1) -> pl.DataFrame:
    """Check columns and values, cast to the canonical schema and column order.

    A value that does not fit its column is reported with the file, the row (1-based, as a
    line of the file when `line_offset` is the number of lines before the first data row) and
    the column. Booleans given as text read true/false/1/0/yes/no in any case.
    """
    df = df.with_columns(pl.lit(None, SCHEMA[c]).alias(c) for c in OPTIONAL if c not in df.columns)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ConfigError(f"missing column(s): {', '.join(missing)}", file=source)
    extra = [c for c in df.columns if c not in COLUMNS]
    if extra:
        raise ConfigError(f"unknown column(s): {', '.join(extra)}", file=source)
    df = df.select([_cast_column(df.get_column(c), source, line_offset) for c in COLUMNS])
    for column in COLUMNS:
        if column in NULLABLE:
            continue
        nulls = df.get_column(column).is_null()
        if nulls.any():
            row = int(nulls.arg_true()[0])
            raise ConfigError(
                f"row {row + line_offset}: empty value (this column is required)",
                file=source,
                field=column,
            )
    for column in NON_EMPTY:
        empty = df.get_column(column).str.strip_chars() == ""
        if empty.any():
            row = int(empty.arg_true()[0])
            raise ConfigError(f"row {row + line_offset}: empty value", file=source, field=column)
    allowed_values = (
        ("slice", SLICES),
        ("label", LABELS),
        ("label_source", LABEL_SOURCES),
        ("gold", OPTION_KEYS),
        ("answer", OPTION_KEYS),
    )
    for column, allowed in allowed_values:
        values = df.get_column(column)
        bad = values.is_not_null() & ~values.is_in(list(allowed))
        if bad.any():
            row = int(bad.arg_true()[0])
            raise ConfigError(
                f"row {row + line_offset}: value {values[row]!r} not in {', '.join(allowed)}"
                f" ({int(bad.sum())} row(s) like this)",
                file=source,
                field=column,
            )
    return df


def _cast_column(values: pl.Series, source: str, line_offset: int) -> pl.Series:
    """`values` cast to its canonical dtype; ConfigError naming the first value that fails."""
    name = values.name
    dtype = SCHEMA[name]
    if values.dtype == dtype:
        return values
    if values.dtype == pl.Null:
        return values.cast(dtype)
    text = values.dtype in (pl.Utf8, pl.String)
    if text:
        stripped = values.str.strip_chars()
        values = stripped.replace("", None) if dtype != pl.Utf8 else values
    if dtype == pl.Boolean and text:
        lowered = values.str.to_lowercase()
        words = dict.fromkeys(TRUE_WORDS, True) | dict.fromkeys(FALSE_WORDS, False)
        cast = lowered.replace_strict(words, default=None, return_dtype=pl.Boolean)
        expected = "one of true/false/1/0/yes/no"
    else:
        try:
            cast = values.cast(dtype, strict=False)
        except pl.exceptions.PolarsError as exc:
            raise ConfigError(
                f"column of type {values.dtype} cannot be read as {dtype}: {exc}",
                file=source,
                field=name,
            ) from exc
        expected = f"a {dtype} value"
    failed = values.is_not_null() & cast.is_null()
    if failed.any():
        row = int(failed.arg_true()[0])
        raise ConfigError(
            f"row {row + line_offset}: value {_show(values[row])} is not {expected}"
            f" ({int(failed.sum())} row(s) like this)",
            file=source,
            field=name,
        )
    return cast.alias(name)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


PARQUET_MAGIC = b"PAR1"


def read_rows(path: Path) -> pl.DataFrame:
    """Load a rows table from Parquet or CSV and conform it.

    Every problem is a ConfigError naming the file (and the row and column where there is
    one): a missing or empty file, bytes that are not Parquet or not UTF-8 CSV, a truncated
    file, missing or unknown columns, values of the wrong type.
    """
    where = str(path)
    if not path.is_file():
        raise ConfigError("rows file not found", file=where)
    if path.suffix not in (".parquet", ".csv"):
        raise ConfigError("rows file must be .parquet or .csv", file=where)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the rows file: {exc.strerror or exc}", file=where) from exc
    if not data.strip():
        raise ConfigError("rows file is empty", file=where)
    if path.suffix == ".parquet":
        return conform(_parse_parquet(data, where), where, line_offset=1)
    return conform(_parse_csv(data, where), where, line_offset=2)


def _parse_parquet(data: bytes, where: str) -> pl.DataFrame:
    if len(data) < 12 or not data.startswith(PARQUET_MAGIC):
        raise ConfigError("not a Parquet file (no PAR1 header)", file=where)
    if not data.endswith(PARQUET_MAGIC):
        raise ConfigError("truncated Parquet file (no PAR1 footer)", file=where)
    try:
        return pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - polars/arrow raise many types for corrupt files
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"unreadable Parquet file: {first}", file=where) from exc


def _parse_csv(data: bytes, where: str) -> pl.DataFrame:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"line {line}: not UTF-8 text ({exc.reason})", file=where) from exc
    if "\x00" in text:
        raise ConfigError("not a CSV text file (holds NUL bytes)", file=where)
    try:
        df = pl.read_csv(io.StringIO(text), infer_schema_length=0)
    except Exception as exc:  # noqa: BLE001 - polars raises ComputeError, NoDataError, ...
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"malformed CSV: {first}", file=where) from exc
    df = csv_unescaped(df)  # text cells written with a leading ' against CSV injection
    # CSV cannot tell an empty string from a missing value: text columns read '' (builder of
    # a control row), except `answer` (empty means unanswered) and the optional metadata.
    keep_null = ("answer", *OPTIONAL)
    text_columns = [c for c in df.columns if SCHEMA.get(c) == pl.Utf8 and c not in keep_null]
    return df.with_columns(pl.col(text_columns).fill_null(""))


def file_columns(path: Path) -> list[str]:
    """The column names a rows file (Parquet or CSV) holds, as written; [] if unreadable."""
    try:
        if path.suffix == ".parquet":
            return list(pl.read_parquet_schema(path))
        return list(pl.read_csv(path, n_rows=0, infer_schema_length=0).columns)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError):
        return []


def without_lacking(derived: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """`derived` rows with null in the optional columns a rows file holding `columns` lacks:
    what that file reads as, so only the columns it has are compared."""
    lacking, _ = missing_generations(columns)
    return derived.with_columns(pl.lit(None, SCHEMA[c]).alias(c) for c in lacking)


def write_rows(df: pl.DataFrame, out_dir: Path, stem: str = "question_rows") -> list[Path]:
    """Write the conformed table as Parquet and CSV; returns both paths."""
    df = conform(df)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.parquet", out_dir / f"{stem}.csv"]
    write_parquet(df, paths[0], out_dir)
    write_csv(df, paths[1], out_dir)
    return paths


def schema_markdown() -> str:
    """Column-by-column documentation of the table (for docs and reports)."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{c}` | {dtype} | {text} |" for c, (dtype, text) in COLUMNS.items()]
    return "\n".join(lines) + "\n"
