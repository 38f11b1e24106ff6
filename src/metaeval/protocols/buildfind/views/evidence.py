"""The restricted-view evidence layer: view rows and per-view tables.

View find runs (`records.VIEW_FINDS`) never enter the canonical question rows, so no full-view
table can change because of them. They get their own rows table, ``view_rows.{parquet,csv}``:
the canonical columns plus a leading ``view`` column. Their implementation labels are the
full-view audit's labels of the same (artifact, question) pair: the label describes the
artifact, not what a finder saw of it.

Per-view tables come from the same analysis code as the full view, run on the view's formal
rows next to the full run's control rows, so the compile-pass panel, the audited scoring set,
the all-correct condition of R_b and the recovery gate apply exactly as they do there.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from metaeval.errors import ConfigError
from metaeval.protocols.buildfind.analysis.pair_sets import SPLIT, Reading
from metaeval.protocols.buildfind.analysis.panels import DEFAULT_PANELS, form_panels
from metaeval.protocols.buildfind.records import (
    BUILD_KEY,
    BUILDS,
    VIEW_FIND_KEY,
    VIEW_FINDS,
    logical_view,
)
from metaeval.protocols.buildfind.rows.extract import rows_from_finds
from metaeval.protocols.buildfind.rows.table import COLUMNS, SCHEMA, conform
from metaeval.protocols.buildfind.tables.files import csv_unescaped, write_csv, write_parquet
from metaeval.records import RunDir

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

VIEW_ROWS = "view_rows"
VIEW_SCHEMA: dict[str, PolarsDataType] = {"view": pl.Utf8, **SCHEMA}
PAIR = ["task", "builder", "build_trial", "question_id"]
_FORMAL_GROUPS = ("artifact_present", "compile_pass", "compile_failed")


def empty_view_rows() -> pl.DataFrame:
    """A view rows table with no rows."""
    return pl.DataFrame(schema=VIEW_SCHEMA)


def conform_view_rows(df: pl.DataFrame, source: str = "<view rows>") -> pl.DataFrame:
    """Check and cast a view rows table: a non-empty `view` column, then the canonical rows."""
    if "view" not in df.columns:
        raise ConfigError("missing column(s): view", file=source)
    views = df.get_column("view").cast(pl.Utf8)
    if views.null_count() or (views == "").any():
        raise ConfigError("empty view name", file=source, field="view")
    rest = conform(df.drop("view"), source)
    if rest.filter(pl.col("slice") != "formal").height:
        raise ConfigError("view rows must all be formal rows", file=source, field="slice")
    return rest.insert_column(0, views.alias("view"))


def read_view_rows(path: Path) -> pl.DataFrame:
    """Load a view rows table (Parquet or CSV) and conform it."""
    if not path.is_file():
        raise ConfigError("view rows file not found", file=str(path))
    if path.suffix == ".parquet":
        df = pl.read_parquet(path)
    elif path.suffix == ".csv":
        df = csv_unescaped(pl.read_csv(path, schema_overrides=VIEW_SCHEMA))
    else:
        raise ConfigError("view rows file must be .parquet or .csv", file=str(path))
    return conform_view_rows(df, str(path))


def write_view_rows(df: pl.DataFrame, out_dir: Path) -> list[Path]:
    """Write the view rows as Parquet and CSV; returns both paths."""
    df = conform_view_rows(df)
    paths = [out_dir / f"{VIEW_ROWS}.parquet", out_dir / f"{VIEW_ROWS}.csv"]
    write_parquet(df, paths[0], out_dir)
    write_csv(df, paths[1], out_dir)
    return paths


def view_records(run: RunDir) -> dict[tuple, dict]:
    """The logical view of the view find records, keyed by VIEW_FIND_KEY."""
    return logical_view(run.read(VIEW_FINDS), VIEW_FIND_KEY)


def view_rows_from_records(run: RunDir, labelled: pl.DataFrame) -> pl.DataFrame:
    """Rows of every view find record, labelled with the full-view audit labels."""
    builds = logical_view(run.read(BUILDS), BUILD_KEY)
    return view_rows_from(run.manifest.get("config", {}), builds, view_records(run), labelled)


def view_rows_from(
    config: dict[str, Any],
    builds: dict[tuple, dict],
    records: dict[tuple, dict],
    labelled: pl.DataFrame,
) -> pl.DataFrame:
    """View rows of logical views of build and view-find records (keys BUILD_KEY and
    VIEW_FIND_KEY), labelled from the full-view rows `labelled`."""
    parts = []
    for name in sorted({key[0] for key in records}):
        finds = {key[1:]: rec for key, rec in records.items() if key[0] == name}
        rows = rows_from_finds(config, builds, finds)
        parts.append(rows.insert_column(0, pl.lit(name, pl.Utf8).alias("view")))
    if not parts:
        return empty_view_rows()
    return apply_labels(pl.concat(parts), labelled)


def apply_labels(view_rows: pl.DataFrame, labelled: pl.DataFrame) -> pl.DataFrame:
    """Copy each (artifact, question) pair's label and provenance from the full-view rows."""
    labels = (
        labelled.filter(pl.col("slice") == "formal")
        .select(*PAIR, "label", "label_source")
        .unique(PAIR, keep="first", maintain_order=True)
    )
    joined = view_rows.drop("label", "label_source").join(
        labels, on=PAIR, how="left", maintain_order="left"
    )
    joined = joined.with_columns(
        pl.col("label").fill_null("unlabeled"), pl.col("label_source").fill_null("none")
    )
    return conform_view_rows(joined.select("view", *COLUMNS))


