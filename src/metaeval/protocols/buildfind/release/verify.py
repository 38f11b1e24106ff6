"""`metaeval buildfind verify-release OUT`: does a release reproduce itself?

A release is input from anyone: before anything in it is read, its tree must hold only
regular files and directories. A symlink (inside the release or leading out of it), a FIFO, a
socket or a device file fails the verification at once, each named, and nothing is opened
(a link could make a release that reads outside itself pass; a FIFO would block). The JSON
files it parses are read through `metaeval.tasks.safe_json` (size and nesting capped, the top
level type checked) and files are hashed in chunks, so neither a hostile document nor a huge
(sparse) file can crash or exhaust the verifier. Then the checks, each difference reported as
one line naming the file (and the row and column):

1. every file listed in SHA256SUMS exists with that SHA-256, and no file is unlisted;
2. the pack's specs and question banks and the prompt templates have the hashes the run's
   manifest recorded for them (1 and 2, and the tree check, are in `integrity`);
3. every analysis table recomputed from the released rows (``data/question_rows``, and
   ``data/view_rows``, ``data/builds``, the evidence-audit labels and the view records) equals
   the released table, in Parquet and in CSV: same tables, columns, types and row count,
   counts and labels exactly, floats within 1e-9;
4. the two copies of each rows table (Parquet, CSV) hold the same columns and rows, and the
   rows follow from the released records (find answers, run metadata, base-finder prelabels,
   the review CSV). A rows file may lack only whole groups of columns added after it was
   written (`rows.ADDED_COLUMNS`): it is compared on the columns it has; a file of the current
   format has every column, and every column is compared;
5. every claim of ``claims.json`` holds in the released tables and rows, and recomputing the
   claims gives the same map;
6. the Croissant metadata validates with mlcroissant and describes the released files;
7. each released artifact's leakage scan, and each build's relaxed-probe outcome in
   ``data/builds``, is what its build record holds (`scans`);
8. every record's seed and every find's option order follow from seed0 (`seeds`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from metaeval.errors import ConfigError, MetaevalError
from metaeval.protocols.buildfind.analysis.pair_sets import Reading
from metaeval.protocols.buildfind.release.compare import compare_csv, compare_frames
from metaeval.protocols.buildfind.release.integrity import (
    check_blobs,
    check_checksums,
    check_input_hashes,
    check_json_records,
    release_files,
)
from metaeval.protocols.buildfind.release.scans import check_artifact_scans
from metaeval.protocols.buildfind.release.seeds import check_seeds
from metaeval.tasks.safe_json import json_type, read_json

INPUT_ERRORS = (
    MetaevalError,
    pl.exceptions.PolarsError,
    OSError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    RecursionError,
)
"""What a malformed release can make a check raise: reported as a problem, never raised."""


def load_released_tables(root: Path) -> dict[str, pl.DataFrame]:
    """Every ``tables/<name>.parquet`` of a release (or run) directory, by name.

    Raises ConfigError naming the first file that is not a readable Parquet table.
    """
    tables, problems = _read_tables(Path(root))
    if problems:
        raise ConfigError(problems[0])
    return tables


def _read_tables(root: Path) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """Readable tables by name, and one problem per table file that cannot be read."""
    tables, problems = {}, []
    for path in sorted((root / "tables").glob("*.parquet")):
        try:
            tables[path.stem] = pl.read_parquet(path)
        except (pl.exceptions.PolarsError, OSError) as exc:
            rel = path.relative_to(root).as_posix()
            problems.append(f"{rel}: not a readable Parquet table ({exc})")
    return tables, problems


def _checked(step: str, check: Callable[[], list[str]]) -> list[str]:
    """Run one check; a failure to check at all is itself reported, never raised."""
    try:
        return check()
    except INPUT_ERRORS as exc:
        return [f"{step}: cannot check: {_error_text(exc)}"]


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "data nested too deeply to read"
    if isinstance(exc, TypeError | AttributeError | IndexError):
        return f"a file has an unexpected shape ({type(exc).__name__}: {exc})"
    return str(exc)


# ------------------------------------------------------------------------------- tables


def recompute(root: Path) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame], list[str]]:
    """(recomputed tables, rows frames by released path, problems reading the data)."""
    from metaeval.protocols.buildfind.analysis.evidence_audit import evidence_audit_summary
    from metaeval.protocols.buildfind.finalize import analyze_rows
    from metaeval.protocols.buildfind.record_files import RecordFiles
    from metaeval.protocols.buildfind.records import VIEW_FIND_KEY, VIEW_FINDS, logical_view
    from metaeval.protocols.buildfind.rows.table import read_rows
    from metaeval.protocols.buildfind.views.evidence import read_view_rows, view_files, view_tables

    problems: list[str] = []
    frames: dict[str, pl.DataFrame] = {}
    rows = read_rows(root / "data" / "question_rows.parquet")
    frames["data/question_rows.parquet"] = rows
    problems += compare_frames(
        "data/question_rows.csv", read_rows(root / "data" / "question_rows.csv"), rows
    )
    builds_path = root / "data" / "builds.parquet"
    builds = pl.read_parquet(builds_path) if builds_path.is_file() else None
    if builds is None:
        problems.append("data/builds.parquet: missing")
    from metaeval.protocols.buildfind.finalize import (
        mark_self_labelled,
        run_find_pairs,
        self_labelled_finders,
    )

    config = RecordFiles(root / "records").manifest.get("config", {})
    tables = analyze_rows(
        rows,
        builds,
        config.get("panels", "matched"),
        config.get("finders", []),
        config.get("seed0"),
        reading=released_reading(root),
        find_pairs=run_find_pairs(config),
    )
    base_finders = list(config.get("base_finders", []))
    mark_self_labelled(tables, self_labelled_finders(rows, base_finders))
    view_path = root / "data" / "view_rows.parquet"
    if view_path.is_file():
        view_rows = read_view_rows(view_path)
        frames["data/view_rows.parquet"] = view_rows
        problems += compare_frames(
            "data/view_rows.csv", read_view_rows(root / "data" / "view_rows.csv"), view_rows
        )
        panels = config.get("panels", "matched")
        tables.update(view_tables(rows, view_rows, tables, panels, released_reading(root)))
        records = RecordFiles(root / "records")
        tables["view_files"] = view_files(logical_view(records.read(VIEW_FINDS), VIEW_FIND_KEY))
    if (root / "tables" / "failed_cells.parquet").is_file():
        from metaeval.protocols.buildfind.failures import failed_cells

        # counted from the build and find records, not from the rows
        tables["failed_cells"] = failed_cells(RecordFiles(root / "records"))
    audit = root / "labels" / "evidence_audit.csv"
    if audit.is_file():
        labelled = pl.read_csv(audit, infer_schema_length=0).with_columns(
            pl.col("evidence_label").fill_null("")
        )
        released_summary = (root / "tables" / "evidence_audit_summary.parquet").is_file()
        if released_summary or (labelled.get_column("evidence_label") != "").any():
            # the run summarizes the sample once a label is filled in (pipeline.evidence_audit)
            tables["evidence_audit_summary"] = evidence_audit_summary(labelled)
    return tables, frames, problems


def released_reading(root: Path) -> Reading:
    """How the release's tables read the pairs (`analysis.pair_sets`): a release holding
    `table_pairs` splits pooled and per-panel tables; one made before it read every table on
    the panels' pairs, and is recomputed that way."""
    from metaeval.protocols.buildfind.analysis.pair_sets import LEGACY, SPLIT, TABLE

    return SPLIT if (root / "tables" / f"{TABLE}.parquet").is_file() else LEGACY


