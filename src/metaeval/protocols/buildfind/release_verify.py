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
   manifest recorded for them;
3. every analysis table recomputed from the released rows (``data/question_rows``, and
   ``data/view_rows``, ``data/builds``, the evidence-audit labels and the view records) equals
   the released table, in Parquet and in CSV: same tables, columns, types and row count,
   counts and labels exactly, floats within 1e-9;
4. the two copies of each rows table (Parquet, CSV) hold the same rows, and the rows follow
   from the released records (find answers, base-finder prelabels, the review CSV);
5. every claim of ``claims.json`` holds in the released tables and rows, and recomputing the
   claims gives the same map;
6. the Croissant metadata validates with mlcroissant and describes the released files.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from metaeval.errors import ConfigError, MetaevalError
from metaeval.protocols.buildfind.release_compare import compare_csv, compare_frames
from metaeval.tasks.safe_files import open_regular, read_regular, sha256_fd, walk_tree
from metaeval.tasks.safe_json import MAX_JSON_BYTES, json_type, parse_json, read_json

MAX_TEXT_BYTES = 64 * 1024 * 1024
"""SHA256SUMS and the pack's and prompts' text files: larger ones are not read."""
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


# ------------------------------------------------------------------------------- the tree


def release_files(root: Path) -> tuple[list[str], list[str]]:
    """(relative paths of the release's regular files, one problem per entry that is not a
    regular file or directory). Nothing is opened or followed."""
    files, problems = [], []
    for entry in walk_tree(root):
        if entry.kind == "file":
            files.append(entry.rel)
        elif entry.kind != "dir":
            problems.append(
                f"{entry.rel}: {entry.describe()}: a release holds only regular files "
                "and directories"
            )
    return files, problems


def _read_text(root: Path, rel: str) -> str:
    """A regular file of the release (no symlink), at most MAX_TEXT_BYTES, as text."""
    data = read_regular(root / rel, root, max_bytes=MAX_TEXT_BYTES, follow_inside_links=False)
    # as Path.read_text does: undecodable bytes replaced, universal newlines
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def file_sha256(root: Path, rel: str) -> str:
    """Hex SHA-256 of a regular file of the release (no symlink), read in chunks."""
    fd = open_regular(root / rel, root, follow_inside_links=False)
    try:
        return sha256_fd(fd)
    finally:
        os.close(fd)


def check_json_records(root: Path, files: list[str]) -> list[str]:
    """Lines of the released record files (``records/*.jsonl``) nested too deeply to read:
    the records' reader skips lines that are not JSON objects, but a line nested deeper than
    the parser can go would stop the verification without naming the file."""
    problems = []
    for rel in files:
        if not (rel.startswith("records/") and rel.endswith(".jsonl") and rel.count("/") == 1):
            continue
        fd = open_regular(root / rel, root, follow_inside_links=False)
        with os.fdopen(fd, "rb") as handle:
            for number, line in enumerate(iter(lambda: handle.readline(MAX_JSON_BYTES), b""), 1):
                if line.lstrip()[:1] not in (b"{", b"["):
                    continue  # not nested at all; the reader judges it
                try:
                    parse_json(line, f"{rel}: line {number}", expect=None)
                except ConfigError as exc:
                    if "nested deeper" in str(exc):
                        problems.append(str(exc))
    return problems


# ------------------------------------------------------------------------------- checksums