def view_files(records: dict[tuple, dict]) -> pl.DataFrame:
    """Per (view, artifact): how many files the view kept and hid, and which it kept."""
    seen: dict[tuple, dict[str, Any]] = {}
    for key, rec in sorted(records.items()):
        view, _, task, builder, build_trial = key[:5]
        info = rec.get("view_info") or {}
        kept = list(info.get("kept_files") or [])
        seen.setdefault(
            (view, task, builder, build_trial),
            {
                "kept_files": len(kept),
                "hidden_files": len(info.get("hidden_files") or []),
                "kept": "; ".join(kept),
            },
        )
    schema = {
        "view": pl.Utf8,
        "task": pl.Utf8,
        "builder": pl.Utf8,
        "build_trial": pl.Int64,
        "kept_files": pl.Int64,
        "hidden_files": pl.Int64,
        "kept": pl.Utf8,
    }
    data = [
        dict(zip(("view", "task", "builder", "build_trial"), k, strict=True), **v)
        for k, v in seen.items()
    ]
    return pl.DataFrame(data, schema=schema)


def view_tables(
    rows: pl.DataFrame,
    view_rows: pl.DataFrame,
    full: dict[str, pl.DataFrame],
    panels: str = DEFAULT_PANELS,
    reading: Reading = SPLIT,
) -> dict[str, pl.DataFrame]:
    """view_accuracy, view_finder, view_rb_effort and view_recovery_gate for every view.

    `full` holds the full view's calibration, finder_calibration, rb_effort and recovery_gate
    (computed from `rows` with the same `panels` and `reading`). A view's tables read the
    pairs the full view's do (`analysis.pair_sets`): accuracy and finder recovery every pair
    (split reading), R_b and the recovery gate the panels' pairs. Returns {} when there are
    no view rows.
    """
    from metaeval.protocols.buildfind.analysis.finder_calibration import finder_calibration
    from metaeval.protocols.buildfind.analysis.suite import analyze

    if view_rows.height == 0:
        return {}
    controls = rows.filter(pl.col("slice") != "formal")
    parts: dict[str, list[pl.DataFrame]] = {
        "view_accuracy": [],
        "view_finder": [],
        "view_rb_effort": [],
        "view_recovery_gate": [],
    }
    for name in sorted(view_rows.get_column("view").unique().to_list()):
        whole = pl.concat([view_rows.filter(pl.col("view") == name).drop("view"), controls])
        frame = form_panels(whole, panels)[0].collect()
        tables = analyze(frame)
        pooled = analyze(whole) if reading == SPLIT and whole.height != frame.height else tables
        finders = finder_calibration(whole if pooled is not tables else frame)
        tag = pl.lit(name, pl.Utf8).alias("view")
        parts["view_accuracy"].append(_accuracy(pooled["calibration"], full["calibration"], tag))
        parts["view_finder"].append(_finder(finders, full["finder_calibration"], tag))
        parts["view_rb_effort"].append(_rb(tables["rb_effort"], full["rb_effort"], tag))
        parts["view_recovery_gate"].append(
            _gate(tables["recovery_gate"], full["recovery_gate"], tag)
        )
    return {name: pl.concat(frames, how="vertical") for name, frames in parts.items()}