def check_rows_from_records(root: Path, frames: dict[str, pl.DataFrame]) -> list[str]:
    """The released rows against rows derived again from the released records: the find
    records' answers, the consensus prelabels of the run's base finders and the review CSV."""
    from metaeval.protocols.buildfind.labels import apply_labels, consensus_prelabels
    from metaeval.protocols.buildfind.record_files import RecordFiles
    from metaeval.protocols.buildfind.records import (
        BUILD_KEY,
        BUILDS,
        FIND_KEY,
        FINDS,
        VIEW_FIND_KEY,
        VIEW_FINDS,
        logical_view,
    )
    from metaeval.protocols.buildfind.review_csv import read_review_csv
    from metaeval.protocols.buildfind.rows.extract import rows_from_finds
    from metaeval.protocols.buildfind.rows.table import file_columns, without_lacking
    from metaeval.protocols.buildfind.views.evidence import view_rows_from

    records = RecordFiles(root / "records")
    config = records.manifest.get("config", {})
    builds = logical_view(records.read(BUILDS), BUILD_KEY)
    derived = rows_from_finds(config, builds, logical_view(records.read(FINDS), FIND_KEY))
    base = list(config.get("base_finders", []))
    prelabels = consensus_prelabels(derived, base) if base else None
    review = root / "labels" / "review.csv"
    derived = apply_labels(
        derived, prelabels, read_review_csv(review) if review.is_file() else None
    )
    label = "data/question_rows.parquet (derived from records/finds.jsonl and labels/review.csv)"
    rows = frames["data/question_rows.parquet"]
    columns = file_columns(root / "data" / "question_rows.parquet")
    problems = compare_frames(label, rows, without_lacking(derived, columns))
    if "data/view_rows.parquet" in frames:
        views = view_rows_from(
            config, builds, logical_view(records.read(VIEW_FINDS), VIEW_FIND_KEY), derived
        )
        label = "data/view_rows.parquet (derived from records/view_finds.jsonl)"
        columns = file_columns(root / "data" / "view_rows.parquet")
        problems += compare_frames(
            label, frames["data/view_rows.parquet"], without_lacking(views, columns)
        )
    return problems


