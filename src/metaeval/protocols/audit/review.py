"""The review loop's sheet: where a person marks each reported finding confirmed, rejected or
unsure (with a note). The precision those verdicts give, the gold file of the confirmed
findings for the next audit of the benchmark and the `audit review` command are in
`review_results`.

The sheet is ``review.csv`` in the run directory, one row per reported finding of each source
(a model, or the static checks), columns `COLUMNS`. Rows are keyed by a finding id made from
what identifies the finding (task, source, subcategory, title, first citation), so writing the
sheet again after a resumed or extended run keeps every verdict and note already given; rows
of findings the run no longer has stay in the sheet and are counted as stale.

Reviewed precision (per source, and over all sources) = confirmed / (confirmed + rejected)
among the source's reported findings; unsure and unreviewed findings are counted but are in
neither term. It is a property of the reviewed findings only, not a recall.
"""

from __future__ import annotations

import csv
import fcntl
import hashlib
import io
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from metaeval.errors import ConfigError
from metaeval.protocols.audit.findings import SEVERITY_ORDER, Finding
from metaeval.protocols.audit.records import REVIEW_FILE
from metaeval.records.durable import atomic_write
from metaeval.records.nofollow import open_file, read_capped
from metaeval.safe_text import csv_cell, csv_value

COLUMNS = (
    "finding_id",
    "task",
    "subcategory",
    "severity",
    "tier",
    "source",
    "title",
    "verdict",
    "note",
)
VERDICTS = ("confirmed", "rejected", "unsure")
MAX_NOTE = 4000
MAX_SHEET_BYTES = 32 * 1024 * 1024
"""A review sheet larger than this is not read."""
ALL_SOURCES = "all sources"
_LOCK = threading.Lock()


def finding_id(f: Finding) -> str:
    """A short id that stays the same while the finding does (task, source, subcategory,
    title and first citation; a merged finding keeps its representative's first citation, so
    it gets the representative's id)."""
    first = f.evidence[0] if f.evidence else None
    key = [
        f.task_id,
        f.source,
        f.subcategory,
        f.title,
        [first.file, first.line_start, first.line_end] if first else None,
    ]
    digest = hashlib.sha256(json.dumps(key, ensure_ascii=False).encode("utf-8")).hexdigest()
    return "F-" + digest[:10]


@dataclass(frozen=True)
class ReviewRow:
    finding_id: str
    task: str
    subcategory: str
    severity: str
    tier: str
    source: str
    title: str
    verdict: str = ""  # "" = not reviewed yet
    note: str = ""

    def cells(self) -> list[str]:
        """The row as written: every cell guarded against formulas (`csv_cell`)."""
        return [csv_cell(str(getattr(self, c))) for c in COLUMNS]


def row_for(f: Finding) -> ReviewRow:
    return ReviewRow(
        finding_id=finding_id(f),
        task=f.task_id,
        subcategory=f.subcategory,
        severity=f.severity,
        tier=f.evidence_tier or "",
        source=f.source,
        title=" ".join(f.title.split()),
    )


def sheet_path(run_dir: Path) -> Path:
    return Path(run_dir) / REVIEW_FILE


def check_verdict(value: str, where: str, file: str) -> str:
    """A verdict as stored (lower case; "" = not reviewed), or a ConfigError naming `where`."""
    verdict = value.strip().lower()
    if verdict and verdict not in VERDICTS:
        raise ConfigError(
            f"unknown verdict '{value.strip()}' (expected {', '.join(VERDICTS)}, or empty for "
            "not reviewed)",
            file=file,
            field=where,
        )
    return verdict