def _pp(a: str, b: str) -> pl.Expr:
    return (pl.col(a) - pl.col(b)) * 100.0


def _accuracy(view: pl.DataFrame, full: pl.DataFrame, tag: pl.Expr) -> pl.DataFrame:
    qonly = view.filter(pl.col("slice") == "question_only").select(
        "task", question_only_accuracy="accuracy"
    )
    reference = full.select("slice", "task", full_view_accuracy="accuracy")
    return (
        view.filter(pl.col("slice").is_in(_FORMAL_GROUPS))
        .select("slice", "task", "builds", "finds", "accuracy", "perfect")
        .join(reference, on=["slice", "task"], how="left", maintain_order="left")
        .join(qonly, on="task", how="left", maintain_order="left")
        .select(
            tag,
            "slice",
            "task",
            "builds",
            "finds",
            "accuracy",
            "perfect",
            "full_view_accuracy",
            lift_vs_full_pp=_pp("accuracy", "full_view_accuracy"),
            question_only_accuracy="question_only_accuracy",
            lift_vs_question_only_pp=_pp("accuracy", "question_only_accuracy"),
        )
    )


def _finder(view: pl.DataFrame, full: pl.DataFrame, tag: pl.Expr) -> pl.DataFrame:
    reference = full.select("finder", full_view_recovery="formal_recovery")
    return (
        view.select("finder", "formal_runs", "formal_recovery", "question_only_accuracy")
        .join(reference, on="finder", how="left", maintain_order="left")
        .sort("finder")
        .select(
            tag,
            "finder",
            "formal_runs",
            recovery="formal_recovery",
            full_view_recovery="full_view_recovery",
            lift_vs_full_pp=_pp("formal_recovery", "full_view_recovery"),
            question_only_accuracy="question_only_accuracy",
            lift_vs_question_only_pp=_pp("formal_recovery", "question_only_accuracy"),
        )
    )


def _rb(view: pl.DataFrame, full: pl.DataFrame, tag: pl.Expr) -> pl.DataFrame:
    keys = ["effort_panel", "builder"]
    reference = full.filter(pl.col("metric") == "total_bytes").select(
        *keys, full_view_R_b="R_b", full_view_cells="cells"
    )
    return (
        view.filter(pl.col("metric") == "total_bytes")
        .select(*keys, "R_b", "cells", "total_cells")
        .join(reference, on=keys, how="left", maintain_order="left")
        .select(tag, *keys, "R_b", "cells", "total_cells", "full_view_R_b", "full_view_cells")
    )


def _gate(view: pl.DataFrame, full: pl.DataFrame, tag: pl.Expr) -> pl.DataFrame:
    keys = ["effort_panel", "builder", "task"]
    reference = full.select(*keys, full_view_G_task="G_task")
    return (
        view.select(*keys, "G_task", "contributing_cells", "total_cells")
        .join(reference, on=keys, how="left", maintain_order="left")
        .select(tag, *keys, "G_task", "contributing_cells", "total_cells", "full_view_G_task")
    )


def view_layer(
    run: RunDir, rows: pl.DataFrame, tables: dict[str, pl.DataFrame], panels: str = DEFAULT_PANELS
) -> dict:
    """Write view_rows.{parquet,csv} for a run with view records; return the view tables."""
    records = view_records(run)
    if not records:
        return {}
    view_rows = view_rows_from_records(run, rows)
    write_view_rows(view_rows, run.path)
    out = view_tables(rows, view_rows, tables, panels)
    out["view_files"] = view_files(records)
    return out