def check_rows_columns(root: Path) -> list[str]:
    """Each rows table lacks no column but whole groups a format before them lacked
    (`rows.missing_generations`; such a file is compared on the columns it has), and its CSV
    copy holds the columns its Parquet copy holds."""
    from metaeval.protocols.buildfind.rows.table import file_columns, missing_generations

    problems = []
    for stem in ("question_rows", "view_rows"):
        parquet, csv = root / "data" / f"{stem}.parquet", root / "data" / f"{stem}.csv"
        _, problem = missing_generations(file_columns(parquet)) if parquet.is_file() else ([], None)
        if problem:
            problems.append(f"data/{stem}.parquet: {problem}")
        if parquet.is_file() and csv.is_file() and file_columns(parquet) != file_columns(csv):
            problems.append(
                f"data/{stem}.csv: columns {file_columns(csv)} differ from "
                f"data/{stem}.parquet's {file_columns(parquet)}"
            )
    return problems


TABLES_ADDED_LATER = frozenset(
    {
        "affinity_matrix",
        "affinity_matrix_family",
        "bootstrap_ci",
        "core_finders",
        "effort_accuracy",
        "evidence_audit_rule",
        "low_prior_rb_effort",
        "paper_table1",
        "paper_table2",
        "paper_table3",
        "relaxed_probe",
        "robustness_pivots",
    }
)
"""Tables newer code computes that a release made before them lacks (checked when present)."""


def check_tables(root: Path, recomputed: dict[str, pl.DataFrame]) -> list[str]:
    """Released tables (Parquet and CSV) against the recomputed ones."""
    released, problems = _read_tables(root)
    unreadable = {p.split(":", 1)[0] for p in problems}
    problems += [
        f"tables/{n}.parquet: missing (recomputed)"
        for n in sorted(set(recomputed) - set(released))
        if f"tables/{n}.parquet" not in unreadable and n not in TABLES_ADDED_LATER
    ]
    problems += [
        f"tables/{n}.parquet: not produced by recomputing from the rows"
        for n in sorted(set(released) - set(recomputed))
    ]
    for name in sorted(set(released) & set(recomputed)):
        expected, differences = _layout_of(name, released[name], recomputed)
        problems += differences
        csv_path = root / "tables" / f"{name}.csv"
        if not csv_path.is_file():
            problems.append(f"tables/{name}.csv: missing")
        else:
            problems += compare_csv(f"tables/{name}.csv", csv_path, expected)
    return problems


def _layout_of(
    name: str, released: pl.DataFrame, recomputed: dict[str, pl.DataFrame]
) -> tuple[pl.DataFrame, list[str]]:
    """The recomputed table in the layout the release holds, and how the released table
    differs from it: the current layout, unless the release differs from it and matches an
    earlier layout (`EARLIER_LAYOUTS`) exactly."""
    from metaeval.protocols.buildfind.release.earlier_layouts import EARLIER_LAYOUTS

    label = f"tables/{name}.parquet"
    current = recomputed[name]
    differences = compare_frames(label, released, current)
    if differences:
        for _why, layout in EARLIER_LAYOUTS.get(name, []):
            earlier = layout(recomputed)
            if not compare_frames(label, released, earlier):
                return earlier, []
    return current, differences


# ------------------------------------------------------------------------------- claims