def read_sheet(path: Path) -> list[ReviewRow]:
    """The rows of a review sheet; a bad header, verdict or duplicate id is a ConfigError
    naming the file, the row (as a spreadsheet numbers it, header = row 1) and the column."""
    file = str(path)
    try:
        data = read_capped(path, MAX_SHEET_BYTES)  # a link, FIFO or device is refused
        text = None if data is None else data.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the review sheet: {exc}", file=file) from None
    if text is None:
        raise ConfigError("no review sheet (write one with `metaeval audit review RUN`)", file=file)
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise ConfigError(
            f"missing column(s) {', '.join(missing)} (expected {', '.join(COLUMNS)})",
            file=file,
            field="row 1",
        )
    rows: list[ReviewRow] = []
    seen: dict[str, int] = {}
    for record in reader:
        line = reader.line_num
        values = {c: csv_value((record.get(c) or "").strip()) for c in COLUMNS}
        fid = values["finding_id"]
        if not fid:
            raise ConfigError("empty finding_id", file=file, field=f"row {line}, column finding_id")
        if fid in seen:
            raise ConfigError(
                f"finding {fid} is listed twice (also row {seen[fid]})",
                file=file,
                field=f"row {line}, column finding_id",
            )
        seen[fid] = line
        values["verdict"] = check_verdict(values["verdict"], f"row {line}, column verdict", file)
        rows.append(ReviewRow(**values))
    return rows


def write_sheet(path: Path, rows: list[ReviewRow]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(row.cells() for row in rows)
    atomic_write(path, buffer.getvalue().encode("utf-8"))


@contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """One writer of the sheet at a time (threads of the viewer, and processes)."""
    with _LOCK:
        fd = open_file(Path(run_dir) / ".review.lock", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def reported(findings: list[Finding]) -> list[Finding]:
    """The findings a sheet lists: reported ones, one per id, by task, severity, source."""
    by_id: dict[str, Finding] = {}
    for f in findings:
        if f.reported:
            by_id.setdefault(finding_id(f), f)
    return sorted(
        by_id.values(), key=lambda f: (f.task_id, SEVERITY_ORDER[f.severity], f.source, f.title)
    )


def merged_rows(findings: list[Finding], old: list[ReviewRow]) -> list[ReviewRow]:
    """Rows of the run's findings, each with the verdict and note already given to its id,
    then the old rows whose finding the run no longer has (kept: they are a person's work)."""
    given = {r.finding_id: r for r in old}
    rows = []
    for f in reported(findings):
        row = row_for(f)
        before = given.pop(row.finding_id, None)
        rows.append(
            row if before is None else replace(row, verdict=before.verdict, note=before.note)
        )
    return rows + list(given.values())


def write_review(run_dir: Path, findings: list[Finding]) -> tuple[Path, list[ReviewRow]]:
    """Write (or bring up to date) the run's review sheet; verdicts already given stay."""
    path = sheet_path(run_dir)
    with locked(run_dir):
        old = read_sheet(path) if os.path.lexists(path) else []
        rows = merged_rows(findings, old)
        write_sheet(path, rows)
    return path, rows


def set_verdict(
    run_dir: Path, findings: list[Finding], fid: str, verdict: str, note: str
) -> ReviewRow:
    """Record one verdict and note (the viewer's review controls); the sheet is written first
    when the run has none. Unknown ids and verdicts are ConfigErrors."""
    path = sheet_path(run_dir)
    verdict = check_verdict(verdict, "verdict", str(path))
    if len(note) > MAX_NOTE:
        raise ConfigError(f"note longer than {MAX_NOTE} characters", field="note")
    note = " ".join(note.split())
    with locked(run_dir):
        old = read_sheet(path) if os.path.lexists(path) else []
        rows = merged_rows(findings, old)
        for i, row in enumerate(rows):
            if row.finding_id == fid:
                rows[i] = replace(row, verdict=verdict, note=note)
                write_sheet(path, rows)
                return rows[i]
    raise ConfigError(f"no reported finding {fid!r} in this run", field="finding_id")


def verdicts(run_dir: Path) -> dict[str, ReviewRow]:
    """The sheet's rows by finding id ({} when the run has no sheet)."""
    path = sheet_path(run_dir)
    if not os.path.lexists(path):
        return {}
    return {r.finding_id: r for r in read_sheet(path)}