def check_checksums(root: Path, files: list[str] | None = None) -> list[str]:
    """Problems with SHA256SUMS: missing, unreadable lines, wrong hashes, unlisted files.
    `files` are the release's regular files (walked here when not given)."""
    from metaeval.protocols.buildfind.records import CHECKSUMS

    if files is None:
        files, problems = release_files(root)
        if problems:
            return problems
    present = set(files)
    if CHECKSUMS not in present:
        return [f"{CHECKSUMS}: missing"]
    problems, listed = [], set()
    for number, line in enumerate(_read_text(root, CHECKSUMS).splitlines(), 1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64 or rel.startswith("/") or ".." in rel.split("/"):
            problems.append(f"{CHECKSUMS}: line {number} is not '<sha256>  <relative path>'")
            continue
        listed.add(rel)
        if rel not in present:
            problems.append(f"{rel}: listed in {CHECKSUMS} but missing")
        elif file_sha256(root, rel) != digest:
            problems.append(f"{rel}: SHA-256 differs from {CHECKSUMS}")
    for rel in sorted(present - listed - {CHECKSUMS}):
        problems.append(f"{rel}: not listed in {CHECKSUMS}")
    return problems


# ------------------------------------------------------------------------------- inputs


def check_input_hashes(root: Path, manifest: dict[str, Any]) -> list[str]:
    """Specs, question banks and prompt templates against the hashes of the run's manifest."""
    layers = manifest.get("layers")
    last = layers[-1] if isinstance(layers, list) and layers else {}
    hashes = (last.get("hashes") if isinstance(last, dict) else None) or manifest.get("hashes")
    hashes = hashes or {}
    if not isinstance(hashes, dict):
        return [f"records/manifest.json: field 'hashes' is {json_type(hashes)}, not an object"]
    problems = []
    for name, expected in sorted(hashes.items()):
        kind, _, key = name.partition(":")
        if kind == "spec":
            rel = f"pack/{key}/spec.yaml"
        elif kind == "question_bank":
            rel = f"pack/{key}/questions.yaml"
        elif kind == "prompt" and key.startswith("buildfind_"):
            rel = f"prompts/{key.removeprefix('buildfind_')}.txt"
        else:
            continue
        if not (root / rel).is_file():
            problems.append(f"{rel}: missing (the manifest records {name})")
            continue
        text = _read_text(root, rel)
        if "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest() != expected:
            problems.append(f"{rel}: differs from the {name} hash in records/manifest.json")
    return problems


# ------------------------------------------------------------------------------- tables


def recompute(root: Path) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame], list[str]]:
    """(recomputed tables, rows frames by released path, problems reading the data)."""
    from metaeval.protocols.buildfind.analysis.evidence_audit import evidence_audit_summary
    from metaeval.protocols.buildfind.finalize import analyze_rows
    from metaeval.protocols.buildfind.record_files import RecordFiles
    from metaeval.protocols.buildfind.records import VIEW_FIND_KEY, VIEW_FINDS, logical_view
    from metaeval.protocols.buildfind.rows import read_rows
    from metaeval.protocols.buildfind.view_evidence import read_view_rows, view_files, view_tables

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
    from metaeval.protocols.buildfind.finalize import mark_self_labelled, self_labelled_finders

    config = RecordFiles(root / "records").manifest.get("config", {})
    tables = analyze_rows(
        rows,
        builds,
        config.get("panels", "matched"),
        config.get("finders", []),
        config.get("seed0"),
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
        tables.update(view_tables(rows, view_rows, tables, config.get("panels", "matched")))
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


def check_rows_from_records(root: Path, frames: dict[str, pl.DataFrame]) -> list[str]:
    """The released rows against rows derived again from the released records: the find
    records' answers, the consensus prelabels of the run's base finders and the review CSV."""
    from metaeval.protocols.buildfind.extract import rows_from_finds
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
    from metaeval.protocols.buildfind.view_evidence import view_rows_from

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
    problems = compare_frames(label, frames["data/question_rows.parquet"], derived)
    if "data/view_rows.parquet" in frames:
        views = view_rows_from(
            config, builds, logical_view(records.read(VIEW_FINDS), VIEW_FIND_KEY), derived
        )
        label = "data/view_rows.parquet (derived from records/view_finds.jsonl)"
        problems += compare_frames(label, frames["data/view_rows.parquet"], views)
    return problems


TABLES_ADDED_LATER = frozenset(
    {
        "affinity_matrix",
        "affinity_matrix_family",
        "bootstrap_ci",
        "low_prior_rb_effort",
        "paper_table1",
        "paper_table2",
        "paper_table3",
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
        problems += compare_frames(f"tables/{name}.parquet", released[name], recomputed[name])
        csv_path = root / "tables" / f"{name}.csv"
        if not csv_path.is_file():
            problems.append(f"tables/{name}.csv: missing")
        else:
            problems += compare_csv(f"tables/{name}.csv", csv_path, recomputed[name])
    return problems


# ------------------------------------------------------------------------------- claims


def check_claims(
    root: Path, recomputed: dict[str, pl.DataFrame], frames: dict[str, pl.DataFrame]
) -> list[str]:
    """Every released claim holds in the released tables and rows, and recomputes the same."""
    from metaeval.protocols.buildfind.claims import claims, count_rows, same_value, with_row_counts
    from metaeval.protocols.buildfind.records import CLAIMS

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
    from metaeval.protocols.buildfind.croissant import validate_croissant
    from metaeval.protocols.buildfind.record_files import RecordFiles

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
    problems += _checked("records", lambda: check_rows_from_records(root, frames))
    problems += _checked("tables", lambda: check_tables(root, recomputed))
    problems += _checked("claims.json", lambda: check_claims(root, recomputed, frames))
    problems += _checked("croissant.json", lambda: validate_croissant(root))
    return problems
