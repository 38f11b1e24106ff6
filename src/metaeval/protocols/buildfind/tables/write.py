"""Write the build-and-find analysis tables with column-by-column documentation.

Each table goes to ``<out>/tables/<name>.csv`` and ``<name>.parquet``; ``tables/README.md``
documents every column from ``tables.docs.TABLE_DOCS``. A column the docs do not cover is written anyway
but shows up as **not documented** in the README, in a warning list at its top, and in
:func:`undocumented_columns`, so nothing ships undocumented without notice.

Rates (accuracy, coverage, agreement) are fractions in [0, 1]; columns holding percentage
points say so in their documentation.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.pair_sets import pair_set_doc
from metaeval.protocols.buildfind.tables.docs import (
    TABLE_DOCS,
    TABLE_TITLES,
    column_doc,
    table_order,
)
from metaeval.records.durable import atomic_write

NOT_DOCUMENTED = "not documented"
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def undocumented_columns(tables: dict[str, pl.DataFrame]) -> dict[str, list[str]]:
    """Per table, the columns TABLE_DOCS does not document (tables with none are left out)."""
    out: dict[str, list[str]] = {}
    for name in table_order(set(tables)):
        missing = [c for c in tables[name].columns if column_doc(name, c) is None]
        if missing:
            out[name] = missing
    return out


def _check_name(name: str) -> None:
    if not _NAME.match(name) or name.lower() == "readme":
        raise ConfigError(f"table name {name!r} cannot be used as a file name", field="tables")


def csv_ready(df: pl.DataFrame) -> pl.DataFrame:
    """Nested columns (lists, structs) become JSON text, which CSV can hold; text cells are
    escaped against CSV injection (`files.csv_escaped`)."""
    from metaeval.protocols.buildfind.tables.files import csv_escaped

    nested = [c for c, t in df.schema.items() if t.is_nested()]
    if nested:
        df = df.with_columns(
            pl.col(c).map_elements(
                lambda v: json.dumps(v.to_list() if isinstance(v, pl.Series) else v, default=str),
                return_dtype=pl.Utf8,
            )
            for c in nested
        )
    return csv_escaped(df)


def tables_readme(tables: dict[str, pl.DataFrame], warnings: list[str] | None = None) -> str:
    """README.md text documenting every written table column by column; ``warnings`` (e.g.
    labels made by the finders being scored) are printed at the top."""
    lines = [
        "# Build-and-find tables",
        "",
        "Each table is stored twice with the same content: `<name>.csv` and `<name>.parquet`.",
        "Rates are fractions in [0, 1]; columns in percentage points say so below. "
        "Null cells are empty in CSV.",
        "",
    ]
    for warning in warnings or []:
        lines += [f"> **Warning:** {warning}", ""]
    flagged = undocumented_columns(tables)
    if flagged:
        lines += [
            "> **Warning: undocumented columns.** These columns are written but have no "
            "documentation yet:",
            ">",
        ]
        lines += [
            f"> - `{name}`: {', '.join(f'`{c}`' for c in cols)}" for name, cols in flagged.items()
        ]
        lines.append("")
    if not tables:
        lines += ["No tables were written.", ""]
    for name in table_order(set(tables)):
        df = tables[name]
        lines += [f"## {name}", ""]
        if name in TABLE_TITLES:
            lines += [TABLE_TITLES[name], ""]
        elif name not in TABLE_DOCS:
            lines += ["Table not known to the documentation; every column is flagged below.", ""]
        pairs = pair_set_doc(name)
        if pairs and name in TABLE_DOCS:
            lines += [pairs, ""]
        lines += [f"Files: `{name}.csv`, `{name}.parquet`. Rows: {df.height}.", ""]
        lines += ["| column | type | meaning |", "|---|---|---|"]
        for column, dtype in df.schema.items():
            text = column_doc(name, column)
            meaning = f"**{NOT_DOCUMENTED}**" if text is None else text.replace("|", "\\|")
            lines.append(f"| `{column}` | {dtype} | {meaning} |")
        absent = [c for c in TABLE_DOCS.get(name, {}) if c not in df.columns]
        if absent:
            lines += ["", f"Documented but not present: {', '.join(f'`{c}`' for c in absent)}."]
        lines.append("")
    lines += _rows_section()
    return "\n".join(lines).rstrip() + "\n"


def _rows_section() -> list[str]:
    """The columns of the question rows every table above is computed from."""
    from metaeval.protocols.buildfind.rows.table import ADDED_COLUMNS, schema_markdown

    newest = ", ".join(f"`{c}`" for c in ADDED_COLUMNS[-1])
    return [
        "## question_rows (the input of every table)",
        "",
        "One row per (slice, artifact, find run, question): `question_rows.parquet` and "
        "`.csv` in the run directory, `data/` in a release. The run metadata columns are the "
        "manifest fields of the paper's Appendix D, copied from the build and find records; "
        f"rows written before a group of them existed (the newest group: {newest}) read "
        "that group as null.",
        "",
        schema_markdown().rstrip(),
        "",
    ]


def write_tables(
    tables: dict[str, pl.DataFrame], out_dir: Path, warnings: list[str] | None = None
) -> list[Path]:
    """Write each table as CSV and Parquet under ``out_dir/tables/`` plus its README.md.

    Returns the written paths: for each table (known tables first) its CSV then its Parquet,
    and README.md last.
    """
    for name in tables:
        _check_name(name)
    from metaeval.protocols.buildfind.tables.files import write_parquet

    folder = out_dir / "tables"
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for name in table_order(set(tables)):
        df = tables[name]
        csv_path, parquet_path = folder / f"{name}.csv", folder / f"{name}.parquet"
        # csv_ready escapes text cells already (the release check writes tables through it)
        atomic_write(csv_path, csv_ready(df).write_csv().encode("utf-8"), root=out_dir, mkdir=True)
        write_parquet(df, parquet_path, out_dir)
        paths += [csv_path, parquet_path]
    readme = folder / "README.md"
    atomic_write(readme, tables_readme(tables, warnings).encode("utf-8"), root=out_dir, mkdir=True)
    paths.append(readme)
    return paths