def check_claims(
    root: Path, recomputed: dict[str, pl.DataFrame], frames: dict[str, pl.DataFrame]
) -> list[str]:
    """Every released claim holds in the released tables and rows, and recomputes the same."""
    from metaeval.protocols.buildfind.records import CLAIMS
    from metaeval.protocols.buildfind.report.claims import (
        claims,
        count_rows,
        same_value,
        with_row_counts,
    )

    try:
        released = read_json(root / CLAIMS, root, expect=list)
    except ConfigError as exc:
        return [f"{CLAIMS}: unreadable ({str(exc).removeprefix(f'{root / CLAIMS}: ')})"]
    tables = _read_tables(root)[0]
    problems = []
    for claim in released:
        try:
            cid, table, where, column = claim["id"], claim["table"], claim["where"], claim["column"]
        except (KeyError, TypeError):
            problems.append(f"{CLAIMS}: a claim lacks id, table, where or column")
            continue
        if not isinstance(where, dict):
            problems.append(f"{CLAIMS}: claim {cid}: 'where' is {json_type(where)}, not an object")
            continue
        df = tables.get(table) if isinstance(table, str) else None
        if df is None or column not in df.columns:
            problems.append(f"{CLAIMS}: claim {cid}: no table {table} with column {column}")
            continue
        for key, value in where.items():
            df = df.filter(pl.col(key) == value) if key in df.columns else df.clear()
        if df.height != 1:
            problems.append(f"{CLAIMS}: claim {cid}: {df.height} rows of {table} match {where}")
        elif not same_value(df.get_column(column)[0], claim.get("value")):
            problems.append(
                f"{CLAIMS}: claim {cid}: value {claim.get('value')!r}, but tables/{table} "
                f"holds {df.get_column(column)[0]!r}"
            )
        if claim.get("n_rows") is not None and count_rows(claim, frames) != claim["n_rows"]:
            problems.append(
                f"{CLAIMS}: claim {cid}: n_rows {claim['n_rows']}, but the released rows give "
                f"{count_rows(claim, frames)}"
            )
    again = {c["id"]: c for c in with_row_counts(claims(recomputed), frames)}
    have = {c.get("id"): c for c in released if isinstance(c, dict)}
    for cid in sorted(set(again) - set(have)):
        problems.append(f"{CLAIMS}: claim {cid} is missing (recomputed)")
    for cid in sorted(set(have) - set(again), key=str):
        problems.append(f"{CLAIMS}: claim {cid} does not follow from the recomputed tables")
    for cid in sorted(set(again) & set(have)):
        a, b = have[cid], again[cid]
        if not same_value(a.get("value"), b["value"]) or a.get("n_rows") != b["n_rows"]:
            problems.append(
                f"{CLAIMS}: claim {cid}: released {a.get('value')!r} over {a.get('n_rows')} rows, "
                f"recomputed {b['value']!r} over {b['n_rows']} rows"
            )
    return problems


# ------------------------------------------------------------------------------- all


def verify_release(root: Path) -> list[str]:
    """Every difference between what the release holds and what it reproduces; [] when sound."""
    from metaeval.protocols.buildfind.record_files import RecordFiles
    from metaeval.protocols.buildfind.release.croissant_check import validate_croissant

    root = Path(root)
    if not root.is_dir():
        return [f"{root}: not a directory"]
    files, problems = release_files(root)
    if problems:
        return [*problems, "nothing else was checked: a release holding these is not read"]
    problems = _checked("records", lambda: check_json_records(root, files))
    if problems:
        return problems
    problems = _checked("SHA256SUMS", lambda: check_checksums(root, files))
    problems += _checked("records/blobs", lambda: check_blobs(root, files))
    try:
        manifest = RecordFiles(root / "records").manifest
    except INPUT_ERRORS as exc:
        problems.append(f"records/manifest.json: {_error_text(exc)}")
        manifest = {}
    problems += _checked("records/manifest.json", lambda: check_input_hashes(root, manifest))
    try:
        recomputed, frames, data_problems = recompute(root)
    except INPUT_ERRORS as exc:
        problems.append(f"cannot recompute the tables: {_error_text(exc)}")
        return problems
    problems += data_problems
    problems += _checked("data", lambda: check_rows_columns(root))
    problems += _checked("records", lambda: check_rows_from_records(root, frames))
    problems += _checked("artifacts", lambda: check_artifact_scans(root))
    problems += _checked("seeds", lambda: check_seeds(root))
    problems += _checked("tables", lambda: check_tables(root, recomputed))
    problems += _checked("claims.json", lambda: check_claims(root, recomputed, frames))
    problems += _checked("croissant.json", lambda: validate_croissant(root))
    return problems
